// Parity page: every op + the fused layer (forward + backward, every activation) on WebGPU vs golden
// values computed natively on the cpu backend (golden/parity.json, made by scripts/make_golden.py).
// Machine-readable result: #verdict[data-status=PASS|FAIL] and window.parityResult
// ({status, n, failed, max_worst, rows}). ?autorun=1 starts it once numr_web is ready.
import { numrReady, showError, errorText } from './numr.js';
import casesPy from '../py/parity_cases.py?raw';
import parityPy from '../py/parity.py?raw';

const $ = (id) => document.getElementById(id);
const fmt = (v) => (v === null || v === undefined ? '' : !isFinite(v) ? String(v) : v.toExponential(2));
let py = null;
window.parityResult = null;

function addRow(r) {
  const tr = document.createElement('tr');
  tr.dataset.case = r.name;
  tr.dataset.status = r.status;
  tr.innerHTML = `<td>${r.name}</td><td>${r.group}</td><td>${r.outputs}</td><td>${fmt(r.max_abs)}</td>
    <td>${fmt(r.max_rel)}</td><td>${r.worst === null ? '' : r.worst.toFixed(3)}</td><td>${r.ms.toFixed(0)}</td>
    <td class="${r.status === 'PASS' ? 'pass' : 'fail'}">${r.status}</td>`;
  if (r.error) tr.title = r.error;
  if (r.error) tr.children[2].textContent = r.error;
  $('results').tBodies[0].append(tr);
}

async function run() {
  $('run').disabled = true;
  $('results').tBodies[0].innerHTML = '';
  $('verdict').dataset.status = 'RUNNING'; $('verdict').textContent = 'running…';
  window.parityResult = null;
  const rows = [];
  const t0 = performance.now();
  try {
    const golden = await (await fetch('./golden/parity.json', { cache: 'no-cache' })).text();
    const res = await py.globals.get('parity_run')(golden, (r) => { rows.push(r); addRow(r); });
    res.rows = rows;
    res.seconds = (performance.now() - t0) / 1000;
    window.parityResult = res;
    $('verdict').dataset.status = res.status; $('verdict').textContent = res.status;
    $('summary').textContent = `${res.n} cases, ${res.failed.length} failed` +
      `${res.failed.length ? ' (' + res.failed.join(', ') + ')' : ''}; worst error/tolerance ` +
      `${res.max_worst.toFixed(3)}; ${res.seconds.toFixed(1)} s; golden from numr_web ` +
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
numrReady.then((p) => {
  py = p;
  py.runPython(casesPy);
  py.runPython(parityPy);
  $('run').disabled = false;
  if (new URLSearchParams(location.search).get('autorun') === '1') run();
}).catch(() => {});
