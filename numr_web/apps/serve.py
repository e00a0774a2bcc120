"""`numr-web serve [--port 8000] [--no-browser] [--rebuild] [--quiet]`: serve the browser app offline.

Where the app comes from, first match wins:
  1. the app inside the installed package (numr_web/web/, shipped in the wheel): no Node, no checkout;
  2. a source checkout (NUMR_WEB_ROOT, the directory above this package, or the current directory and
     its parents) whose web/dist is built;
  3. that checkout's web/dist built now with scripts/build-web.sh (needs Node ^20.19 or >= 22.12,
     npm and the `build` package, which the [demo] and [web] extras install; the build runs with
     this interpreter, sys.executable).
`--rebuild` forces 3. Every failure is one line on stderr saying the cause and the fix.

The server (Python's http.server on 127.0.0.1) sends the headers the app relies on: COOP/COEP (the
page is cross-origin isolated, so the training worker can share a stop flag with the page through a
SharedArrayBuffer), `immutable` caching for Vite's content-hashed assets/ and revalidation (`no-cache`
+ Last-Modified, answered with 304) for everything else; the app's service worker keeps a copy for
offline use.

Only the standard library is used here (no engine import), so the e2e fixtures load this file by path.
"""
from __future__ import annotations

import argparse
import functools
import http.server
import importlib.util
import os
import shutil
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
# files every build of the app has (checked before serving)
APP_FILES = ("index.html", "gpt.html", "parity.html", "bench.html", "embed.html", "sw.js",
             "lib/numr-web.js", "lib/wheels/manifest.json", "lib/pyodide/pyodide.mjs", "lib/pyodide/pyodide.asm.wasm")
PACKAGE = Path(__file__).resolve().parents[1]        # numr_web/
PACKAGED_APP = PACKAGE / "web"
SOURCES = ("numr_web", "shaders", "web/src", "web/py", "web/public",
           "tests/programs/nanogpt")   # the "Your model" page bundles nanoGPT's model.py


class ServeError(Exception):
    """A failure explained in one line (cause and fix); printed without a traceback."""


def is_built(app: Path) -> bool:
    return all((app / p).is_file() for p in APP_FILES)


def find_checkout() -> Path | None:
    """The source checkout holding package.json + web/ + scripts/build-web.sh, or None."""
    cands = []
    if os.environ.get("NUMR_WEB_ROOT"):
        cands.append(Path(os.environ["NUMR_WEB_ROOT"]))
    cands.append(PACKAGE.parent)
    cwd = Path.cwd().resolve()
    cands += [cwd, *cwd.parents]
    for c in cands:
        if (c / "package.json").is_file() and (c / "scripts" / "build-web.sh").is_file() and (c / "web").is_dir():
            return c
    return None


def dist_dir(root: Path) -> Path:
    return root / "web" / "dist"


def newest_source_mtime(root: Path) -> float:
    newest = 0.0
    for base in SOURCES:
        for p in (root / base).rglob("*"):
            if p.is_file() and "__pycache__" not in p.parts:
                newest = max(newest, p.stat().st_mtime)
    for p in [*(root / "web").glob("*.html"), root / "package-lock.json", root / "vite.config.js",
              root / "vite.lib.config.js", root / "scripts" / "build-web.sh"]:
        if p.is_file():
            newest = max(newest, p.stat().st_mtime)
    return newest


def is_stale(root: Path) -> bool:
    index = dist_dir(root) / "index.html"
    return not index.is_file() or newest_source_mtime(root) > index.stat().st_mtime


NODE_RANGE = "^20.19 or >= 22.12"        # Vite 8's engines range (package-lock.json)


def _node_problem() -> str | None:
    node, npm = shutil.which("node"), shutil.which("npm")
    if not node or not npm:
        return f"Node {NODE_RANGE} with npm is not on PATH"
    try:
        out = subprocess.run([node, "--version"], capture_output=True, text=True, timeout=30).stdout
        major, minor = (int(x) for x in out.strip().lstrip("v").split(".")[:2])
    except (OSError, ValueError, subprocess.SubprocessError):
        return "`node --version` failed"
    if not (major == 20 and minor >= 19 or major == 22 and minor >= 12 or major > 22):
        return f"Node {out.strip()} is outside the range the web build accepts ({NODE_RANGE})"
    return None


def build(root: Path, quiet: bool = False) -> Path:
    """Run scripts/build-web.sh with this interpreter; ServeError (one line) when it cannot."""
    problem = _node_problem()
    if problem:
        raise ServeError(f"building the web app needs Node: {problem}. Install Node {NODE_RANGE} "
                         "(https://nodejs.org) or install a numr-web wheel that ships the app")
    if importlib.util.find_spec("build") is None:
        raise ServeError(f"building the web app needs the `build` package in {sys.executable}: "
                         f"{sys.executable} -m pip install build (pip install '.[demo]' in the "
                         f"checkout brings it)")
    script = root / "scripts" / "build-web.sh"
    print(f"numr-web: building the web app ({script.relative_to(root)}; about a minute) …",
          file=sys.stderr, flush=True)
    env = {**os.environ, "PYTHON": sys.executable}
    try:
        subprocess.run(["bash", str(script)], cwd=root, env=env, check=True,
                       stdout=subprocess.DEVNULL if quiet else sys.stderr)
    except FileNotFoundError:
        raise ServeError("building the web app needs bash, which is not on PATH") from None
    except subprocess.CalledProcessError as e:
        raise ServeError(f"building the web app failed ({script.name} exited with status "
                         f"{e.returncode}; the cause is in its output above): fix that and run "
                         "`numr-web serve --rebuild`") from None
    dist = dist_dir(root)
    if not is_built(dist):
        raise ServeError(f"the build finished but {dist} is incomplete: run `numr-web serve --rebuild`")
    return dist


def find_app(rebuild: bool = False, quiet: bool = False) -> Path:
    """The directory to serve (see the module docstring for the order)."""
    root = find_checkout()
    if rebuild:
        if root is None:
            raise ServeError("--rebuild needs the source checkout (none found here): run it inside "
                             "the repository or set NUMR_WEB_ROOT=/path/to/numr_web")
        return build(root, quiet)
    if is_built(PACKAGED_APP):
        return PACKAGED_APP
    if root is None:
        raise ServeError("this installation of numr-web has no browser app (numr_web/web is missing) "
                         "and no source checkout was found: install a wheel that ships the app, or "
                         "run inside the repository (or set NUMR_WEB_ROOT)")
    dist = dist_dir(root)
    if is_built(dist):
        if is_stale(root):
            print("numr-web: web/dist is older than its sources; `numr-web serve --rebuild` "
                  "updates it", file=sys.stderr)
        return dist
    return build(root, quiet)


def describe_app() -> str:
    """Where `numr-web serve` would take the app from, in one line (builds nothing)."""
    if is_built(PACKAGED_APP):
        return f"shipped in this installation ({PACKAGED_APP})"
    root = find_checkout()
    if root is None:
        return ("not in this installation (its wheel was built from a checkout without web/dist) "
                "and no source checkout here: install a wheel built after scripts/build-web.sh")
    dist = dist_dir(root)
    if is_built(dist):
        return f"{dist}" + (" (older than its sources: numr-web serve --rebuild)"
                            if is_stale(root) else "")
    return (f"not built: numr-web serve builds {dist} first (scripts/build-web.sh: Node + npm "
            f"and the `build` package, which pip install '.[demo]' brings)")


class Handler(http.server.SimpleHTTPRequestHandler):
    extensions_map = {**http.server.SimpleHTTPRequestHandler.extensions_map, **MIME}
    quiet = False

    def end_headers(self):
        path = self.path.split("?", 1)[0]
        immutable = "/assets/" in path
        self.send_header("Cache-Control", "public, max-age=31536000, immutable" if immutable else "no-cache")
        self.send_header("Cross-Origin-Opener-Policy", "same-origin")
        self.send_header("Cross-Origin-Embedder-Policy", "require-corp")
        self.send_header("Cross-Origin-Resource-Policy", "same-origin")
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


def _port(text):
    try:
        port = int(text)
    except ValueError:
        port = -1
    if not 0 <= port <= 65535:
        raise argparse.ArgumentTypeError(f"{text!r} is not a port: give 0-65535 (0 = any free port)")
    return port


def add_arguments(p: argparse.ArgumentParser) -> argparse.ArgumentParser:
    """The `serve` options, defined once (numr-web serve and python -m numr_web.apps.serve)."""
    p.add_argument("--port", type=_port, default=8000, help="port (default 8000; 0 = any free port)")
    p.add_argument("--no-browser", action="store_true", help="do not open a web browser")
    p.add_argument("--rebuild", action="store_true",
                   help="rebuild the wheel and the app from the source checkout first")
    p.add_argument("--quiet", action="store_true", help="no request log")
    return p


def run(a: argparse.Namespace) -> int:
    try:
        app = find_app(a.rebuild, quiet=False)
    except ServeError as e:
        print(f"numr-web serve: {e}", file=sys.stderr)
        return 1
    try:
        srv = make_server(app, a.port, quiet=a.quiet)
    except OSError as e:
        print(f"numr-web serve: cannot listen on 127.0.0.1:{a.port} ({e.strerror or e}): pick another "
              "port with --port N (0 = any free port)", file=sys.stderr)
        return 1
    host, port = srv.server_address[:2]
    url = f"http://{host}:{port}/"
    print(f"numr_web app: {url}  (training: {url}index.html, GPT: {url}gpt.html, "
          f"parity: {url}parity.html, "
          f"benchmark: {url}bench.html, embedding example: {url}embed.html; serving {app}) "
          "— Ctrl+C to stop", flush=True)
    if not a.no_browser:
        threading.Timer(0.5, webbrowser.open, args=(url,)).start()
    try:
        srv.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        srv.server_close()
    return 0


def main(argv=None) -> int:
    p = add_arguments(argparse.ArgumentParser(
        prog="numr-web serve", description="Serve the numr_web browser app on 127.0.0.1 (offline)."))
    return run(p.parse_args(argv))


if __name__ == "__main__":
    sys.exit(main())
