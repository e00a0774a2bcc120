// Benchmark page: numr_web fused Linear (+bias+relu / +gelu) forward + backward on WebGPU (in the
// page's numr_web worker, or on the page with ?mode=main) vs TensorFlow.js's WebGPU backend (on the
// page), same inputs.
// URL: ?m=1024&k=256&n=256&acts=relu,gelu&warmup=2&reps=5&autorun=1[&order=tfjs-first]
// Machine-readable: #bench-status[data-state=done|stopped|error|invalid|skipped] and window.benchResult
//   {shape, rows: [{activation, ours_ms, tfjs_ms, ratio, diff: {y, da, dw, db}, max_rel}], stopped}.
// Stop ends a run after the iteration in progress; the activations finished so far keep their rows.
import * as tf from '@tensorflow/tfjs';
import '@tensorflow/tfjs-backend-webgpu';
import { ready, params, showError, clearError, errorText } from './app.js';
import benchPy from '../py/bench.py?raw';

const $ = (id) => document.getElementById(id);
for (const k of ['m', 'k', 'n', 'acts', 'warmup', 'reps']) if (params.has(k)) $(k).value = params.get(k);
window.benchResult = null;
let client = null;
let stopRequested = false;
class Stopped extends Error {}
const ACTS = ['none', 'relu', 'sigmoid', 'gelu'];
const MAX_ELEMENTS = 1 << 24;          // per operand: 64 MiB of float32

function fieldError(id, msg) {
  $(`${id}-error`).textContent = msg || '';
  if (msg) $(id).setAttribute('aria-invalid', 'true'); else $(id).removeAttribute('aria-invalid');
}
/** -> the settings, or null after putting a message next to every bad field. */
function readSettings() {
  const cfg = { device: 'webgpu' };
  let ok = true;
  const ints = { m: [1, 8192, 'M'], k: [1, 8192, 'K'], n: [1, 8192, 'N'], warmup: [0, 100, 'warm-up'], reps: [1, 100, 'repetitions'] };
  for (const [id, [lo, hi, what]] of Object.entries(ints)) {
    const raw = $(id).value.trim(), v = Number(raw);
    const msg = raw === '' || !Number.isInteger(v) ? `${what}: enter a whole number`
      : v < lo ? `${what}: at least ${lo}` : v > hi ? `${what}: at most ${hi}` : '';
    fieldError(id, msg);
    if (msg) ok = false; else cfg[id] = v;
  }
  if (ok) {
    const big = [['m', cfg.m * cfg.k], ['k', cfg.k * cfg.n], ['n', cfg.m * cfg.n]].find(([, e]) => e > MAX_ELEMENTS);
    if (big) { fieldError(big[0], `M×K, K×N and M×N must each stay under ${MAX_ELEMENTS.toLocaleString('en')} elements`); ok = false; }
  }
  const acts = $('acts').value.split(',').map((s) => s.trim()).filter(Boolean);
  const bad = acts.filter((a) => !ACTS.includes(a));
  const msg = !acts.length ? 'name at least one activation' : bad.length ? `unknown: ${bad.join(', ')} (use ${ACTS.join(', ')})` : '';
  fieldError('acts', msg ? `activations: ${msg}` : '');
  if (msg) ok = false; else cfg.acts = acts;
  return ok ? cfg : null;
}

const median = (xs) => { const s = [...xs].sort((a, b) => a - b); const h = s.length >> 1; return s.length % 2 ? s[h] : (s[h - 1] + s[h]) / 2; };

function randn(n, scale, seed) {   // deterministic normal(0, scale) Float32Array
  let s = seed >>> 0;
  const u = () => { s = (Math.imul(s, 1664525) + 1013904223) >>> 0; return (s + 0.5) / 4294967296; };
  const out = new Float32Array(n);
  for (let i = 0; i < n; i++) out[i] = scale * Math.sqrt(-2 * Math.log(u())) * Math.cos(2 * Math.PI * u());
  return out;
}

async function initTf() {
  await tf.setBackend('webgpu');
  await tf.ready();
  if (tf.getBackend() !== 'webgpu') throw new Error(`TF.js backend is ${tf.getBackend()}, not webgpu`);
}

const geluTf = (x) => x.mul(0.5).mul(tf.erf(x.mul(Math.SQRT1_2)).add(1));
function tfLayer(act) {
  if (act === 'gelu') return (a, w, b) => geluTf(tf.fused.matMul({ a, b: w, bias: b }));
  const map = { relu: 'relu', sigmoid: 'sigmoid', none: 'linear' };
  if (!(act in map)) throw new Error(`TF.js side: no fused ${act}`);
  return (a, w, b) => tf.fused.matMul({ a, b: w, bias: b, activation: map[act] });
}

/** TF.js side: prepare() uploads, iter() times one forward + backward (ms), outputs() -> arrays. */
function tfSide(cfg, A, W, B, DY) {
  const { m, k, n } = cfg;
  const a = tf.tensor2d(A, [m, k]), w = tf.tensor2d(W, [k, n]), b = tf.tensor1d(B), dy = tf.tensor2d(DY, [m, n]);
  const f = tfLayer(cfg.activation);
  const g = tf.grads(f);
  return {
    async iter() {
      const t0 = performance.now();
      const [da, dw, db] = g([a, w, b], dy);
      await db.data();                    // in-order queue: waits for the whole iteration
      const t = performance.now() - t0;
      tf.dispose([da, dw, db]);
      return t;
    },
    async outputs() {
      const y = f(a, w, b);
      const [da, dw, db] = g([a, w, b], dy);
      const out = { y: await y.data(), da: await da.data(), dw: await dw.data(), db: await db.data() };
      tf.dispose([y, da, dw, db]);
      return out;
    },
    dispose() { tf.dispose([a, w, b, dy]); },
  };
}

function maxDiff(x, ref) {
  let abs = 0, scale = 0;
  if (x.length !== ref.length) return { abs: Infinity, scale: 1 };
  for (let i = 0; i < x.length; i++) {
    const d = Math.abs(x[i] - ref[i]);
    abs = (d > abs || Number.isNaN(d)) ? d : abs;
    scale = Math.max(scale, Math.abs(ref[i]));
  }
  return { abs, scale };
}

async function run() {
  const st = $('bench-status');
  const base = readSettings();
  if (!base) { st.dataset.state = 'invalid'; st.textContent = 'fix the settings marked above'; return; }
  if (!client) return;
  clearError();
  stopRequested = false;
  $('run').disabled = true; $('stop').disabled = false;
  $('results').tBodies[0].innerHTML = '';
  st.dataset.state = 'running';
  const rows = [];
  window.benchResult = null;
  try {
    const { m, k, n } = base;
    const A = randn(m * k, 1, 1), W = randn(k * n, 1 / Math.sqrt(k), 2), B = randn(n, 0.1, 3), DY = randn(m * n, 1, 4);
    for (const act of base.acts) {
      const cfg = { ...base, activation: act };
      // numr_web and TF.js alternate iteration by iteration (fair under background load)
      st.textContent = `${act} ${m}×${k}×${n}: warming up (the first iteration compiles the kernels)…`;
      await client.call('bench_prepare', { cfg, A, W, B, DY });
      const ourIter = () => client.call('bench_iter', null);
      const tfs = tfSide(cfg, A, W, B, DY);
      const oursT = [], tfT = [];
      const tfFirst = params.get('order') === 'tfjs-first';
      for (let i = 0; i < cfg.warmup + cfg.reps; i++) {
        if (stopRequested) { tfs.dispose(); throw new Stopped(`${act}, ${i < cfg.warmup ? 'warm-up' : `repetition ${i - cfg.warmup}/${cfg.reps}`}`); }
        if (i >= cfg.warmup) st.textContent = `${act} ${m}×${k}×${n}: repetition ${i - cfg.warmup + 1}/${cfg.reps}…`;
        let to, tt;
        if (tfFirst) { tt = await tfs.iter(); to = await ourIter(); } else { to = await ourIter(); tt = await tfs.iter(); }
        if (i >= cfg.warmup) { oursT.push(to); tfT.push(tt); }
      }
      const ours = await client.call('bench_outputs', null);
      ours.times_ms = oursT;
      const theirs = await tfs.outputs();
      theirs.times_ms = tfT;
      tfs.dispose();
      const diff = {}; let maxRel = 0;
      for (const key of ['y', 'da', 'dw', 'db']) {
        const d = maxDiff(ours[key], theirs[key]);
        diff[key] = d.abs;
        maxRel = Math.max(maxRel, d.abs / Math.max(d.scale, 1e-12));
      }
      const row = { activation: act, shape: [m, k, n], ours_ms: median(ours.times_ms), tfjs_ms: median(theirs.times_ms),
        ours_times_ms: Array.from(ours.times_ms), tfjs_times_ms: theirs.times_ms, diff, max_rel: maxRel };
      row.ratio = row.ours_ms / row.tfjs_ms;
      rows.push(row);
      const tr = document.createElement('tr');
      tr.dataset.activation = act;
      const heads = [...$('results').tHead.rows[0].cells].map((c) => c.textContent);
      const cells = [[act, ''], [`${m}×${k}×${n}`, 'num'], [row.ours_ms.toFixed(1), 'num ours'],
        [row.tfjs_ms.toFixed(1), 'num tfjs'], [`${row.ratio.toFixed(2)}×`, 'num ratio'],
        ...['y', 'da', 'dw', 'db'].map((kk) => [diff[kk].toExponential(2), 'num']), [maxRel.toExponential(2), 'num maxrel']];
      cells.forEach(([text, cls], i) => {
        const td = document.createElement('td');
        td.textContent = text; td.className = cls; td.dataset.label = heads[i];
        tr.append(td);
      });
      $('results').tBodies[0].append(tr);
    }
    window.benchResult = { shape: [m, k, n], warmup: base.warmup, reps: base.reps, rows,
      tfjs_backend: tf.getBackend(), tfjs_version: tf.version.tfjs };
    st.textContent = 'done: ' + rows.map((r) => `${r.activation}: numr_web ${r.ours_ms.toFixed(1)} ms, ` +
      `TF.js ${r.tfjs_ms.toFixed(1)} ms, ratio ${r.ratio.toFixed(2)} (lower is better)`).join('; ');
    st.dataset.state = 'done';
  } catch (err) {
    if (err instanceof Stopped) {
      window.benchResult = { stopped: true, rows };
      st.textContent = `stopped during ${err.message}` + (rows.length ? `; finished: ${rows.map((r) => r.activation).join(', ')}` : '');
      st.dataset.state = 'stopped';
      return;
    }
    window.benchResult = { error: errorText(err), rows };
    st.textContent = 'benchmark failed: ' + errorText(err);
    st.dataset.state = 'error';
    showError(err, 'benchmark');
  } finally {
    $('run').disabled = false; $('stop').disabled = true;
  }
}
function stop() {
  if ($('stop').disabled) return;
  stopRequested = true;
  $('stop').disabled = true;
  $('bench-status').textContent = 'stopping after the iteration in progress…';
}

$('controls').addEventListener('submit', (e) => { e.preventDefault(); run(); });
$('stop').addEventListener('click', stop);
for (const id of ['m', 'k', 'n', 'acts', 'warmup', 'reps']) $(id).addEventListener('input', () => fieldError(id, ''));
ready.then(async (c) => {
  if (c.info.device !== 'webgpu') {          // the cpu fallback: nothing to compare with TF.js's WebGPU
    const st = $('bench-status');
    st.dataset.state = 'skipped';
    st.textContent = `skipped: no WebGPU (this page compares WebGPU backends; numr_web runs on ${c.info.device} here)`;
    window.benchResult = { skipped: 'no WebGPU', rows: [] };
    return;
  }
  await Promise.all([c.runPython(benchPy), initTf()]);
  client = c;
  $('run').disabled = false;
  $('bench-status').textContent = `ready (TF.js ${tf.version.tfjs}, backend ${tf.getBackend()})`;
  $('backend-info').textContent = `numr_web ${c.info.version} (${c.mode} thread) webgpu: ${c.info.webgpu}; ` +
    `TensorFlow.js ${tf.version.tfjs} on ${tf.getBackend()}`;
  if (params.get('autorun') === '1') run();
}).catch((err) => {
  const st = $('bench-status');
  if (err && err.name === 'NoWebGPUError') {
    st.dataset.state = 'skipped';
    st.textContent = 'skipped: no WebGPU (see above)';
    window.benchResult = { skipped: 'no WebGPU', rows: [] };
    return;
  }
  st.dataset.state = 'error';
  st.textContent = 'not ready: ' + errorText(err);
  showError(err, 'benchmark setup');
});
