// "Your model" page: runs the PyTorch code in the editor on numr_web in the worker
// (web/py/model_runner.py: `import torch` is numr_web.torch, `report(loss=, step=)` feeds the chart,
// printed "loss" lines too), streams what it prints, and shows a Python error with its traceback.
// Stop asks the code to stop at its next report() / print / backward(); code that reaches none of
// those within STOP_GRACE_MS is ended by restarting the worker.
// URL parameters: ?example=spirals|nanogpt&autostart=1 (&mode=main: on the page's thread).
// window.numrModel (for tests): {state: idle|running|stopping|stopped|done|error, example, points,
//   vals, output, error: {type, module, numr, message, traceback} | null, errorLine (the script's
//   line the error came from, selected in the editor), result, restarted (worker restarts by Stop)}.
import { ready, restart, params, mode, showError, clearError, errorText } from './app.js';
import { drawChart } from './chart.js';
import runnerPy from '../py/model_runner.py?raw';
import spiralsPy from '../py/examples/spirals.py?raw';
import nanogptTrainPy from '../py/examples/nanogpt_train.py?raw';
// nanoGPT's model.py and its licence, vendored unmodified in tests/programs/nanogpt/
import nanogptModelPy from '../../tests/programs/nanogpt/model.py?raw';
import nanogptLicense from '../../tests/programs/nanogpt/LICENSE?raw';

const STOP_GRACE_MS = 3000;
const MAX_OUTPUT = 200_000;         // characters kept in the output box (the oldest go first)
const EXAMPLES = {
  spirals: { code: spiralsPy, files: {} },
  nanogpt: { code: nanogptTrainPy, files: { 'model.py': nanogptModelPy, 'LICENSE-nanoGPT': nanogptLicense } },
};
const $ = (id) => document.getElementById(id);
const ui = window.numrModel = {
  state: 'idle', example: null, points: [], vals: [], output: '', error: null, errorLine: null, result: null,
  restarted: 0,
};
let client = null;
let runSeq = 0;

function status(text) { $('run-status').textContent = text; }

// -- editor and examples ---------------------------------------------------------------------------------
// the code as edited is kept per example in localStorage (a reload keeps it); Reset restores the example
const DRAFT_KEY = (name) => `numr-web/model/${name}`;
function draft(name, code) {
  try {
    if (code === undefined) return localStorage.getItem(DRAFT_KEY(name));
    if (code === null) localStorage.removeItem(DRAFT_KEY(name)); else localStorage.setItem(DRAFT_KEY(name), code);
  } catch (e) { /* storage off (private mode, quota): edits are not kept */ }
  return null;
}

function loadExample(name) {
  const ex = EXAMPLES[name] || EXAMPLES.spirals;
  ui.example = EXAMPLES[name] ? name : 'spirals';
  $('example').value = ui.example;
  const kept = draft(ui.example);
  $('code').value = kept ?? ex.code;
  $('reset').hidden = kept === null || kept === ex.code;
  const names = Object.keys(ex.files);
  $('files').hidden = names.length === 0;
  const list = $('files-list');
  list.textContent = '';
  for (const n of names) {
    const d = document.createElement('details');
    const s = document.createElement('summary');
    s.textContent = n;
    const pre = document.createElement('pre');
    pre.textContent = ex.files[n];
    d.append(s, pre);
    list.append(d);
  }
}
$('example').addEventListener('change', () => loadExample($('example').value));
$('code').addEventListener('input', () => {
  const ex = EXAMPLES[ui.example], code = $('code').value;
  draft(ui.example, code === ex.code ? null : code);
  $('reset').hidden = code === ex.code;
});
$('reset').addEventListener('click', () => {
  draft(ui.example, null);
  loadExample(ui.example);
});
$('code').addEventListener('keydown', (e) => {
  if (e.key === 'Enter' && (e.ctrlKey || e.metaKey)) { e.preventDefault(); run(); return; }
  if (e.key === 'Tab' && !e.shiftKey && !e.ctrlKey && !e.altKey) {     // indent, as an editor does
    e.preventDefault();
    document.execCommand('insertText', false, '    ');
  }
});

// -- files the user adds (data, weights): written next to the script, again into a restarted worker --
const uploaded = new Map();            // name -> Uint8Array
function showUploaded() {
  const list = $('uploaded');
  list.textContent = '';
  for (const [name, data] of uploaded) {
    const li = document.createElement('li');
    li.textContent = `${name} (${data.length < 1024 ? `${data.length} bytes` : `${(data.length / 1024).toFixed(1)} KiB`})`;
    li.dataset.name = name;
    list.append(li);
  }
}
async function addFiles(fileList) {
  for (const f of fileList) {
    const data = new Uint8Array(await f.arrayBuffer());
    try {
      await client.call('model_put_file', { name: f.name, data });
      uploaded.set(f.name, data);
    } catch (err) {
      showError(err, `adding ${f.name}`);
    }
  }
  showUploaded();
}
$('add-files').addEventListener('change', async (e) => {
  const input = e.target;
  if (!client || !input.files.length) return;
  input.disabled = true;
  try { await addFiles([...input.files]); } finally { input.value = ''; input.disabled = ui.state === 'running' || !client; }
});

// -- output and chart -----------------------------------------------------------------------------------
let pending = [];
let flushQueued = false;
function appendOutput(text, cls) {
  ui.output += text;
  if (ui.output.length > 2 * MAX_OUTPUT) ui.output = ui.output.slice(-MAX_OUTPUT);
  pending.push([text, cls]);
  if (!flushQueued) { flushQueued = true; requestAnimationFrame(flushOutput); }
}
function flushOutput() {
  flushQueued = false;
  const out = $('output');
  const atEnd = out.scrollTop + out.clientHeight >= out.scrollHeight - 4;
  for (const [text, cls] of pending) {
    const span = document.createElement('span');
    span.className = cls;
    span.textContent = text;
    out.append(span);
  }
  pending = [];
  let size = out.textContent.length;
  while (size > MAX_OUTPUT && out.firstChild) { size -= out.firstChild.textContent.length; out.firstChild.remove(); }
  if (atEnd) out.scrollTop = out.scrollHeight;
}
function clearOutput() { $('output').textContent = ''; pending = []; ui.output = ''; }

let chartQueued = false;
function redraw() {
  const last = ui.points[ui.points.length - 1];
  const steps = Math.max(1, ...ui.points.map((p) => p.step), ...ui.vals.map((p) => p.step));
  drawChart($('chart'), { losses: ui.points, vals: ui.vals, totalSteps: steps });
  $('chart').setAttribute('aria-label', last
    ? `Loss chart: ${ui.points.length} points, latest loss ${last.loss.toPrecision(4)} at step ${last.step}`
    : 'Loss chart: no losses reported yet');
}
const queueChart = () => {
  if (!chartQueued) { chartQueued = true; requestAnimationFrame(() => { chartQueued = false; redraw(); }); }
};
new ResizeObserver(queueChart).observe($('chart'));

function fmt(v) { return Math.abs(v) >= 1e4 || (v !== 0 && Math.abs(v) < 1e-3) ? v.toExponential(3) : v.toFixed(4); }

function onEvent(me, d) {
  if (me !== runSeq) return;
  if (d.kind === 'output') {
    appendOutput(d.text, d.stream);
  } else if (d.kind === 'point') {
    (d.series === 'val' ? ui.vals : ui.points).push({ step: d.step, loss: d.loss });
    const extra = Object.entries(d.metrics || {}).map(([k, v]) => ` · ${k} ${fmt(v)}`).join('');
    if (ui.state === 'running') status(`step ${d.step} · ${d.series === 'val' ? 'validation ' : ''}loss ${fmt(d.loss)}${extra}`);
    queueChart();
  } else if (d.kind === 'metrics' && ui.state === 'running') {
    status(`step ${d.step ?? '–'}` + Object.entries(d.metrics).map(([k, v]) => ` · ${k} ${fmt(v)}`).join(''));
  }
}

// -- run / stop -------------------------------------------------------------------------------------------
function setRunning(on) {
  $('run').disabled = on || !client;
  $('add-files').disabled = on || !client;
  $('stop').disabled = !on;
}

/** Selects line `n` of the editor (scrolled into view, focused); -> n, or null past its end. */
function selectLine(n) {
  const ta = $('code'), lines = ta.value.split('\n');
  if (!(n >= 1 && n <= lines.length)) return null;
  const start = lines.slice(0, n - 1).reduce((a, l) => a + l.length + 1, 0);
  ta.focus({ preventScroll: true });
  ta.setSelectionRange(start, start + lines[n - 1].length);
  const lh = parseFloat(getComputedStyle(ta).lineHeight) || 16;
  ta.scrollTop = Math.max(0, (n - 3) * lh);
  return n;
}

function showRunError(e) {
  const el = $('run-error');
  if (!e) { el.hidden = true; el.textContent = ''; return; }
  el.hidden = false;
  el.textContent = e.numr
    ? `${e.type} (${e.module}.${e.type}, a numr_web error): ${e.message}`
    : (e.message ? `${e.type}: ${e.message}` : e.type);
  // the script's last line in the traceback: where the error came from, in the code as written
  const m = [...(e.traceback || '').matchAll(/File "[^"]*\/main\.py", line (\d+)/g)].pop();
  ui.errorLine = m ? selectLine(Number(m[1])) : null;
  if (ui.errorLine) el.textContent += `\n(line ${ui.errorLine} of the code: selected in the editor)`;
}

async function run() {
  if (!client || ui.state === 'running' || ui.state === 'stopping') return;
  const me = ++runSeq;
  const ex = EXAMPLES[ui.example];
  const code = $('code').value;
  // an example's files go along with the code whatever it became (it may still import them), but
  // not over a file the user added under the same name
  const files = Object.fromEntries(Object.entries(ex ? ex.files : {}).filter(([n]) => !uploaded.has(n)));
  Object.assign(ui, { state: 'running', points: [], vals: [], error: null, errorLine: null, result: null });
  clearOutput(); showRunError(null); clearError();
  appendOutput(`# running on ${client.info.device}${client.info.webgpu ? ` (WebGPU: ${client.info.webgpu})` : ''}\n`, 'note');
  setRunning(true);
  status(client.info.device === 'webgpu'
    ? 'running… (the first steps of a model compile its WebGPU kernels: seconds to a minute on a software GPU)'
    : 'running…');
  redraw();
  try {
    const r = await client.call('model_run', { code, files }, { onEvent: (d) => onEvent(me, d), stoppable: true });
    if (me !== runSeq) return;                   // ended by a restart meanwhile
    ui.result = r;
    const secs = `${r.seconds.toFixed(1)} s`;
    if (r.error) {
      ui.state = 'error'; ui.error = r.error;
      showRunError(r.error);
      status(`failed after ${secs}: ${r.error.type}`);
    } else if (r.stopped) {
      ui.state = 'stopped';
      status(`stopped after ${secs}` + (ui.points.length ? `; last loss ${fmt(ui.points[ui.points.length - 1].loss)}` : ''));
    } else {
      ui.state = 'done';
      status(`done in ${secs}` + (ui.points.length ? `; last loss ${fmt(ui.points[ui.points.length - 1].loss)}` : '; no losses reported'));
    }
  } catch (err) {
    if (me !== runSeq) return;
    ui.state = 'error'; ui.error = { type: err.type || err.name, message: errorText(err) };
    status('the run failed: ' + ui.error.message);
    showError(err, 'running the code');
  } finally {
    if (me === runSeq) { setRunning(false); redraw(); }
  }
}

async function stop() {
  if (ui.state !== 'running' || !client) return;
  const me = runSeq;
  ui.state = 'stopping';
  $('stop').disabled = true;
  status('stopping (at the next report(), print or backward())…');
  client.stop();
  await new Promise((r) => setTimeout(r, STOP_GRACE_MS));
  if (me !== runSeq || ui.state !== 'stopping') return;
  if (mode !== 'worker') { status('the code does not stop: it runs on the page (?mode=main); reload the page'); return; }
  // the code checked nothing: end the worker and start a fresh one
  runSeq++;
  client = null;
  setRunning(false);
  status('the code did not stop: restarting numr_web…');
  appendOutput('\n# stopped: the worker running the code was ended and a new one started\n', 'note');
  try {
    const c = await restart();
    await c.runPython(runnerPy);
    for (const [name, data] of uploaded) await c.call('model_put_file', { name, data });
    client = c;
    ui.restarted++;
    ui.state = 'stopped';
    ui.result = { stopped: true, restarted: true };
    status('stopped (numr_web was restarted)');
  } catch (err) {
    ui.state = 'error'; ui.error = { type: err.name, message: errorText(err) };
    showError(err, 'restarting numr_web');
  } finally {
    setRunning(false);
    redraw();
  }
}

$('controls').addEventListener('submit', (e) => { e.preventDefault(); run(); });
$('stop').addEventListener('click', stop);
loadExample(params.get('example') || 'spirals');
redraw();

ready.then(async (c) => {
  await c.runPython(runnerPy);
  client = c;
  setRunning(false);
  status(`ready: press Run (on ${c.info.device})`);
  if (params.get('autostart') === '1') run();
}).catch((err) => {
  status(err && err.name === 'NoWebGPUError' ? 'running code needs WebGPU (see above)' : 'numr_web failed to load (see above)');
});
