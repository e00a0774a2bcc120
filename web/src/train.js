// Training playground: trains numr_web's MLP or DigitsCNN on WebGPU (web/py/train.py -> numr_web.training), live
// loss chart, drawing pad classified by the model (also while it trains).
// URL parameters set the controls: ?model=mlp|cnn&channels=16&hidden=32&layers=1&epochs=5&batch=64&lr=0.01&activation=relu
//   &optimizer=adam&autostart=1 (&mode=main: everything on the page's thread)
// window.numrTrain (for tests): {state: idle|training|stopping|stopped|done|error, result, losses,
//   accs, error, statusLog: [{text, step}]}; window.numrClassify(pixels) -> Promise<10 probabilities>.
import { ready, params, showError, clearError, errorText } from './app.js';
import { drawChart } from './chart.js';
import trainPy from '../py/train.py?raw';

const $ = (id) => document.getElementById(id);
const SELECTS = ['model', 'activation', 'optimizer'];
for (const k of ['model', 'channels', 'hidden', 'layers', 'epochs', 'batch', 'lr', 'activation', 'optimizer']) {
  if (!params.has(k)) continue;
  const el = $(k), v = params.get(k);
  // a choice from the URL that is not on the menu: the default stays, the message sits beside the field
  // (numbers go into their fields as given and are checked like typed ones when Train is pressed)
  if (SELECTS.includes(k) && ![...el.options].some((o) => o.value === v)) {
    const choices = [...el.options].map((o) => o.value).join(', ');
    fieldError(k, `${k}=${v} (from the URL) is not one of ${choices}; using ${el.value}`);
  } else {
    el.value = v;
  }
}
const ui = window.numrTrain = { state: 'idle', result: null, losses: [], accs: [], error: null, statusLog: [], totalSteps: 0 };
let client = null;
let hasModel = false;        // a run has built a model (from its 'start' event on)
let trained = false;         // ... and taken at least one step: classifying means something
const NOT_TRAINED = 'model not trained yet: the first training step is being prepared (the kernels compile on first use)';

function status(text) {
  $('train-status').textContent = text;
  ui.statusLog.push({ text, step: ui.losses.length });
}

// -- settings: checked here, with the message next to the field ---------------------------------------
const FIELDS = {
  hidden: { int: true, min: 1, max: 1024, what: 'hidden units' },
  layers: { int: true, min: 1, max: 4, what: 'hidden layers' },
  epochs: { int: true, min: 1, max: 200, what: 'epochs' },
  batch: { int: true, min: 1, max: 1438, what: 'batch size' },
  lr: { int: false, min: 0, max: 10, what: 'learning rate', openMin: true },
  channels: { int: true, min: 1, max: 128, what: 'conv channels', cnnOnly: true },
};
const isCNN = () => $('model').value === 'cnn';
/** The CNN has conv channels and no layers / activation settings: show the fields that apply. */
function showModelFields() {
  const cnn = isCNN();
  $('channels-field').hidden = !cnn;
  for (const el of document.querySelectorAll('.mlp-only')) {
    el.hidden = cnn;
    for (const input of el.querySelectorAll('input, select')) input.disabled = cnn;
  }
}
function fieldError(id, msg) {
  const input = $(id), err = $(`${id}-error`);
  err.textContent = msg || '';
  if (msg) input.setAttribute('aria-invalid', 'true'); else input.removeAttribute('aria-invalid');
}
/** -> the settings, or null after putting a message next to every bad field. */
function readSettings() {
  const cfg = { model: $('model').value, activation: $('activation').value, optimizer: $('optimizer').value,
    device: client ? client.info.device : 'webgpu' };
  let ok = true, first = null;
  for (const [id, f] of Object.entries(FIELDS)) {
    if ((f.cnnOnly && !isCNN()) || (isCNN() && id === 'layers')) { fieldError(id, ''); continue; }
    const raw = $(id).value.trim(), v = Number(raw);
    let msg = '';
    if (raw === '' || !Number.isFinite(v)) msg = `enter a number`;
    else if (f.int && !Number.isInteger(v)) msg = `enter a whole number`;
    else if (f.openMin ? v <= f.min : v < f.min) msg = f.openMin ? `must be more than ${f.min}` : `at least ${f.min}`;
    else if (v > f.max) msg = `at most ${f.max}`;
    fieldError(id, msg ? `${f.what}: ${msg}` : '');
    if (msg) { ok = false; first = first || id; } else cfg[id] = v;
  }
  if (first) $(first).focus();
  return ok ? cfg : null;
}

// -- chart ------------------------------------------------------------------------------------------------
let chartQueued = false;
function redraw() {
  drawChart($('chart'), ui);
  const last = ui.losses[ui.losses.length - 1], acc = ui.accs[ui.accs.length - 1];
  $('chart').setAttribute('aria-label', ui.losses.length
    ? `Loss chart: ${ui.losses.length} steps, latest loss ${last.loss.toFixed(3)}` +
      (acc ? `, test accuracy ${(100 * acc.acc).toFixed(1)}% after epoch ${ui.accs.length}` : '')
    : 'Loss chart: no training run yet');
}
const queueChart = () => {
  if (!chartQueued) { chartQueued = true; requestAnimationFrame(() => { chartQueued = false; redraw(); }); }
};
new ResizeObserver(queueChart).observe($('chart'));

// -- training ------------------------------------------------------------------------------------------------
let compileTimer = null;
function onEvent(d) {
  if (d.kind === 'start') {
    hasModel = true; trained = false; $('classify').disabled = false;
    ui.totalSteps = d.total_steps;
    $('train-progress').max = d.total_steps;
    $('train-progress').removeAttribute('value');          // indeterminate until step 1
    const t0 = performance.now();
    const tick = () => status(`training ${d.sizes.join('→')} on ${d.n_train} images: preparing step 1 ` +
      `${client && client.info.device === 'webgpu' ? '(compiling the WebGPU kernels on first use)' : '(on the cpu device)'}… ${((performance.now() - t0) / 1000).toFixed(0)} s`);
    tick();
    compileTimer = setInterval(tick, 1000);
  } else if (d.kind === 'step') {
    if (compileTimer) { clearInterval(compileTimer); compileTimer = null; }
    if (d.step === 1) performance.mark('numr-train-step1');
    trained = true;
    ui.losses.push({ step: d.step, loss: d.loss });
    $('train-progress').value = d.step;
    if (ui.state === 'training') status(`epoch ${d.epoch.toFixed(2)} · step ${d.step}/${ui.totalSteps} · loss ${d.loss.toFixed(4)}`);
  } else if (d.kind === 'epoch') {
    ui.accs.push({ step: d.step, acc: d.test_acc });
    $('test-acc').textContent = `${(100 * d.test_acc).toFixed(1)}%`;
    $('train-time').textContent = `epoch ${d.epoch}, ${d.elapsed_s.toFixed(1)} s`;
  }
  queueChart();
}

async function train() {
  const cfg = readSettings();
  if (!cfg || !client) return;
  clearError();
  $('train').disabled = true; $('stop').disabled = false;
  performance.clearMarks('numr-train-step1'); performance.clearMarks('numr-train-end');
  Object.assign(ui, { state: 'training', result: null, losses: [], accs: [], error: null, statusLog: [], totalSteps: 0 });
  $('test-acc').dataset.value = ''; $('test-acc').textContent = '–'; $('train-time').textContent = '';
  status('starting…');
  redraw();
  try {
    const r = await client.call('train_run', cfg, { onEvent, stoppable: true });
    performance.mark('numr-train-end');
    ui.result = r;
    $('test-acc').textContent = `${(100 * r.test_acc).toFixed(1)}%`;
    $('test-acc').dataset.value = String(r.test_acc);
    ui.state = r.stopped ? 'stopped' : 'done';
    status(r.stopped
      ? `stopped after step ${r.steps} (epoch ${r.epochs}, ${r.seconds.toFixed(1)} s): test accuracy ${(100 * r.test_acc).toFixed(1)}%`
      : `done: ${r.steps} steps in ${r.seconds.toFixed(1)} s, test accuracy ${(100 * r.test_acc).toFixed(1)}%`);
    clearError();
    if (padHasInk()) classifyPad();
  } catch (err) {
    ui.state = 'error'; ui.error = errorText(err);
    status('training failed: ' + ui.error);
    showError(err, 'training');
  } finally {
    if (compileTimer) { clearInterval(compileTimer); compileTimer = null; }
    $('train').disabled = false; $('stop').disabled = true;
    redraw();
  }
}
function stop() {
  if (ui.state !== 'training' || !client) return;
  ui.state = 'stopping';
  $('stop').disabled = true;
  status(`stopping after step ${ui.losses.length + 1}…`);
  client.stop();
}

// -- drawing pad -----------------------------------------------------------------------------------------
const pad = $('pad'), pg = pad.getContext('2d', { willReadFrequently: true });
function clearPad() {
  pg.fillStyle = 'black'; pg.fillRect(0, 0, pad.width, pad.height);
  $('preview').getContext('2d').clearRect(0, 0, 128, 128);
  $('prediction').textContent = '–'; $('prediction').dataset.value = ''; $('probs').innerHTML = '';
  $('classify-error').textContent = '';
}
let drawing = false, last = null;
const pos = (e) => { const r = pad.getBoundingClientRect(); return [(e.clientX - r.left) * pad.width / r.width, (e.clientY - r.top) * pad.height / r.height]; };
pad.addEventListener('pointerdown', (e) => { drawing = true; last = pos(e); pad.setPointerCapture(e.pointerId); stroke(last); });
pad.addEventListener('pointermove', (e) => { if (drawing) stroke(pos(e)); });
const endStroke = () => { if (drawing) { drawing = false; if (hasModel) classifyPad(); else previewPad(); } };
pad.addEventListener('pointerup', endStroke);
pad.addEventListener('pointercancel', endStroke);
function stroke(p) {
  pg.strokeStyle = 'white'; pg.lineWidth = 20; pg.lineCap = 'round'; pg.lineJoin = 'round';
  pg.beginPath(); pg.moveTo(...last); pg.lineTo(...p); pg.stroke();
  last = p;
}
function padHasInk() {
  const d = pg.getImageData(0, 0, pad.width, pad.height).data;
  for (let i = 0; i < d.length; i += 4) if (d[i] > 0) return true;
  return false;
}

/** The pad as the digits data set sees digits: the ink's bounding box, centred in a square, drawn into a
 * 32x32 bitmap, then the count of ink pixels in each 4x4 block (0..16), row-major 8x8. */
export function padPixels() {
  const W = pad.width, H = pad.height, d = pg.getImageData(0, 0, W, H).data;
  let x0 = W, y0 = H, x1 = -1, y1 = -1;
  for (let y = 0; y < H; y++) for (let x = 0; x < W; x++) {
    if (d[(y * W + x) * 4] > 64) { x0 = Math.min(x0, x); x1 = Math.max(x1, x); y0 = Math.min(y0, y); y1 = Math.max(y1, y); }
  }
  if (x1 < 0) return new Array(64).fill(0);
  const side = Math.max(x1 - x0, y1 - y0) + 1, cx = (x0 + x1) / 2, cy = (y0 + y1) / 2;
  const off = document.createElement('canvas'); off.width = off.height = 32;
  const og = off.getContext('2d', { willReadFrequently: true });
  og.fillStyle = 'black'; og.fillRect(0, 0, 32, 32);
  og.imageSmoothingEnabled = true; og.imageSmoothingQuality = 'high';
  og.drawImage(pad, cx - side / 2, cy - side / 2, side, side, 2, 2, 28, 28);  // 2 px margin like UCI
  const b = og.getImageData(0, 0, 32, 32).data, out = new Array(64).fill(0);
  for (let y = 0; y < 32; y++) for (let x = 0; x < 32; x++) {
    if (b[(y * 32 + x) * 4] >= 96) out[(y >> 2) * 8 + (x >> 2)] += 1;
  }
  return out;
}
function previewPad(pixels = padPixels()) {
  const g = $('preview').getContext('2d');
  pixels.forEach((v, i) => { const c = Math.round((255 * v) / 16); g.fillStyle = `rgb(${c},${c},${c})`; g.fillRect((i % 8) * 16, Math.floor(i / 8) * 16, 16, 16); });
  return pixels;
}
async function classifyPixels(pixels) {
  const c = await ready;
  return Array.from(await c.call('classify', pixels));
}
async function classifyPad() {
  const pixels = previewPad();
  $('classify-error').textContent = '';
  if (!trained) {
    $('prediction').textContent = '–'; $('prediction').dataset.value = ''; $('probs').innerHTML = '';
    $('classify-error').textContent = NOT_TRAINED;
    return;
  }
  try {
    const probs = await classifyPixels(pixels);
    const best = probs.indexOf(Math.max(...probs));
    $('prediction').textContent = String(best); $('prediction').dataset.value = String(best);
    $('probs').innerHTML = probs.map((p, i) =>
      `<div><span>${i}</span><span class="bar" style="width:${Math.round(120 * p)}px"></span><span class="num">${(100 * p).toFixed(1)}%</span></div>`).join('');
    $('pad').setAttribute('aria-label', `Drawing pad: classified as ${best} (${(100 * probs[best]).toFixed(0)}%)`);
  } catch (err) {
    $('classify-error').textContent = errorText(err);
  }
}
window.numrClassify = classifyPixels;

$('clear').addEventListener('click', clearPad);
$('classify').addEventListener('click', classifyPad);
$('controls').addEventListener('submit', (e) => { e.preventDefault(); train(); });
$('stop').addEventListener('click', stop);
for (const id of Object.keys(FIELDS)) $(id).addEventListener('input', () => fieldError(id, ''));
for (const id of SELECTS) $(id).addEventListener('change', () => fieldError(id, ''));
$('model').addEventListener('change', showModelFields);
showModelFields();
clearPad();
redraw();

ready.then(async (c) => {
  await c.runPython(trainPy);
  client = c;
  $('train').disabled = false;
  status('ready: press Train');
  if (params.get('autostart') === '1') train();
}).catch((err) => {
  status(err && err.name === 'NoWebGPUError' ? 'training needs WebGPU (see above)' : 'numr_web failed to load (see above)');
});
