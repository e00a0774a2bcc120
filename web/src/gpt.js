// GPT page: trains numr_web's character-level GPT on WebGPU (or the cpu device without WebGPU) (web/py/gpt.py -> numr_web.training),
// live loss chart (training + validation), steps/s, Stop; then writes text after the prompt, as you
// type (each new prompt supersedes the text still being written).
// URL parameters set the controls: ?layers=2&dim=64&heads=4&context=32&batch=16&steps=400&lr=0.003
//   &prompt=def%20&max_new=120&autostart=1 (&mode=main: everything on the page's thread)
// window.numrGPT (for tests): {state: idle|training|stopping|stopped|done|error, result, losses, vals,
//   stepsPerS, error, statusLog, gen: {state: idle|writing|done|error, prompt, text, error}, samples}.
import { ready, params, showError, clearError, errorText } from './app.js';
import { drawChart } from './chart.js';
import gptPy from '../py/gpt.py?raw';

const $ = (id) => document.getElementById(id);
for (const [k, id] of [['layers', 'layers'], ['dim', 'dim'], ['heads', 'heads'], ['context', 'context'],
  ['batch', 'batch'], ['steps', 'steps'], ['lr', 'lr'], ['prompt', 'prompt'], ['max_new', 'max-new'],
  ['temperature', 'temperature']]) {
  if (params.has(k)) $(id).value = params.get(k);
}
const ui = window.numrGPT = {
  state: 'idle', result: null, losses: [], vals: [], stepsPerS: null, error: null, statusLog: [],
  totalSteps: 0, gen: { state: 'idle', prompt: '', text: '', error: null }, samples: [],
};
let client = null;
let hasModel = false;

function status(text) {
  $('train-status').textContent = text;
  ui.statusLog.push({ text, step: ui.losses.length });
}

// -- settings: checked here, with the message next to the field -----------------------------------------
const FIELDS = {
  layers: { int: true, min: 1, max: 8, what: 'layers' },
  dim: { int: true, min: 8, max: 512, what: 'embedding dim' },
  heads: { int: true, min: 1, max: 16, what: 'heads' },
  context: { int: true, min: 4, max: 256, what: 'context' },
  batch: { int: true, min: 1, max: 256, what: 'batch size' },
  steps: { int: true, min: 1, max: 100000, what: 'steps' },
  lr: { int: false, min: 0, max: 1, what: 'learning rate', openMin: true },
};
const GEN_FIELDS = {
  'max-new': { int: true, min: 1, max: 2000, what: 'characters' },
  temperature: { int: false, min: 0, max: 10, what: 'temperature', openMin: true },
};
function fieldError(id, msg) {
  const input = $(id), err = $(`${id}-error`);
  err.textContent = msg || '';
  if (msg) input.setAttribute('aria-invalid', 'true'); else input.removeAttribute('aria-invalid');
}
/** -> {id: number}, or null after putting a message next to every bad field. */
function readFields(fields) {
  const out = {};
  let first = null;
  for (const [id, f] of Object.entries(fields)) {
    const raw = $(id).value.trim(), v = Number(raw);
    let msg = '';
    if (raw === '' || !Number.isFinite(v)) msg = 'enter a number';
    else if (f.int && !Number.isInteger(v)) msg = 'enter a whole number';
    else if (f.openMin ? v <= f.min : v < f.min) msg = f.openMin ? `must be more than ${f.min}` : `at least ${f.min}`;
    else if (v > f.max) msg = `at most ${f.max}`;
    fieldError(id, msg ? `${f.what}: ${msg}` : '');
    if (msg) first = first || id; else out[id] = v;
  }
  if (!first && fields === FIELDS && out.dim % out.heads !== 0) {
    fieldError('heads', `heads: must divide the embedding dim (${out.dim})`);
    first = 'heads';
  }
  if (first) { $(first).focus(); return null; }
  return out;
}

// -- chart --------------------------------------------------------------------------------------------------
let chartQueued = false;
function redraw() {
  drawChart($('chart'), ui);
  const last = ui.losses[ui.losses.length - 1], val = ui.vals[ui.vals.length - 1];
  $('chart').setAttribute('aria-label', ui.losses.length
    ? `Loss chart: ${ui.losses.length} steps, latest loss ${last.loss.toFixed(3)}` +
      (val ? `, validation loss ${val.loss.toFixed(3)} at step ${val.step}` : '')
    : 'Loss chart: no training run yet');
}
const queueChart = () => {
  if (!chartQueued) { chartQueued = true; requestAnimationFrame(() => { chartQueued = false; redraw(); }); }
};
new ResizeObserver(queueChart).observe($('chart'));

function showRate(rate) {
  if (rate == null || !Number.isFinite(rate)) return;
  ui.stepsPerS = rate;
  $('steps-per-s').textContent = rate >= 10 ? rate.toFixed(0) : rate.toFixed(2);
  $('steps-per-s').dataset.value = String(rate);
}

// -- training -------------------------------------------------------------------------------------------------
let compileTimer = null;
function onEvent(d) {
  if (d.kind === 'start') {
    hasModel = true; $('generate').disabled = false;
    ui.totalSteps = d.total_steps;
    $('train-progress').max = d.total_steps;
    $('train-progress').removeAttribute('value');          // indeterminate until step 1
    const c = d.config, t0 = performance.now();
    const what = `${c.layers} layers × ${c.dim} dims, ${(d.params / 1000).toFixed(0)}k parameters, on ` +
      `${(d.train_chars / 1e6).toFixed(2)} M characters of Python`;
    const tick = () => status(`training ${what}: preparing step 1 (compiling the WebGPU kernels on ` +
      `first use)… ${((performance.now() - t0) / 1000).toFixed(0)} s`);
    tick();
    compileTimer = setInterval(tick, 1000);
  } else if (d.kind === 'step') {
    if (compileTimer) { clearInterval(compileTimer); compileTimer = null; }
    if (d.step === 1) performance.mark('numr-gpt-step1');
    ui.losses.push({ step: d.step, loss: d.loss });
    showRate(d.steps_per_s);
    $('train-progress').value = d.step;
    if (ui.state === 'training') {
      status(`step ${d.step}/${ui.totalSteps} · loss ${d.loss.toFixed(3)}` +
        (ui.stepsPerS ? ` · ${ui.stepsPerS.toFixed(2)} steps/s` : ''));
    }
  } else if (d.kind === 'eval') {
    ui.vals.push({ step: d.step, loss: d.val_loss });
    $('val-loss').textContent = d.val_loss.toFixed(3);
    $('val-loss').dataset.value = String(d.val_loss);
  }
  queueChart();
}

async function train() {
  const cfg = readFields(FIELDS);
  if (!cfg || !client) return;
  cfg.device = client.info.device;
  cfg.eval_every = Math.max(1, Math.min(25, Math.round(cfg.steps / 5)));     // >= 5 points on the chart
  clearError();
  $('train').disabled = true; $('stop').disabled = false;
  Object.assign(ui, { state: 'training', result: null, losses: [], vals: [], stepsPerS: null, error: null, statusLog: [], totalSteps: 0 });
  for (const id of ['steps-per-s', 'val-loss']) { $(id).textContent = '–'; $(id).dataset.value = ''; }
  status('starting… (reading the text corpus)');
  redraw();
  try {
    const r = await client.call('gpt_train', cfg, { onEvent, stoppable: true });
    performance.mark('numr-gpt-end');
    ui.result = r;
    showRate(r.steps_per_s);
    ui.state = r.stopped ? 'stopped' : 'done';
    const v = r.val_loss == null ? '' : `, validation loss ${r.val_loss.toFixed(3)}`;
    const rate = r.steps_per_s ? ` (${r.steps_per_s.toFixed(2)} steps/s)` : '';
    status(r.stopped ? `stopped after step ${r.steps} (${r.seconds.toFixed(1)} s${rate})${v}`
      : `done: ${r.steps} steps in ${r.seconds.toFixed(1)} s${rate}${v}`);
    clearError();
    generate();
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

// -- generation ------------------------------------------------------------------------------------------------
let genSeq = 0;
async function generate() {
  if (!client || !hasModel) return;
  const g = readFields(GEN_FIELDS);
  if (!g) return;
  const me = ++genSeq, prompt = $('prompt').value;
  const sample = $('sample');
  sample.querySelector('.prompt').textContent = prompt;
  sample.querySelector('.gen').textContent = '';
  ui.gen = { state: 'writing', prompt, text: '', error: null };
  sample.dataset.state = 'writing';
  $('prompt-error').textContent = '';
  const onToken = (d) => {
    if (me !== genSeq || d.kind !== 'token') return;
    ui.gen.text += d.text;
    sample.querySelector('.gen').textContent = ui.gen.text;
  };
  try {
    const r = await client.call('gpt_generate',
      { prompt, max_new: g['max-new'], temperature: g.temperature, seed: me }, { onEvent: onToken });
    if (me !== genSeq) return;                          // a newer prompt took over
    ui.gen = { state: 'done', prompt, text: r.text, error: null };
    sample.querySelector('.gen').textContent = r.text;
    sample.dataset.state = 'done';
    ui.samples.push({ prompt, text: r.text, step: ui.losses.length });
  } catch (err) {
    if (me !== genSeq) return;
    ui.gen = { state: 'error', prompt, text: ui.gen.text, error: errorText(err) };
    sample.dataset.state = 'error';
    $('prompt-error').textContent = ui.gen.error;
  }
}
let typingTimer = null;
function onPromptInput() {
  clearTimeout(typingTimer);
  if (hasModel) typingTimer = setTimeout(generate, 300);
}

$('controls').addEventListener('submit', (e) => { e.preventDefault(); train(); });
$('gen-controls').addEventListener('submit', (e) => { e.preventDefault(); clearTimeout(typingTimer); generate(); });
$('stop').addEventListener('click', stop);
$('prompt').addEventListener('input', onPromptInput);
for (const id of [...Object.keys(FIELDS), ...Object.keys(GEN_FIELDS)]) $(id).addEventListener('input', () => fieldError(id, ''));
redraw();

// the cpu device (numpy in Pyodide, one thread) trains a smaller model by default: fields the URL
// did not set get these values
const CPU_DEFAULTS = { layers: 1, dim: 32, heads: 2, context: 16, batch: 8, steps: 200 };

ready.then(async (c) => {
  await c.runPython(gptPy);
  client = c;
  if (c.info.device === 'cpu') {
    for (const [k, v] of Object.entries(CPU_DEFAULTS)) if (!params.has(k)) $(k).value = String(v);
  }
  $('train').disabled = false;
  status('ready: press Train');
  if (params.get('autostart') === '1') train();
}).catch((err) => {
  status(err && err.name === 'NoWebGPUError' ? 'training needs WebGPU (see above)' : 'numr_web failed to load (see above)');
});
