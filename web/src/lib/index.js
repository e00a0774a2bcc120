// numr-web: numr_web (tensors, autograd, fused GEMM + bias + activation) on WebGPU, or on numpy
// (the cpu device) where the browser has no WebGPU, for any page.
//
//   import { loadNumr } from 'numr-web';
//   const numr = await loadNumr();                       // main thread: numr.pyodide is ready to use
//   await numr.runPython('import numr_web as nr; await (nr.ones((2, 2)) * 3).read()');
//   const w = await loadNumr({ worker: true });          // or everything in a Web Worker
//
// Files: this module loads pyodide/, wheels/ and numr-web-worker.js from its runtime folder: the
// folder this module lies in (the npm package's lib/), the folder numr-web/vite serves and emits
// them to (a Vite project), or baseURL.
import { bootNumr, callPy, checkDevice, errorInfo, NumrLoadError, toPlain } from './boot.js';
import { checkWebGPU, describeBrowser, NoWebGPUError } from './webgpu.js';

export { checkWebGPU, describeBrowser, NoWebGPUError, NumrLoadError };
export const version = __NUMR_WEB_VERSION__;
export const WORKER_FILE = 'numr-web-worker.js';
// numr-web/vite replaces this string literal with the URL of the folder it serves the runtime from
const PLUGIN_BASE = '__NUMR_WEB_RUNTIME_BASE__';

/** The runtime folder: baseURL (resolved against the page), else the bundler plugin's, else here. */
export function runtimeBase(baseURL) {
  // (not `new URL('./', import.meta.url)`: bundlers read that pattern as an asset to inline)
  const here = import.meta.url;
  const page = globalThis.location ? globalThis.location.href : here;
  if (baseURL) return new URL(baseURL.endsWith('/') ? baseURL : baseURL + '/', page).href;
  if (!PLUGIN_BASE.startsWith('__NUMR_WEB_')) return new URL(PLUGIN_BASE, page).href;
  return new URL('./', here).href;
}

function remoteError(e) {
  if (e && e.support && e.name === 'NoWebGPUError') {
    const err = new NoWebGPUError(e.support);
    err.message = e.message;
    return err;
  }
  const err = new Error(e.message);
  err.name = e.name === 'PythonError' ? 'PythonError' : e.name || 'Error';
  err.type = e.type;
  if (e.url) { err.url = e.url; err.option = e.option; }
  return err;
}

/** numr_web in this thread. .pyodide is the Pyodide instance (numr_web installed, WebGPU ready). */
class MainThreadNumr {
  constructor(py, info) {
    this.mode = 'main'; this.pyodide = py; this.info = info; this._stop = false;
  }
  /** Runs Python (top-level await allowed); resolves to its value as plain JS. */
  async runPython(code) { return toPlain(await this.pyodide.runPythonAsync(code)); }
  /** Calls the Python global `name(arg, emit, should_stop)`; onEvent receives emit()'s values. */
  call(name, arg, { onEvent, stoppable = false } = {}) {
    if (stoppable) this._stop = false;
    return callPy(this.pyodide, name, arg, onEvent ? (d) => onEvent(toPlain(d)) : null,
      stoppable ? () => this._stop : null);
  }
  /** Asks the running stoppable call to stop (its loop checks after every step). */
  stop() { this._stop = true; }
  terminate() {}
}

/** numr_web in a dedicated Web Worker: same methods; values cross as structured clones. */
class WorkerNumr {
  constructor(worker, workerURL, { onStatus, stdout, stderr }) {
    this.mode = 'worker'; this.pyodide = null; this.info = null; this.worker = worker;
    this._next = 1; this._pending = new Map();
    this._stopFlag = typeof SharedArrayBuffer !== 'undefined' && globalThis.crossOriginIsolated
      ? new Int32Array(new SharedArrayBuffer(4)) : null;
    worker.onmessage = (ev) => {
      const m = ev.data;
      if (m.op === 'status') onStatus && onStatus(m.text);
      else if (m.op === 'log') (m.stream === 'stderr' ? stderr : stdout)?.(m.text);
      else if (m.op === 'event') this._pending.get(m.id)?.onEvent?.(m.data);
      else if (m.op === 'result') {
        const p = this._pending.get(m.id);
        this._pending.delete(m.id);
        if (p) (m.ok ? p.resolve(m.value) : p.reject(remoteError(m.error)));
      }
    };
    worker.onerror = (ev) => {
      // a worker that cannot load (404, not JavaScript, another origin) gives an event without a message
      const err = ev.message
        ? new Error(`the numr_web worker (${workerURL}) failed: ${ev.message}`)
        : new NumrLoadError('the numr_web worker', workerURL, 'the browser could not start it as a module worker ' +
          '(missing file, not JavaScript, or another origin than the page)');
      ev.preventDefault?.();
      for (const p of this._pending.values()) p.reject(err);
      this._pending.clear();
    };
  }
  _send(msg, onEvent) {
    const id = this._next++;
    return new Promise((resolve, reject) => {
      this._pending.set(id, { resolve, reject, onEvent });
      this.worker.postMessage({ ...msg, id });
    });
  }
  async _boot(baseURL, device) {
    this.info = await this._send({ op: 'boot', baseURL, device, stopFlag: this._stopFlag && this._stopFlag.buffer });
    return this;
  }
  runPython(code) { return this._send({ op: 'run', code }); }
  call(name, arg, { onEvent, stoppable = false } = {}) {
    return this._send({ op: 'call', name, arg, stoppable }, onEvent);
  }
  stop() {
    if (this._stopFlag) Atomics.store(this._stopFlag, 0, 1);   // seen even while Python is busy
    this.worker.postMessage({ op: 'stop' });
  }
  terminate() { this.worker.terminate(); }
}

/**
 * Loads numr_web. Options:
 *   device   "auto" (default): WebGPU where the browser grants an adapter, else the cpu device
 *            (numpy in Pyodide); "webgpu": WebGPU or NoWebGPUError; "cpu": numpy only
 *   worker   false (default): in this thread, `.pyodide` usable directly; true: in a Web Worker
 *            (falls back to this thread where workers have no WebGPU)
 *   baseURL  the folder of pyodide/, wheels/ and numr-web-worker.js (default: next to this module,
 *            or where numr-web/vite put them)
 *   onStatus(text), stdout(text), stderr(text)   progress and Python output
 * Resolves to an object with runPython(code), call(name, arg, {onEvent, stoppable}), stop(),
 * terminate(), mode, info ({device, device_reason, webgpu, version, python, jspi, ...}) and pyodide
 * (main thread only). Rejects with NoWebGPUError (.support says what is missing and how to get it)
 * where WebGPU is required and missing, or NumrLoadError (.url: what was tried, .option: what
 * changes it) where a runtime file could not be loaded.
 */
export async function loadNumr({ worker = false, device = 'auto', baseURL, onStatus, stdout, stderr } = {}) {
  const want = checkDevice(device);
  const base = runtimeBase(baseURL);
  if (worker && typeof Worker !== 'undefined') {
    const workerURL = new URL(WORKER_FILE, base).href;
    let w;
    try {
      w = new Worker(workerURL, { type: 'module', name: 'numr_web' });
    } catch (e) {
      throw new NumrLoadError('the numr_web worker', workerURL, e && e.message || String(e));
    }
    const client = new WorkerNumr(w, workerURL, { onStatus, stdout, stderr });
    try {
      return await client._boot(base, want);
    } catch (err) {
      w.terminate();
      // workers without WebGPU where the page has it (older Safari): run on the page instead
      if (err.name !== 'NoWebGPUError' || !(await checkWebGPU()).ok) throw err;
      (stderr || console.warn)('numr_web: this browser has no WebGPU in workers; running on the page instead');
    }
  }
  const { py, info } = await bootNumr({ baseURL: base, device: want, onStatus, stdout, stderr });
  info.crossOriginIsolated = globalThis.crossOriginIsolated === true;
  return new MainThreadNumr(py, info);
}

export { errorInfo };
