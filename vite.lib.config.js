// Vite library mode: the npm package `numr-web` (web/package.json) -> web/lib/
//   numr-web.js         loadNumr(), checkWebGPU(), NoWebGPUError (web/src/lib/index.js)
//   numr-web-worker.js  the worker loadNumr({worker: true}) starts (web/src/lib/worker.js)
//   pyodide/            Pyodide's runtime, copied from node_modules/pyodide
//   wheels/             the numr_web wheel, micropip, packaging, manifest.json (from build/web-wheels,
//                       made by scripts/build-web.sh)
// The app (vite.config.js) copies web/lib to dist/lib and its pages load numr_web through it.
import { defineConfig } from 'vite';
import { viteStaticCopy } from 'vite-plugin-static-copy';
import { resolve, dirname } from 'node:path';
import { fileURLToPath } from 'node:url';
import { existsSync, readFileSync } from 'node:fs';

const here = dirname(fileURLToPath(import.meta.url));
const wheels = resolve(here, 'build/web-wheels');
const pkg = JSON.parse(readFileSync(resolve(here, 'web/package.json'), 'utf8'));
const PYODIDE_FILES = ['pyodide.mjs', 'pyodide.asm.mjs', 'pyodide.asm.wasm', 'python_stdlib.zip', 'pyodide-lock.json'];

export default defineConfig(() => {
  if (!existsSync(resolve(wheels, 'manifest.json'))) {
    throw new Error('build/web-wheels/manifest.json is missing: run scripts/build-web.sh');
  }
  return {
    root: resolve(here, 'web'),
    publicDir: false,
    define: { __NUMR_WEB_VERSION__: JSON.stringify(pkg.version) },
    plugins: [viteStaticCopy({
      targets: [
        { src: PYODIDE_FILES.map((f) => resolve(here, 'node_modules/pyodide', f)), dest: 'pyodide' },
        { src: resolve(wheels, '*'), dest: 'wheels' },
      ],
    })],
    build: {
      outDir: resolve(here, 'web/lib'),
      emptyOutDir: true,
      target: 'es2022',
      minify: false,
      lib: {
        entry: { 'numr-web': resolve(here, 'web/src/lib/index.js'), 'numr-web-worker': resolve(here, 'web/src/lib/worker.js') },
        formats: ['es'],
        fileName: (format, name) => `${name}.js`,
      },
      rollupOptions: { output: { chunkFileNames: '[name]-[hash].js' } },
    },
  };
});
