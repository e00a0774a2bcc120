// Parity page: every op + the fused layer (forward + backward, every activation) on WebGPU vs golden
// values computed natively on the cpu backend (golden/parity.json, made by scripts/make_golden.py).
// Machine-readable result: #verdict[data-status=PASS|FAIL|SKIPPED] and window.parityResult
// ({status, n, failed, max_worst, rows}). ?autorun=1 starts it once numr_web is ready;
// ?only=TEXT runs the cases whose name contains TEXT.
import { ready, params, showError, clearError, errorText } from './app.js';
import casesPy from '../py/parity_cases.py?raw';
import parityPy from '../py/parity.py?raw';

const $ = (id) => document.getElementById(id);
const fmt = (v) => (v === null || v === undefined ? '' : !isFinite(v) ? String(v) : v.toExponential(2));
const LABELS = ['case', 'group', 'outputs', 'max abs error', 'max abs error / max |ref|', 'error / tolerance', 'ms', 'status'];
let client = null;
window.parityResult = null;

function addRow(r) {
  const tr = document.createElement('tr');
  tr.dataset.case = r.name;
  tr.dataset.status = r.status;
  const cells = [r.name, r.group, r.error || r.outputs, fmt(r.max_abs), fmt(r.max_rel),
    r.worst == null ? '' : r.worst.toFixed(3), r.ms == null ? '' : r.ms.toFixed(0), r.status];
  cells.forEach((text, i) => {
    const td = document.createElement('td');
    td.textContent = text;
    td.dataset.label = LABELS[i];
    if (i >= 3 && i <= 6) td.className = 'num';
    if (i === 7) td.className = r.status === 'PASS' ? 'pass' : 'fail';
    tr.append(td);
  });
  if (r.error) tr.title = r.error;
  $('results').tBodies[0].append(tr);
}

async function run() {
  $('run').disabled = true;
  clearError();
  $('results').tBodies[0].innerHTML = '';
  $('verdict').dataset.status = 'RUNNING'; $('verdict').textContent = 'running…';
  window.parityResult = null;
  const rows = [];
  const t0 = performance.now();
  try {
    const golden = await (await fetch('./golden/parity.json', { cache: 'no-cache' })).text();
    const res = await client.call('parity_run', { golden, only: params.get('only') || '', device: client.info.device },
      { onEvent: (r) => { rows.push(r); addRow(r); } });
    res.rows = rows;
    res.seconds = (performance.now() - t0) / 1000;
    window.parityResult = res;
    $('verdict').dataset.status = res.status; $('verdict').textContent = res.status;
    $('summary').textContent = `${res.n} cases, ${res.failed.length} failed` +
      `${res.failed.length ? ' (' + res.failed.join(', ') + ')' : ''}; worst error/tolerance ` +
      `${res.max_worst.toFixed(3)} (lower is better); ${res.seconds.toFixed(1)} s; golden from numr_web ` +
      `${res.meta.numr_web} on ${res.meta.device}, atol ${res.meta.atol}, rtol ${res.meta.rtol}`;
  } catch (err) {
    window.parityResult = { status: 'FAIL', error: errorText(err), rows };
    $('verdict').dataset.status = 'FAIL'; $('verdict').textContent = 'FAIL';
    showError(err, 'parity');
  } finally {
    $('run').disabled = false;
  }
}

$('run').addEventListener('click', run);
ready.then(async (c) => {
  await c.runPython(casesPy);
  await c.runPython(parityPy);
  client = c;
  $('run').disabled = false;
  if (params.get('autorun') === '1') run();
}).catch((err) => {
  const skipped = err && err.name === 'NoWebGPUError';
  $('verdict').dataset.status = skipped ? 'SKIPPED' : 'FAIL';
  $('verdict').textContent = skipped ? 'skipped: no WebGPU' : 'FAIL: numr_web did not load';
  window.parityResult = { status: skipped ? 'SKIPPED' : 'FAIL', error: errorText(err), rows: [] };
});
