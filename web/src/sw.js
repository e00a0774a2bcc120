// The app's service worker (web/dist/sw.js is this file with the two constants filled in by
// vite.config.js): after the first visit it keeps a copy of every file of the app, Pyodide's runtime
// and the wheels, so reloads read nothing from the network and the app works offline.
// A new build changes VERSION, which installs a fresh copy and drops the old one.
const VERSION = self.__NUMR_VERSION__;
const FILES = self.__NUMR_FILES__;
const CACHE = `numr-web-${VERSION}`;

self.addEventListener('install', (event) => {
  event.waitUntil(caches.open(CACHE).then((c) => c.addAll(FILES)).then(() => self.skipWaiting()));
});

self.addEventListener('activate', (event) => {
  event.waitUntil((async () => {
    for (const key of await caches.keys()) {
      if (key.startsWith('numr-web-') && key !== CACHE) await caches.delete(key);
    }
    await self.clients.claim();
  })());
});

self.addEventListener('fetch', (event) => {
  const req = event.request;
  if (req.method !== 'GET' || new URL(req.url).origin !== self.location.origin) return;
  event.respondWith((async () => {
    const hit = await (await caches.open(CACHE)).match(req, { ignoreSearch: true });
    return hit || fetch(req);
  })());
});
