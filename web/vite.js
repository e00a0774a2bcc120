// numr-web/vite: the one line a Vite project needs to use numr-web (`vite dev`, `vite build`,
// `vite preview`; page and worker mode).
//
//   // vite.config.js
//   import numrWeb from 'numr-web/vite';
//   export default { plugins: [numrWeb()] };
//
// What it does:
//   - dev: serves the package's runtime (lib/: Pyodide, the wheels, the worker) as it is under
//     <base>numr-web/, ahead of Vite's module pipeline: Pyodide's loader is never transformed or
//     pre-bundled, so its Node-only imports (`ws`, `node:*`) stay out of the browser graph;
//   - build: emits the same files into <outDir>/numr-web/ (vite preview and any static server serve
//     them from there);
//   - points loadNumr() at that folder (the default baseURL) and keeps numr-web out of
//     optimizeDeps (a pre-bundled copy would look for its files in node_modules/.vite/deps/).
// Option: dir (default "numr-web"): the folder's name under the base.
import { createReadStream, readdirSync, readFileSync, statSync } from 'node:fs';
import { join, posix, relative, resolve, sep } from 'node:path';
import { fileURLToPath } from 'node:url';

const LIB = fileURLToPath(new URL('./lib/', import.meta.url));
const MAIN = resolve(LIB, 'numr-web.js');
const MARKER = /(["'])__NUMR_WEB_RUNTIME_BASE__\1/;
const RELATIVE = '__NUMR_WEB_RUNTIME_DIR__';
const TYPES = {
  '.js': 'text/javascript', '.mjs': 'text/javascript', '.wasm': 'application/wasm',
  '.json': 'application/json', '.zip': 'application/zip', '.whl': 'application/zip',
};

function files(dir) {
  return readdirSync(dir).flatMap((name) => {
    const p = join(dir, name);
    return statSync(p).isDirectory() ? files(p) : [p];
  });
}

export default function numrWeb({ dir = 'numr-web' } = {}) {
  if (!/^[\w.-]+(\/[\w.-]+)*$/.test(dir)) {
    throw new TypeError(`numr-web/vite: dir must be a relative folder name such as "numr-web", got ${JSON.stringify(dir)}`);
  }
  let base = '/';
  let command = 'serve';
  let ssr = false;
  return {
    name: 'numr-web',
    config() {
      return { optimizeDeps: { exclude: ['numr-web'] } };
    },
    configResolved(config) {
      base = config.base || '/';
      command = config.command;
      ssr = Boolean(config.build && config.build.ssr);
    },
    configureServer(server) {
      // added before Vite's own middlewares: these files are served byte for byte
      const prefix = (base.startsWith('/') ? base : '/') + dir + '/';
      server.middlewares.use((req, res, next) => {
        const path = decodeURIComponent((req.url || '').split('?')[0]);
        if (!path.startsWith(prefix)) return next();
        const file = resolve(LIB, path.slice(prefix.length));
        if (!file.startsWith(LIB) || !statSync(file, { throwIfNoEntry: false })?.isFile()) {
          res.statusCode = 404;
          res.setHeader('Content-Type', 'text/plain');
          res.end(`numr-web/vite: no file ${path} in ${LIB}`);
          return;
        }
        const ext = file.slice(file.lastIndexOf('.'));
        res.setHeader('Content-Type', TYPES[ext] || 'application/octet-stream');
        res.setHeader('Cache-Control', 'no-cache');
        createReadStream(file).pipe(res);
      });
    },
    transform(code, id) {
      if (resolve(id.split('?')[0]) !== MAIN || !MARKER.test(code)) return null;
      // dev: an absolute path; build: relative to the chunk the module ends up in (renderChunk),
      // which also holds for a relative base ('./')
      const url = command === 'build' ? `new URL(/* @vite-ignore */ ${JSON.stringify(RELATIVE)}, import.meta.url).href`
        : JSON.stringify((base.startsWith('/') ? base : '/') + dir + '/');
      return { code: code.replace(MARKER, url), map: null };
    },
    renderChunk(code, chunk) {
      if (!code.includes(RELATIVE)) return null;
      let rel = posix.relative(posix.dirname(chunk.fileName), dir) + '/';
      if (!rel.startsWith('.')) rel = './' + rel;
      return { code: code.split(RELATIVE).join(rel), map: null };
    },
    generateBundle() {
      if (ssr) return;
      for (const f of files(LIB)) {
        const name = relative(LIB, f).split(sep).join('/');
        if (name.endsWith('.map')) continue;
        this.emitFile({ type: 'asset', fileName: `${dir}/${name}`, source: readFileSync(f) });
      }
    },
  };
}

export { numrWeb, LIB as runtimeDir };
