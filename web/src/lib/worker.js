// The numr_web worker: Pyodide + numr_web + WebGPU in a dedicated worker; the page only renders.
// Protocol (page -> worker): {op: 'boot', baseURL, device, stopFlag?} | {op: 'run', id, code}
//   | {op: 'call', id, name, arg, stoppable} | {op: 'stop'}
// (worker -> page): {op: 'status', text} | {op: 'log', stream, text} | {op: 'event', id, data}
//   | {op: 'result', id, ok, value | error: {name, type, message, support?, url?, option?}}
import { bootNumr, callPy, errorInfo, toPlain } from './boot.js';

let py = null;
let stopShared = null;       // Int32Array over a SharedArrayBuffer (cross-origin isolated pages)
let stopLocal = false;       // set by an {op: 'stop'} message otherwise
const shouldStop = () => stopLocal || (stopShared !== null && Atomics.load(stopShared, 0) === 1);
const reply = (id, ok, payload) => postMessage(ok ? { op: 'result', id, ok, value: payload } : { op: 'result', id, ok, error: payload });

self.onmessage = async (ev) => {
  const m = ev.data;
  if (m.op === 'stop') { stopLocal = true; return; }
  try {
    if (m.op === 'boot') {
      if (m.stopFlag) stopShared = new Int32Array(m.stopFlag);
      const booted = await bootNumr({
        baseURL: m.baseURL,
        device: m.device,
        onStatus: (text) => postMessage({ op: 'status', text: String(text) }),
        stdout: (text) => postMessage({ op: 'log', stream: 'stdout', text }),
        stderr: (text) => postMessage({ op: 'log', stream: 'stderr', text }),
      });
      py = booted.py;
      booted.info.crossOriginIsolated = self.crossOriginIsolated === true;
      reply(m.id, true, booted.info);
    } else if (m.op === 'run') {
      reply(m.id, true, toPlain(await py.runPythonAsync(m.code)));
    } else if (m.op === 'call') {
      if (m.stoppable) { stopLocal = false; if (stopShared) Atomics.store(stopShared, 0, 0); }
      const emit = (data) => postMessage({ op: 'event', id: m.id, data: toPlain(data) });
      reply(m.id, true, await callPy(py, m.name, m.arg, emit, m.stoppable ? shouldStop : null));
    }
  } catch (err) {
    reply(m.id, false, errorInfo(err));
  }
};
