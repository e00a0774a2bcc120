// Vite 8 config for the numr_web browser app (web/ -> web/dist).
//
// Pyodide is NOT bundled: its runtime files are copied from node_modules/pyodide into dist/pyodide/
// (and served from there by the dev server) and loaded with a dynamic import at run time.
// web/public/wheels/ (built by scripts/build-web.sh) holds the numr_web wheel, the micropip +
// packaging wheels and manifest.json; web/public/golden/ holds the parity page's golden values.
import { defineConfig } from 'vite';
import { resolve, dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { copyFileSync, mkdirSync, existsSync, createReadStream, statSync } from 'node:fs';

const here = dirname(fileURLToPath(import.meta.url));
const pyodideDir = resolve(here, 'node_modules/pyodide');
const PYODIDE_FILES = [
  'pyodide.mjs', 'pyodide.asm.mjs', 'pyodide.asm.wasm', 'python_stdlib.zip', 'pyodide-lock.json',
];
const MIME = { '.mjs': 'text/javascript', '.js': 'text/javascript', '.wasm': 'application/wasm',
  '.zip': 'application/zip', '.json': 'application/json' };

function pyodideRuntime() {
  return {
    name: 'numr-pyodide-runtime',
    // dev server: /pyodide/<file> straight from node_modules
    configureServer(server) {
      server.middlewares.use('/pyodide', (req, res, next) => {
        const name = (req.url || '').split('?')[0].replace(/^\//, '');
        if (!PYODIDE_FILES.includes(name)) return next();
        const file = join(pyodideDir, name);
        const ext = name.slice(name.lastIndexOf('.'));
        res.setHeader('Content-Type', MIME[ext] || 'application/octet-stream');
        res.setHeader('Content-Length', statSync(file).size);
        createReadStream(file).pipe(res);
      });
    },
    // build: copy the runtime next to the pages
    writeBundle(options) {
      const out = join(options.dir, 'pyodide');
      mkdirSync(out, { recursive: true });
      for (const f of PYODIDE_FILES) {
        if (!existsSync(join(pyodideDir, f))) throw new Error(`pyodide file missing: ${f} (run npm ci)`);
        copyFileSync(join(pyodideDir, f), join(out, f));
      }
    },
  };
}

export default defineConfig({
  root: resolve(here, 'web'),
  base: './',
  publicDir: resolve(here, 'web/public'),
  plugins: [pyodideRuntime()],
  optimizeDeps: { exclude: ['pyodide'] },
  server: { host: '127.0.0.1', port: 5173, strictPort: false },
  build: {
    outDir: resolve(here, 'web/dist'),
    emptyOutDir: true,
    target: 'es2022',
    chunkSizeWarningLimit: 4096,
    rollupOptions: {
      input: {
        index: resolve(here, 'web/index.html'),
        parity: resolve(here, 'web/parity.html'),
        bench: resolve(here, 'web/bench.html'),
      },
    },
  },
});
