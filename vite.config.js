// Vite 8 config for the numr_web browser app (web/ -> web/dist).
//
// The pages load numr_web through the published library (web/lib, built first by vite.lib.config.js:
// lib/numr-web.js, its worker, Pyodide's runtime in lib/pyodide/ and the wheels in lib/wheels/),
// which is copied to dist/lib/ as it is. web/public/ (golden values, embed.html) is copied too.
// After the build, dist/sw.js is written: the service worker that keeps the app for offline use,
// listing every file of dist/ and versioned by their content.
import { defineConfig } from 'vite';
import { viteStaticCopy } from 'vite-plugin-static-copy';
import { resolve, dirname, join, relative, sep } from 'node:path';
import { fileURLToPath } from 'node:url';
import { createHash } from 'node:crypto';
import { existsSync, readdirSync, readFileSync, statSync, writeFileSync } from 'node:fs';

const here = dirname(fileURLToPath(import.meta.url));
const lib = resolve(here, 'web/lib');
// COOP/COEP: the pages are cross-origin isolated, so the worker can share a SharedArrayBuffer stop
// flag with the page (numr-web serve sends the same headers)
const ISOLATION = { 'Cross-Origin-Opener-Policy': 'same-origin', 'Cross-Origin-Embedder-Policy': 'require-corp' };

function files(dir) {
  return readdirSync(dir).flatMap((name) => {
    const p = join(dir, name);
    return statSync(p).isDirectory() ? files(p) : [p];
  });
}

function serviceWorker() {
  let outDir;
  return {
    name: 'numr-service-worker',
    apply: 'build',
    configResolved(config) { outDir = config.build.outDir; },
    closeBundle() {
      const hash = createHash('sha256');
      const list = ['./'];
      for (const f of files(outDir).sort()) {
        const rel = relative(outDir, f).split(sep).join('/');
        if (rel === 'sw.js' || rel.endsWith('.map')) continue;
        list.push('./' + rel);
        hash.update(rel).update(readFileSync(f));
      }
      const body = readFileSync(resolve(here, 'web/src/sw.js'), 'utf8')
        .replace('self.__NUMR_VERSION__', JSON.stringify(hash.digest('hex').slice(0, 16)))
        .replace('self.__NUMR_FILES__', JSON.stringify(list));
      writeFileSync(join(outDir, 'sw.js'), body);
    },
  };
}

export default defineConfig(({ command }) => {
  if (command === 'build' && !existsSync(join(lib, 'numr-web.js'))) {
    throw new Error('web/lib is not built: run scripts/build-web.sh (or vite build -c vite.lib.config.js first)');
  }
  return {
    root: resolve(here, 'web'),
    base: './',
    publicDir: resolve(here, 'web/public'),
    plugins: [
      viteStaticCopy({ structured: true, targets: [{ src: 'lib/**/*', dest: '.' }] }),
      serviceWorker(),
    ],
    // fs.allow: the model page ships nanoGPT's model.py from tests/programs/ (outside web/)
    server: { host: '127.0.0.1', port: 5173, strictPort: false, headers: ISOLATION, fs: { allow: [here] } },
    preview: { headers: ISOLATION },
    build: {
      outDir: resolve(here, 'web/dist'),
      emptyOutDir: true,
      target: 'es2022',
      chunkSizeWarningLimit: 4096,
      rollupOptions: {
        input: {
          index: resolve(here, 'web/index.html'),
          gpt: resolve(here, 'web/gpt.html'),
          model: resolve(here, 'web/model.html'),
          parity: resolve(here, 'web/parity.html'),
          bench: resolve(here, 'web/bench.html'),
        },
      },
    },
  };
});
