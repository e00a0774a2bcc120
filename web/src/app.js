// Shared by the app's pages: header (nav, status, error banner), Python console, the connection to
// numr_web (through the published library, lib/numr-web.js) and the no-WebGPU notice.
//
//   ?mode=worker (default): Pyodide + numr_web + WebGPU run in a Web Worker, the page only renders.
//   ?mode=main: everything on the page's main thread.
//
//   window.numrReady  -> Promise: the Pyodide instance (mode=main) or, in worker mode, an object with
//                        the same runPythonAsync(code) (values come back as plain JS); rejected with
//                        the reason (NoWebGPUError when there is no WebGPU)
//   window.numrClient -> the library's client (runPython, call, stop), once ready
// Status: #numr-status[data-state=loading|ready|error|no-webgpu]; errors: #numr-error.
import './style.css';

const libLoaded = import(/* @vite-ignore */ new URL('lib/numr-web.js', document.baseURI).href);
export const params = new URLSearchParams(location.search);
export const mode = params.get('mode') === 'main' ? 'main' : 'worker';
const $ = (id) => document.getElementById(id);

export function setStatus(text, state = 'loading') {
  const el = $('numr-status');
  if (!el) return;
  el.dataset.state = state;
  el.querySelector('.text').textContent = text;
}

/** A short, readable message for a JS Error or a Python exception (its last "XError: ..." line). */
export function errorText(err) {
  if (!err) return 'unknown error';
  const msg = String(err.message ?? err).trim();
  if (err.type || /Traceback/.test(msg)) {
    const re = /^([A-Za-z_][\w.]*(?:Error|Exception|Exit|Interrupt|Warning))(?::|$)/gm;
    let m, at = -1;
    while ((m = re.exec(msg))) at = m.index;
    if (at >= 0) return msg.slice(at, at + 2000);
    const lines = msg.split('\n').filter((l) => l.trim());
    return lines[lines.length - 1];
  }
  return msg;
}

/** The red banner: shows until dismissed or until the next action succeeds (clearError). */
export function showError(err, where = '') {
  const el = $('numr-error');
  const text = (where ? where + ': ' : '') + errorText(err);
  if (el) {
    el.hidden = false;
    el.querySelector('.text').textContent = text;
    el.title = err && err.message && err.message !== text ? err.message : '';
  }
  return text;
}
export function clearError() {
  const el = $('numr-error');
  if (el) { el.hidden = true; el.querySelector('.text').textContent = ''; el.title = ''; }
}

function log(line) {
  const el = $('numr-log');
  if (el) { el.textContent += line + '\n'; el.scrollTop = el.scrollHeight; }
}

function header() {
  const page = document.body.dataset.page || '';
  const h = document.createElement('header');
  h.id = 'numr-header';
  const link = (href, id, text) => `<a href="./${href}${mode === 'main' ? '?mode=main' : ''}"${page === id ? ' class="active" aria-current="page"' : ''}>${text}</a>`;
  h.innerHTML = `
    <nav aria-label="numr_web pages">
      <strong>numr_web</strong>
      ${link('index.html', 'train', 'Training')}${link('gpt.html', 'gpt', 'GPT')}${link('model.html', 'model', 'Your model')}${link('parity.html', 'parity', 'Parity')}${link('bench.html', 'bench', 'Benchmark')}
    </nav>
    <div id="numr-status" data-state="loading" role="status" aria-live="polite"><span class="dot"></span><span class="text">starting…</span></div>
    <div id="numr-error" role="alert" hidden><span class="text"></span><button type="button" class="close" aria-label="Dismiss the error">×</button></div>`;
  document.body.prepend(h);
  h.querySelector('#numr-error .close').addEventListener('click', clearError);
  const footer = document.createElement('details');
  footer.id = 'numr-console';
  footer.innerHTML = `
    <summary>Python console &amp; log</summary>
    <label for="py-input">Python (top-level <code>await</code> works)</label>
    <textarea id="py-input" spellcheck="false" rows="4">import numr_web as nr
x = nr.tensor([[1.0, 2.0], [3.0, 4.0]], requires_grad=True)   # on the page's device
y = (x @ x).sum(); y.backward()
print(await y.read(), await x.grad.read())</textarea>
    <button id="py-run" type="button">Run (Ctrl+Enter)</button>
    <pre id="py-output"></pre>
    <pre id="numr-log"></pre>`;
  document.body.append(footer);
  const run = () => runConsole($('py-input').value);
  $('py-run').addEventListener('click', run);
  $('py-input').addEventListener('keydown', (e) => {
    if (e.key === 'Enter' && (e.ctrlKey || e.metaKey)) { e.preventDefault(); run(); }
  });
}

/** Run Python typed into the console; output or the Python exception text goes to #py-output. */
export async function runConsole(code) {
  const out = $('py-output');
  out.dataset.state = 'running';
  out.textContent = '…';
  try {
    await ready;
    const client = window.numrClient;           // the current one (restart() replaces it)
    out.textContent = await client.call('numr_console', code);
    out.dataset.state = 'ok';
  } catch (err) {
    out.textContent = errorText(err);
    out.title = err.message || '';
    out.dataset.state = 'error';
  }
  return out.textContent;
}

/** One line at the top of the page: numr_web runs on the cpu device (numpy in Pyodide) and why. */
function showDeviceNotice(info, support) {
  const p = document.createElement('p');
  p.id = 'numr-device';
  p.dataset.device = info.device;
  p.setAttribute('role', 'note');
  p.textContent = `Running on the cpu device (numpy in Pyodide): ${info.device_reason}` +
    (support && support.howto ? `. For WebGPU: ${support.howto}` : '.');
  document.querySelector('main').prepend(p);
}

/** The no-WebGPU notice at the top of the page: the browser, what is missing, how to get it. */
function showNoWebGPU(support) {
  const box = document.createElement('section');
  box.id = 'no-webgpu';
  box.setAttribute('role', 'alert');
  box.innerHTML = `<h2>This page needs WebGPU</h2>
    <p><strong class="browser"></strong>: <span class="missing"></span>.</p>
    <p><strong>How to get it:</strong> <span class="howto"></span></p>
    <p class="browsers"></p>`;
  box.querySelector('.browser').textContent = support.browser.label;
  box.querySelector('.missing').textContent = support.missingText;
  box.querySelector('.howto').textContent = support.howto;
  box.querySelector('.browsers').textContent = support.browsers;
  document.querySelector('main').prepend(box);
  setStatus(`no WebGPU in ${support.browser.label}`, 'no-webgpu');
}

header();
if (import.meta.env.PROD && 'serviceWorker' in navigator) {
  // offline after the first visit: sw.js keeps a copy of the whole app (built by vite.config.js)
  navigator.serviceWorker.register('./sw.js').catch((e) => console.warn('numr_web: no offline copy:', e));
}

const t0 = performance.now();
let connect = null;
const pyOf = (c) => c.pyodide || { runPythonAsync: (code) => c.runPython(code), mode: c.mode, client: c };

/** Ends numr_web's worker (and whatever Python runs there) and starts a fresh one: -> the new
 * client, also window.numrClient / window.numrReady from then on. */
export async function restart() {
  await ready;
  if (window.numrClient) window.numrClient.terminate();
  setStatus('restarting numr_web…');
  const client = await connect();
  window.numrClient = client;
  window.numrReady = Promise.resolve(pyOf(client));
  setStatus(`ready (restarted) — numr_web ${client.info.version}, ${client.mode === 'worker' ? 'in a worker' : 'on the page'}`, 'ready');
  return client;
}

/** Resolves to the library client once numr_web is ready; rejects with the reason. */
export const ready = (async () => {
  const lib = await libLoaded;
  const support = await lib.checkWebGPU();
  // ?device=auto (default) | webgpu | cpu: without WebGPU on the page, auto runs on numpy where the
  // build has it (the page decides: a worker may see WebGPU where the page does not)
  let device = params.get('device') || 'auto';
  if (device === 'auto' && !support.ok) device = 'cpu';
  connect = () => lib.loadNumr({
    worker: mode === 'worker', device, baseURL: new URL('lib/', document.baseURI).href,
    onStatus: (t) => setStatus(t), stdout: (s) => { log(s); console.log(s); }, stderr: (s) => { log(s); console.warn(s); },
  });
  let client;
  try {
    client = await connect();
  } catch (err) {
    const noFallback = err && err.option === 'device' && !support.ok;     // a build without numpy
    if (err && (err.name === 'NoWebGPUError' || noFallback)) {
      showNoWebGPU(err.support || support);
      throw noFallback ? new lib.NoWebGPUError(support) : err;
    }
    throw err;
  }
  const i = client.info, secs = ((performance.now() - t0) / 1000).toFixed(1);
  if (i.device === 'cpu') {
    if (!support.ok) i.device_reason = `no WebGPU: ${support.missingText}`;
    showDeviceNotice(i, support.ok ? null : support);
  }
  log(`numr_web ${i.version} ready in ${secs} s (${client.mode} thread); device: ${i.device} (${i.device_reason}); webgpu: ${i.webgpu}; JSPI: ${i.jspi}`);
  setStatus(`ready (${secs} s) — numr_web ${i.version}, Python ${i.python}, ${client.mode === 'worker' ? 'in a worker' : 'on the page'}, ` +
    (i.device === 'webgpu' ? `WebGPU: ${i.webgpu}` : 'cpu device (numpy)'), 'ready');
  window.numrClient = client;
  return client;
})();
ready.catch((err) => {
  if (err && err.name === 'NoWebGPUError') return;
  setStatus('numr_web failed to load', 'error');
  showError(err, 'loading numr_web failed');
});
window.numrReady = ready.then(pyOf);
window.numrReady.catch(() => {});
