"""`numr-web serve [--port 8000] [--no-browser] [--rebuild]`: serve the browser app (web/dist) offline.

Builds the numr_web wheel and the Vite app first when they are missing (scripts/build-web.sh, which needs
Node/npm and the repository checkout), then serves web/dist on 127.0.0.1 with Python's http.server
(correct MIME types for .wasm/.mjs/.whl, no caching so a rebuilt wheel is picked up), prints the URL and
opens a browser unless --no-browser.

Only the standard library is used here (no numpy, no engine import), so this module also works for the
e2e test fixtures.
"""
from __future__ import annotations

import argparse
import functools
import http.server
import os
import subprocess
import sys
import threading
import webbrowser
from pathlib import Path

MIME = {
    ".wasm": "application/wasm",
    ".mjs": "text/javascript",
    ".js": "text/javascript",
    ".json": "application/json",
    ".whl": "application/zip",
    ".zip": "application/zip",
    ".css": "text/css",
    ".html": "text/html",
    ".svg": "image/svg+xml",
    ".map": "application/json",
    ".py": "text/plain",
}


def repo_root() -> Path:
    """The checkout holding package.json + web/ (env NUMR_WEB_ROOT, else above this file, else cwd)."""
    cands = []
    if os.environ.get("NUMR_WEB_ROOT"):
        cands.append(Path(os.environ["NUMR_WEB_ROOT"]))
    cands += [Path(__file__).resolve().parent.parent, Path.cwd()]
    for c in cands:
        if (c / "package.json").is_file() and (c / "web").is_dir():
            return c
    raise SystemExit(
        "numr-web serve: cannot find the numr_web checkout (package.json + web/). Run it from the "
        "repository root or set NUMR_WEB_ROOT=/path/to/numr_web.")


def dist_dir(root: Path | None = None) -> Path:
    return (root or repo_root()) / "web" / "dist"


def is_built(dist: Path) -> bool:
    return all((dist / p).is_file() for p in
               ("index.html", "parity.html", "bench.html", "wheels/manifest.json",
                "pyodide/pyodide.mjs", "pyodide/pyodide.asm.wasm"))


def build(root: Path | None = None, quiet: bool = False) -> Path:
    """Run scripts/build-web.sh (npm ci, wheel, micropip/packaging wheels, golden JSON, vite build)."""
    root = root or repo_root()
    script = root / "scripts" / "build-web.sh"
    kw = {"stdout": subprocess.DEVNULL} if quiet else {}
    print(f"numr-web: building the web app ({script.relative_to(root)}) …", file=sys.stderr, flush=True)
    subprocess.run(["bash", str(script)], cwd=root, check=True, **kw)
    dist = dist_dir(root)
    if not is_built(dist):
        raise SystemExit(f"numr-web serve: the build did not produce {dist}")
    return dist


class Handler(http.server.SimpleHTTPRequestHandler):
    extensions_map = {**http.server.SimpleHTTPRequestHandler.extensions_map, **MIME}
    quiet = False

    def end_headers(self):
        self.send_header("Cache-Control", "no-cache")
        super().end_headers()

    def log_message(self, fmt, *args):
        if not self.quiet:
            super().log_message(fmt, *args)


class Server(http.server.ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True


def make_server(directory, port: int = 8000, host: str = "127.0.0.1", quiet: bool = False) -> Server:
    """An HTTP server for `directory` (port 0: any free port; see .server_address)."""
    handler = type("NumrHandler", (Handler,), {"quiet": quiet})
    return Server((host, port), functools.partial(handler, directory=str(directory)))


def start_background(directory, port: int = 0, quiet: bool = True):
    """Start a server thread; returns (server, base_url). Stop with server.shutdown()."""
    srv = make_server(directory, port, quiet=quiet)
    threading.Thread(target=srv.serve_forever, name="numr-web-serve", daemon=True).start()
    host, port = srv.server_address[:2]
    return srv, f"http://{host}:{port}/"


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="numr-web serve",
                                description="Serve the numr_web browser app on 127.0.0.1 (offline).")
    p.add_argument("--port", type=int, default=8000, help="port (default 8000; 0 = any free port)")
    p.add_argument("--no-browser", action="store_true", help="do not open a web browser")
    p.add_argument("--rebuild", action="store_true", help="rebuild the wheel and the app first")
    p.add_argument("--quiet", action="store_true", help="no request log")
    if isinstance(argv, argparse.Namespace):      # called from numr_web.cli with parsed args
        a = argparse.Namespace(port=8000, no_browser=False, rebuild=False, quiet=False)
        a.__dict__.update({k: v for k, v in vars(argv).items() if k in vars(a)})
    else:
        a = p.parse_args(argv)

    root = repo_root()
    dist = dist_dir(root)
    if a.rebuild or not is_built(dist):
        dist = build(root)
    try:
        srv = make_server(dist, a.port, quiet=a.quiet)
    except OSError as e:
        print(f"numr-web serve: cannot listen on 127.0.0.1:{a.port}: {e} (try --port 0)", file=sys.stderr)
        return 1
    host, port = srv.server_address[:2]
    url = f"http://{host}:{port}/"
    print(f"numr_web app: {url}  (training: {url}index.html, parity: {url}parity.html, "
          f"benchmark: {url}bench.html) — Ctrl+C to stop", flush=True)
    if not a.no_browser:
        threading.Timer(0.5, webbrowser.open, args=(url,)).start()
    try:
        srv.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        srv.server_close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
