"""End-to-end: the numr-web npm package as a user installs it. `npm pack` of web/ is installed into a
copy of e2e/vite_fixture/ (a fresh Vite project whose vite.config.js has the one line README gives),
then the fixture's page trains one step of a Linear layer

  - built by `vite build` and served by `vite preview`,
  - served by `vite dev`,
  - from a plain static server through an import map (plain.html),

on the page and in a Web Worker, with and without JSPI. The step's losses and updated weights are
checked against float64 numpy. One npm install serves every test (npm's cache makes it quick; only
the npm registry is used). Load failures name the URL tried and the option that changes it.
"""
from __future__ import annotations

import os
import shutil
import socket
import subprocess
import time
import urllib.request
from pathlib import Path

import numpy as np
import pytest

from e2e_support import ROOT, App, load_serve

FIXTURE = Path(__file__).resolve().parent / "vite_fixture"
LR = 0.5
X = [[0.5, -1.0, 2.0], [1.5, 0.25, -0.5]]
LABELS = [1, 0]
W0 = [[0.1, -0.2, 0.3], [0.0, 0.4, -0.1]]
B0 = [0.05, -0.05]
F32_TOL = 4 * 2.0 ** -23


def reference_steps(n=2):
    """The fixture's two SGD steps of cross_entropy(x @ W.T + b, labels) in float64."""
    x, w, b = np.array(X), np.array(W0), np.array(B0)
    onehot = np.eye(2)[LABELS]
    losses = []
    for _ in range(n):
        z = x @ w.T + b
        p = np.exp(z - z.max(1, keepdims=True))
        p /= p.sum(1, keepdims=True)
        losses.append(float(-np.log((p * onehot).sum(1)).mean()))
        dz = (p - onehot) / len(x)
        w, b = w - LR * dz.T @ x, b - LR * dz.sum(0)
    return losses, w.tolist(), b.tolist()


def _run(cmd, cwd, timeout=600):
    res = subprocess.run(cmd, cwd=cwd, capture_output=True, text=True, timeout=timeout)
    assert res.returncode == 0, f"{' '.join(cmd)} failed ({res.returncode}):\n{res.stdout[-3000:]}\n{res.stderr[-3000:]}"
    return res.stdout


@pytest.fixture(scope="session")
def vite_project(web_dist, tmp_path_factory):
    """The fixture project with the packed numr-web installed (npm pack of web/ + npm install)."""
    if shutil.which("npm") is None:
        pytest.fail("npm is needed for the package tests (scripts/build-web.sh needs it too)")
    base = tmp_path_factory.mktemp("vite-package")
    out = _run(["npm", "pack", "--pack-destination", str(base)], ROOT / "web")
    tarball = base / out.strip().splitlines()[-1]
    assert tarball.is_file(), out
    project = base / "app"
    shutil.copytree(FIXTURE, project, ignore=shutil.ignore_patterns("node_modules", "dist"))
    _run(["npm", "install", "--no-audit", "--no-fund", "--prefer-offline", str(tarball)], project)
    return project


def _free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _serve(cmd, cwd, url, timeout=60):
    """Start a Vite server (its own process group) and wait until `url` answers."""
    proc = subprocess.Popen(cmd, cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                            start_new_session=True)
    t0 = time.monotonic()
    while time.monotonic() - t0 < timeout:
        if proc.poll() is not None:
            raise AssertionError(f"{' '.join(cmd)} exited ({proc.returncode}):\n{proc.stdout.read()}")
        try:
            with urllib.request.urlopen(url, timeout=2):
                return proc
        except OSError:
            time.sleep(0.3)
    _stop(proc)
    raise AssertionError(f"{' '.join(cmd)} did not answer on {url} within {timeout} s")


def _stop(proc):
    if proc.poll() is None:
        os.killpg(proc.pid, 15)
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, 9)


@pytest.fixture(scope="session")
def vite_built(vite_project):
    """`vite build` of the fixture -> its dist/ (numr-web's runtime emitted into dist/numr-web/)."""
    _run(["npx", "--no-install", "vite", "build"], vite_project)
    return vite_project / "dist"


@pytest.fixture(scope="session")
def servers(vite_project, vite_built):
    """name -> URL of the fixture served three ways: build (vite preview), dev (vite), plain."""
    urls, procs = {}, []
    for name, args in (("build", ["preview"]), ("dev", [])):
        port = _free_port()
        url = f"http://127.0.0.1:{port}/"
        procs.append(_serve(["npx", "--no-install", "vite", *args, "--host", "127.0.0.1", "--port",
                             str(port), "--strictPort"], vite_project, url))
        urls[name] = url
    srv, urls["plain"] = load_serve().start_background(vite_project, port=0, quiet=True)
    yield urls
    srv.shutdown()
    srv.server_close()
    for p in procs:
        _stop(p)


def _open(browser, url, name, jspi=True):
    context = browser.new_context(service_workers="block")
    app = App(context.new_page(), url, name, jspi=jspi)
    return app, context


def _result(app, path):
    app.goto(path, wait_ready=False)
    app.page.wait_for_function("() => window.fixture && window.fixture.state !== 'loading'",
                               timeout=180_000, polling=250)
    return app.page.evaluate("() => window.fixture")


def test_vite_build_output(vite_built):
    """The build holds the runtime under numr-web/ and no trace of Pyodide's Node-only imports in the
    app's own bundle; the bundle points at ../numr-web/ (relative to its chunk)."""
    for f in ("pyodide/pyodide.mjs", "pyodide/pyodide.asm.wasm", "wheels/manifest.json",
              "numr-web-worker.js"):
        assert (vite_built / "numr-web" / f).is_file(), f
    bundle = "".join(p.read_text() for p in (vite_built / "assets").glob("*.js"))
    assert "__NUMR_WEB_RUNTIME" not in bundle
    assert "../numr-web/" in bundle
    assert '"ws"' not in bundle and "'ws'" not in bundle and "node:" not in bundle


CASES = [  # (server, thread, JSPI): every server in page and worker mode; JSPI off in half of them
    ("build", "page", True), ("build", "worker", False),
    ("dev", "page", False), ("dev", "worker", True),
    ("plain", "worker", False),
]


@pytest.mark.parametrize("server,thread,jspi", CASES,
                         ids=[f"{s}-{t}-{'jspi' if j else 'nojspi'}" for s, t, j in CASES])
def test_package_trains_a_step(browser, servers, request, server, thread, jspi):
    """The fixture page (README's recipe) boots numr_web from the package and trains a step; the
    losses and the updated weights are float64's to float32 rounding."""
    app, context = _open(browser, servers[server], request.node.name, jspi=jspi)
    try:
        page = "plain.html" if server == "plain" else "index.html"
        res = _result(app, f"{page}?worker={int(thread == 'worker')}")
        assert res["state"] == "done", res
        assert res["mode"] == ("worker" if thread == "worker" else "main")
        assert res["device"] == "webgpu" and res["info"]["device"] == "webgpu"
        assert res["info"]["jspi"] is jspi
        losses, w, b = reference_steps()
        print(f"\n{server}/{thread}: losses {res['losses']} (float64 {losses})")
        # float32 arithmetic on values of order 1: a few ulp (2^-23 each)
        assert res["losses"] == pytest.approx(losses, rel=F32_TOL, abs=F32_TOL)
        assert np.allclose(res["weight"], w, rtol=F32_TOL, atol=F32_TOL), (res["weight"], w)
        assert np.allclose(res["bias"], b, rtol=F32_TOL, atol=F32_TOL), (res["bias"], b)
        app.assert_clean()
    finally:
        app.save_log()
        context.close()


@pytest.mark.parametrize("thread", ["page", "worker"])
def test_load_failure_names_url_and_option(browser, servers, request, thread):
    """A wrong baseURL: the error names the URL it tried and the option that changes it."""
    app, context = _open(browser, servers["build"], request.node.name)
    try:
        res = _result(app, f"index.html?worker={int(thread == 'worker')}&base=/nowhere/")
        assert res["state"] == "error", res
        assert res["name"] == "NumrLoadError", res
        want = "/nowhere/numr-web-worker.js" if thread == "worker" else "/nowhere/wheels/manifest.json"
        assert res["url"] == servers["build"] + want.lstrip("/"), res
        assert res["url"] in res["message"] and "baseURL" in res["message"], res["message"]
        assert "numr-web/vite" in res["message"], res["message"]
    finally:
        app.save_log()
        context.close()
