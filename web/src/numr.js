// Shared by every page of the numr_web app.
//
// Boots Pyodide from ./pyodide/ (copied from node_modules at build time), loads micropip + packaging
// from ./wheels/ (localhost), installs the numr_web wheel from ./wheels/ with micropip, imports
// numr_web and brings up its WebGPU device. Nothing is fetched from outside this origin.
//
//   window.numrReady  -> Promise<PyodideInterface> (resolved when numr_web is importable and the
//                        webgpu device is ready; rejected with the reason otherwise)
//
// Load progress and errors are shown in the page header (#numr-status, data-state=loading|ready|error).
import bootPy from '../py/boot.py?raw';
import './style.css';

const base = new URL('./', document.baseURI);
const statusEl = () => document.getElementById('numr-status');
const t0 = performance.now();

export function setStatus(text, state = 'loading') {
  const el = statusEl();
  if (!el) return;
  el.dataset.state = state;
  el.querySelector('.text').textContent = text;
}

/** A short, readable message for a JS Error or a Pyodide PythonError (last traceback line). */
export function errorText(err) {
  if (!err) return 'unknown error';
  const msg = String(err.message ?? err).trim();
  if (err.type || /Traceback/.test(msg)) {
    // the exception itself: from the last "SomeError: ..." line at the start of a line to the end
    const re = /^([A-Za-z_][\w.]*(?:Error|Exception|Exit|Interrupt|Warning))(?::|$)/gm;
    let m, at = -1;
    while ((m = re.exec(msg))) at = m.index;
    if (at >= 0) return msg.slice(at, at + 2000);
    const lines = msg.split('\n').filter((l) => l.trim());
    return lines[lines.length - 1];
  }
  return msg;
}

export function showError(err, where = '') {
  const el = document.getElementById('numr-error');
  const text = (where ? where + ': ' : '') + errorText(err);
  if (el) {
    el.hidden = false;
    el.textContent = text;
    if (err && err.message && err.message !== text) el.title = err.message;
  }
  setStatus(text, 'error');
}

function log(line) {
  const el = document.getElementById('numr-log');
  if (el) {
    el.textContent += line + '\n';
    el.scrollTop = el.scrollHeight;
  }
}

function header() {
  if (document.getElementById('numr-header')) return;
  const page = document.body.dataset.page || '';
  const h = document.createElement('header');
  h.id = 'numr-header';
  h.innerHTML = `
    <nav>
      <strong>numr_web</strong>
      <a href="./index.html" class="${page === 'train' ? 'active' : ''}">Training playground</a>
      <a href="./parity.html" class="${page === 'parity' ? 'active' : ''}">Parity</a>
      <a href="./bench.html" class="${page === 'bench' ? 'active' : ''}">Benchmark</a>
    </nav>
    <div id="numr-status" data-state="loading"><span class="dot"></span><span class="text">starting…</span></div>
    <pre id="numr-error" hidden></pre>`;
  document.body.prepend(h);
  const footer = document.createElement('details');
  footer.id = 'numr-console';
  footer.innerHTML = `
    <summary>Python console &amp; log</summary>
    <textarea id="py-input" spellcheck="false" rows="4">import numr_web as nr
x = nr.tensor([[1.0, 2.0], [3.0, 4.0]], device="webgpu", requires_grad=True)
y = (x @ x).sum(); y.backward()
print(await y.read(), await x.grad.read())</textarea>
    <button id="py-run">Run (Ctrl+Enter)</button>
    <pre id="py-output"></pre>
    <pre id="numr-log"></pre>`;
  document.body.append(footer);
  const run = () => runConsole(document.getElementById('py-input').value);
  document.getElementById('py-run').addEventListener('click', run);
  document.getElementById('py-input').addEventListener('keydown', (e) => {
    if (e.key === 'Enter' && (e.ctrlKey || e.metaKey)) { e.preventDefault(); run(); }
  });
}

/** Run Python typed into the console; output or the Python exception text goes to #py-output. */
export async function runConsole(code) {
  const out = document.getElementById('py-output');
  out.dataset.state = 'running';
  out.textContent = '…';
  try {
    const py = await window.numrReady;
    const res = await py.globals.get('numr_console')(code);
    out.textContent = res;
    out.dataset.state = 'ok';
  } catch (err) {
    out.textContent = errorText(err);
    out.title = err.message || '';
    out.dataset.state = 'error';
  }
  return out.textContent;
}

async function boot() {
  header();
  if (!('gpu' in navigator)) {
    throw new Error('WebGPU is not available in this browser (navigator.gpu is missing). ' +
      'Use a recent Chromium/Chrome (on Linux: --enable-unsafe-webgpu).');
  }
  setStatus('loading Pyodide runtime…');
  const pyodideURL = new URL('pyodide/', base).href;
  const wheelsURL = new URL('wheels/', base).href;
  const { loadPyodide } = await import(/* @vite-ignore */ pyodideURL + 'pyodide.mjs');
  const py = await loadPyodide({
    indexURL: pyodideURL,
    packageBaseUrl: wheelsURL,      // never the CDN
    stdout: (s) => { log(s); console.log(s); },
    stderr: (s) => { log(s); console.warn(s); },
  });
  log(`Pyodide ${py.version} loaded in ${((performance.now() - t0) / 1000).toFixed(1)} s`);

  setStatus('loading micropip…');
  const manifest = await (await fetch(wheelsURL + 'manifest.json', { cache: 'no-cache' })).json();
  await py.loadPackage(manifest.support.map((f) => wheelsURL + f), {
    messageCallback: (m) => log(m), errorCallback: (m) => log('error: ' + m), checkIntegrity: false,
  });

  setStatus(`installing ${manifest.numr_web}…`);
  py.runPython(bootPy);
  const info = await py.globals.get('numr_boot')(wheelsURL + manifest.numr_web, (m) => setStatus(m));
  window.numrInfo = info;
  const secs = ((performance.now() - t0) / 1000).toFixed(1);
  log(`numr_web ${info.version} ready in ${secs} s; webgpu: ${info.webgpu}`);
  setStatus(`ready (${secs} s) — numr_web ${info.version}, Python ${info.python}, webgpu: ${info.webgpu}`, 'ready');
  return py;
}

if (!window.numrReady) {
  window.numrReady = boot();
  window.numrReady.catch((err) => showError(err, 'loading numr_web failed'));
}
export const numrReady = window.numrReady;
