// Boots Pyodide + numr_web + its WebGPU device in the current global scope (a page or a worker),
// from files next to the library: <base>/pyodide/ (Pyodide's runtime) and <base>/wheels/ (the
// numr_web wheel, micropip and packaging; manifest.json names them). Nothing leaves that origin.
import bootPy from '../../py/boot.py?raw';
import { checkWebGPU, NoWebGPUError } from './webgpu.js';

/** Python result -> plain JS value (structured-cloneable); PyProxies are released. */
export function toPlain(r) {
  if (r && typeof r.toJs === 'function') {
    try { return r.toJs({ dict_converter: Object.fromEntries, create_pyproxies: false }); }
    finally { if (typeof r.destroy === 'function') r.destroy(); }
  }
  return r;
}

/** A Pyodide PythonError or a JS Error -> {name, type, message} (type: the Python exception class). */
export function errorInfo(err) {
  const message = String((err && err.message) || err);
  let type = err && err.type ? String(err.type) : '';
  if (!type) {
    const m = message.match(/^([A-Za-z_][\w.]*(?:Error|Exception)):/m);
    if (m) type = m[1];
  }
  return { name: (err && err.name) || 'Error', type, message };
}

/** -> {py, info}. onStatus(text) reports progress; throws NoWebGPUError without WebGPU. */
export async function bootNumr({ baseURL, onStatus = () => {}, stdout, stderr } = {}) {
  const t0 = performance.now();
  const support = await checkWebGPU();
  if (!support.ok) throw new NoWebGPUError(support);
  const base = new URL(baseURL || './', typeof location !== 'undefined' ? location.href : undefined);
  const pyodideURL = new URL('pyodide/', base).href;
  const wheelsURL = new URL('wheels/', base).href;
  onStatus('loading the Python runtime (Pyodide)…');
  const { loadPyodide } = await import(/* @vite-ignore */ pyodideURL + 'pyodide.mjs');
  const py = await loadPyodide({ indexURL: pyodideURL, packageBaseUrl: wheelsURL, stdout, stderr });
  onStatus('loading micropip…');
  const manifest = await (await fetch(wheelsURL + 'manifest.json', { cache: 'no-cache' })).json();
  await py.loadPackage(manifest.support.map((f) => wheelsURL + f), {
    messageCallback: () => {}, errorCallback: (m) => (stderr || console.warn)(m), checkIntegrity: false,
  });
  onStatus(`installing ${manifest.numr_web}…`);
  py.runPython(bootPy);
  const info = toPlain(await py.globals.get('numr_boot')(wheelsURL + manifest.numr_web, onStatus));
  info.seconds = (performance.now() - t0) / 1000;
  info.pyodide = py.version;
  return { py, info };
}

/** Calls the Python global `name(arg, emit, should_stop)` (awaiting it when it is async). */
export async function callPy(py, name, arg, emit, shouldStop) {
  const fn = py.globals.get(name);
  if (!fn) throw new Error(`no Python function ${name}() is defined`);
  try {
    return toPlain(await fn(arg, emit || null, shouldStop || null));
  } finally {
    fn.destroy();
  }
}
