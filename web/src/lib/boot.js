// Boots Pyodide + numr_web + its device in the current global scope (a page or a worker), from files
// in one folder, the runtime base: <base>pyodide/ (Pyodide's runtime) and <base>wheels/ (the
// numr_web wheel, micropip, packaging and, where the build has it, Pyodide's numpy; manifest.json
// names them). Nothing leaves that origin.
//
// Devices: "webgpu" (the WGSL kernels on navigator.gpu), "cpu" (numr_web's numpy backend on
// Pyodide's numpy), "auto" (webgpu where an adapter is granted, else cpu).
import bootPy from '../../py/boot.py?raw';
import { checkWebGPU, NoWebGPUError } from './webgpu.js';

export const DEVICES = ['auto', 'webgpu', 'cpu'];

/** A file of the runtime could not be loaded: .url is what was tried, .option what changes it. */
export class NumrLoadError extends Error {
  constructor(what, url, cause, option = 'baseURL') {
    super(`numr_web could not load ${what} from ${url}: ${cause}. ` + NumrLoadError.hint(option));
    this.name = 'NumrLoadError';
    this.url = url;
    this.option = option;
  }

  static hint(option) {
    if (option === 'device') {
      return 'Pass loadNumr({device: "webgpu"}) to use WebGPU only, or build numr-web with Pyodide\'s ' +
        'numpy (scripts/build-web.sh: NUMR_PYODIDE_PACKAGES).';
    }
    return 'The runtime files (pyodide/, wheels/, numr-web-worker.js) are looked for in that folder: ' +
      'pass loadNumr({baseURL}) with the URL of the folder that holds them (the package\'s lib/), ' +
      'or in a Vite project add numrWeb() from "numr-web/vite" to the plugins of vite.config.js.';
  }
}

/** `device` option -> "auto" | "webgpu" | "cpu"; TypeError naming the option otherwise. */
export function checkDevice(device) {
  const d = device === undefined || device === null ? 'auto' : device;
  if (!DEVICES.includes(d)) {
    throw new TypeError(`loadNumr: device must be one of ${DEVICES.map((x) => JSON.stringify(x)).join(', ')}, got ${JSON.stringify(device)}`);
  }
  return d;
}

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
  const out = { name: (err && err.name) || 'Error', type, message };
  if (err && err.url) { out.url = err.url; out.option = err.option; }
  if (err && err.support) out.support = err.support;
  return out;
}

async function fetchManifest(url) {
  let res;
  try {
    res = await fetch(url, { cache: 'no-cache' });
  } catch (e) {
    throw new NumrLoadError('the runtime file list', url, `the request failed (${e && e.message || e})`);
  }
  if (!res.ok) throw new NumrLoadError('the runtime file list', url, `HTTP ${res.status} ${res.statusText}`.trim());
  const text = await res.text();
  try {
    const m = JSON.parse(text);
    if (m && typeof m.numr_web === 'string') return m;
  } catch (e) { /* below */ }
  const type = res.headers.get('content-type') || 'unknown type';
  throw new NumrLoadError('the runtime file list', url, `the server answered with something else (${type}, ` +
    `${JSON.stringify(text.slice(0, 40))}…), not numr-web's manifest.json`);
}

/** Which device to boot: {device, reason, support}. Throws NoWebGPUError for device "webgpu"
 * without WebGPU, NumrLoadError for "cpu" (or "auto" without WebGPU) where the build has no numpy. */
async function pickDevice(device, manifest, manifestURL) {
  if (device === 'cpu') {
    if (!manifest.numpy) throw noNumpy(manifestURL, 'device: "cpu" was asked for');
    return { device: 'cpu', reason: 'device: "cpu" was asked for', support: null };
  }
  const support = await checkWebGPU();
  if (support.ok) return { device: 'webgpu', reason: 'WebGPU adapter granted', support };
  if (device === 'webgpu' || !manifest.numpy) {
    const err = new NoWebGPUError(support);
    if (device === 'auto') {
      err.message += ` (the cpu fallback needs Pyodide's numpy, which this build of numr-web does not include: ${manifestURL} lists none)`;
    }
    throw err;
  }
  return { device: 'cpu', reason: `no WebGPU: ${support.missingText}`, support };
}

function noNumpy(manifestURL, why) {
  return new NumrLoadError('Pyodide\'s numpy for the cpu device', manifestURL,
    `${why}, but this build of numr-web does not include numpy for Pyodide (its manifest lists none)`, 'device');
}

/**
 * -> {py, info}. baseURL: the runtime folder (absolute URL); device: "auto" | "webgpu" | "cpu".
 * onStatus(text) reports progress. Throws NoWebGPUError (no WebGPU and no cpu fallback) or
 * NumrLoadError (a runtime file could not be loaded: .url, .option).
 */
export async function bootNumr({ baseURL, device = 'auto', onStatus = () => {}, stdout, stderr } = {}) {
  const t0 = performance.now();
  const want = checkDevice(device);
  const base = new URL(baseURL || './', typeof location !== 'undefined' ? location.href : undefined);
  const pyodideURL = new URL('pyodide/', base).href;
  const wheelsURL = new URL('wheels/', base).href;
  const manifestURL = wheelsURL + 'manifest.json';
  const manifest = await fetchManifest(manifestURL);
  const chosen = await pickDevice(want, manifest, manifestURL);
  onStatus('loading the Python runtime (Pyodide)…');
  const loaderURL = pyodideURL + 'pyodide.mjs';
  let loadPyodide;
  try {
    ({ loadPyodide } = await import(/* @vite-ignore */ loaderURL));
  } catch (e) {
    throw new NumrLoadError('Pyodide', loaderURL, e && e.message || String(e));
  }
  let py;
  try {
    py = await loadPyodide({ indexURL: pyodideURL, packageBaseUrl: wheelsURL, stdout, stderr });
  } catch (e) {
    throw new NumrLoadError('Pyodide\'s runtime (pyodide.asm.wasm, python_stdlib.zip, pyodide-lock.json)',
      pyodideURL, e && e.message || String(e));
  }
  const packages = [...manifest.support, ...(chosen.device === 'cpu' ? [manifest.numpy] : [])];
  onStatus(chosen.device === 'cpu' ? 'loading micropip and numpy…' : 'loading micropip…');
  const failed = [];
  await py.loadPackage(packages.map((f) => wheelsURL + f), {
    messageCallback: () => {}, errorCallback: (m) => { failed.push(m); (stderr || console.warn)(m); }, checkIntegrity: false,
  });
  if (failed.length) {
    const bad = packages.find((f) => failed.some((m) => m.includes(f))) || packages[0];
    throw new NumrLoadError(`the Python package ${bad.split('-')[0]}`, wheelsURL + bad, failed.join('; '));
  }
  onStatus(`installing ${manifest.numr_web}…`);
  py.runPython(bootPy);
  const info = toPlain(await py.globals.get('numr_boot')(wheelsURL + manifest.numr_web, onStatus, chosen.device));
  info.device_reason = chosen.reason;
  info.seconds = (performance.now() - t0) / 1000;
  info.pyodide = py.version;
  info.baseURL = base.href;
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
