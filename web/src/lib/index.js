// numr-web: numr_web (tensors, autograd, fused GEMM + bias + activation) on WebGPU for any page.
//
//   import { loadNumr } from 'numr-web';
//   const numr = await loadNumr();                       // main thread: numr.pyodide is ready to use
//   await numr.runPython('import numr_web as nr; await (nr.ones((2, 2), device="webgpu") * 3).read()');
//   const w = await loadNumr({ worker: true });          // or everything in a Web Worker
//
// Files: this module expects pyodide/ and wheels/ next to it (the npm package and the numr-web
// wheel's app ship them); pass baseURL to load them from elsewhere.
import { bootNumr, callPy, errorInfo, toPlain } from './boot.js';
import { checkWebGPU, describeBrowser, NoWebGPUError } from './webgpu.js';

export { checkWebGPU, describeBrowser, NoWebGPUError };
export const version = __NUMR_WEB_VERSION__;
const WORKER_FILE = './numr-web-worker.js';

function remoteError(e) {
  if (e && e.support) return new NoWebGPUError(e.support);
  const err = new Error(e.message);
  err.name = e.name === 'PythonError' ? 'PythonError' : e.name || 'Error';
  err.type = e.type;
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
  constructor(worker, { onStatus, stdout, stderr }) {
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
      const err = new Error(`the numr_web worker failed: ${ev.message || 'could not load ' + WORKER_FILE}`);
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
  async _boot(baseURL) {
    this.info = await this._send({ op: 'boot', baseURL, stopFlag: this._stopFlag && this._stopFlag.buffer });
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
 * Loads numr_web on WebGPU. Options:
 *   worker   false (default): in this thread, `.pyodide` usable directly; true: in a Web Worker
 *            (falls back to this thread where workers have no WebGPU)
 *   baseURL  where pyodide/ and wheels/ are (default: next to this module)
 *   onStatus(text), stdout(text), stderr(text)   progress and Python output
 * Resolves to an object with runPython(code), call(name, arg, {onEvent, stoppable}), stop(),
 * terminate(), mode, info and pyodide (main thread only). Rejects with NoWebGPUError (.support says
 * what is missing and how to get it) where there is no WebGPU.
 */
export async function loadNumr({ worker = false, baseURL, onStatus, stdout, stderr } = {}) {
  const base = new URL(baseURL || './', baseURL ? (globalThis.location ? location.href : import.meta.url) : import.meta.url).href;
  if (worker && typeof Worker !== 'undefined') {
    const w = new Worker(new URL(WORKER_FILE, import.meta.url), { type: 'module', name: 'numr_web' });
    const client = new WorkerNumr(w, { onStatus, stdout, stderr });
    try {
      return await client._boot(base);
    } catch (err) {
      w.terminate();
      if (!(err instanceof NoWebGPUError) || !(await checkWebGPU()).ok) throw err;
      (stderr || console.warn)('numr_web: this browser has no WebGPU in workers; running on the page instead');
    }
  }
  const { py, info } = await bootNumr({ baseURL: base, onStatus, stdout, stderr });
  info.crossOriginIsolated = globalThis.crossOriginIsolated === true;
  return new MainThreadNumr(py, info);
}

export { errorInfo };
