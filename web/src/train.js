// Training playground: trains numr_web's MLP on WebGPU (web/py/train.py), live loss chart, drawing pad.
// URL parameters override the controls: ?hidden=32&layers=1&epochs=5&batch=64&lr=0.01&activation=relu
//   &optimizer=adam&autostart=1
// window.numrTrain exposes the state for tests: {state: idle|training|done|error, result, losses, accs}.
import { numrReady, showError, errorText } from './numr.js';
import trainPy from '../py/train.py?raw';

const $ = (id) => document.getElementById(id);
const params = new URLSearchParams(location.search);
for (const k of ['hidden', 'layers', 'epochs', 'batch', 'lr', 'activation', 'optimizer']) {
  if (params.has(k)) $(k).value = params.get(k);
}
const ui = window.numrTrain = { state: 'idle', result: null, losses: [], accs: [], error: null };
let py = null;
let stopRequested = false;
let stepsPerEpoch = 1;

// -- loss chart -------------------------------------------------------------------------------------
function drawChart() {
  const c = $('chart'), g = c.getContext('2d');
  const W = c.width, H = c.height, L = 48, R = 40, T = 12, B = 28;
  g.clearRect(0, 0, W, H);
  g.font = '11px system-ui'; g.strokeStyle = '#ccc'; g.fillStyle = '#555';
  g.strokeRect(L, T, W - L - R, H - T - B);
  const totalSteps = Math.max(1, Number($('epochs').value) * stepsPerEpoch, ui.losses.length);
  const maxLoss = Math.max(0.5, ...ui.losses.map((p) => p.loss).slice(0, 20));
  const x = (s) => L + (W - L - R) * (s / totalSteps);
  const yL = (v) => T + (H - T - B) * (1 - Math.min(v, maxLoss) / maxLoss);
  const yA = (v) => T + (H - T - B) * (1 - v);
  for (let i = 0; i <= 4; i++) {
    const v = (maxLoss * i) / 4;
    g.fillText(v.toFixed(2), 4, yL(v) + 4);
    g.fillText(`${25 * i}%`, W - R + 6, yA(i / 4) + 4);
  }
  g.fillText('step', W / 2, H - 8);
  g.strokeStyle = '#2557a7'; g.lineWidth = 1.5; g.beginPath();
  ui.losses.forEach((p, i) => (i ? g.lineTo(x(p.step), yL(p.loss)) : g.moveTo(x(p.step), yL(p.loss))));
  g.stroke();
  g.strokeStyle = '#2a9d3a'; g.fillStyle = '#2a9d3a'; g.beginPath();
  ui.accs.forEach((p, i) => (i ? g.lineTo(x(p.step), yA(p.acc)) : g.moveTo(x(p.step), yA(p.acc))));
  g.stroke();
  ui.accs.forEach((p) => g.fillRect(x(p.step) - 2, yA(p.acc) - 2, 4, 4));
  g.fillStyle = '#2557a7'; g.fillText('— loss', L + 8, T + 14);
  g.fillStyle = '#2a9d3a'; g.fillText('— test accuracy', L + 60, T + 14);
}
let chartQueued = false;
const queueChart = () => {
  if (!chartQueued) { chartQueued = true; requestAnimationFrame(() => { chartQueued = false; drawChart(); }); }
};

// -- training --------------------------------------------------------------------------------------------
function onProgress(d) {
  if (d.kind === 'start') {
    stepsPerEpoch = Math.ceil(d.n_train / Number($('batch').value));
    $('train-status').textContent = `training ${d.sizes.join('→')} on ${d.n_train} images…`;
  } else if (d.kind === 'step') {
    ui.losses.push({ step: d.step, loss: d.loss });
    $('train-status').textContent = `epoch ${d.epoch.toFixed(2)}  step ${d.step}  loss ${d.loss.toFixed(4)}`;
  } else if (d.kind === 'epoch') {
    ui.accs.push({ step: d.step, acc: d.test_acc });
    $('test-acc').textContent = `${(100 * d.test_acc).toFixed(1)}%`;
    $('train-time').textContent = `epoch ${d.epoch}, ${d.elapsed_s.toFixed(1)} s`;
  }
  queueChart();
}

async function train() {
  $('train').disabled = true; $('stop').disabled = false; $('classify').disabled = true;
  stopRequested = false;
  Object.assign(ui, { state: 'training', result: null, losses: [], accs: [], error: null });
  $('test-acc').dataset.value = '';
  drawChart();
  const cfg = {
    hidden: Number($('hidden').value), layers: Number($('layers').value), epochs: Number($('epochs').value),
    batch: Number($('batch').value), lr: Number($('lr').value), activation: $('activation').value,
    optimizer: $('optimizer').value, device: 'webgpu',
  };
  try {
    const r = await py.globals.get('train_run')(cfg, onProgress, () => stopRequested);
    ui.result = r;
    $('test-acc').textContent = `${(100 * r.test_acc).toFixed(1)}%`;
    $('test-acc').dataset.value = String(r.test_acc);
    $('train-status').textContent =
      `done: ${r.steps} steps in ${r.seconds.toFixed(1)} s, test accuracy ${(100 * r.test_acc).toFixed(1)}%`;
    ui.state = 'done';
    $('classify').disabled = false;
    if (padHasInk()) classifyPad();
  } catch (err) {
    ui.state = 'error'; ui.error = errorText(err);
    $('train-status').textContent = 'training failed: ' + errorText(err);
    showError(err, 'training');
  } finally {
    $('train').disabled = false; $('stop').disabled = true;
    drawChart();
  }
}

// -- drawing pad -------------------------------------------------------------------------------------------
const pad = $('pad'), pg = pad.getContext('2d', { willReadFrequently: true });
function clearPad() {
  pg.fillStyle = 'black'; pg.fillRect(0, 0, pad.width, pad.height);
  $('preview').getContext('2d').clearRect(0, 0, 128, 128);
  $('prediction').textContent = '–'; $('prediction').dataset.value = ''; $('probs').innerHTML = '';
}
let drawing = false, last = null;
const pos = (e) => { const r = pad.getBoundingClientRect(); return [(e.clientX - r.left) * pad.width / r.width, (e.clientY - r.top) * pad.height / r.height]; };
pad.addEventListener('pointerdown', (e) => { drawing = true; last = pos(e); pad.setPointerCapture(e.pointerId); stroke(last); });
pad.addEventListener('pointermove', (e) => { if (drawing) stroke(pos(e)); });
const endStroke = () => { if (drawing) { drawing = false; if (ui.state === 'done') classifyPad(); else previewPad(); } };
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
  const probs = await py.globals.get('classify')(pixels);
  return Array.from(probs);
}
async function classifyPad() {
  const pixels = previewPad();
  try {
    const probs = await classifyPixels(pixels);
    const best = probs.indexOf(Math.max(...probs));
    $('prediction').textContent = String(best); $('prediction').dataset.value = String(best);
    $('probs').innerHTML = probs.map((p, i) =>
      `<div><span>${i}</span><span class="bar" style="width:${Math.round(160 * p)}px"></span><span>${(100 * p).toFixed(1)}%</span></div>`).join('');
  } catch (err) { showError(err, 'classify'); }
}
// for tests: classify 64 pixel values (0..16) with the trained model -> 10 probabilities
window.numrClassify = classifyPixels;

$('clear').addEventListener('click', clearPad);
$('classify').addEventListener('click', classifyPad);
$('train').addEventListener('click', train);
$('stop').addEventListener('click', () => { stopRequested = true; });
clearPad();
drawChart();

numrReady.then(async (p) => {
  py = p;
  py.runPython(trainPy);
  $('train').disabled = false;
  $('train-status').textContent = 'ready: press Train';
  if (params.get('autostart') === '1') train();
}).catch(() => { $('train-status').textContent = 'numr_web failed to load (see above)'; });
