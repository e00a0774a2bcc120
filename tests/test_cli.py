"""The command line as a newcomer meets it: --version, clear one-line errors, bench arguments."""
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

import numr_web as nr

ROOT = Path(__file__).resolve().parent.parent


def cli(*args, env=None, cwd=None, timeout=600):
    e = {**os.environ, **(env or {})}
    e["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), e.get("PYTHONPATH")]))
    return subprocess.run([sys.executable, "-m", "numr_web", *args], capture_output=True,
                          text=True, env=e, cwd=cwd, timeout=timeout)


def test_version():
    r = cli("--version")
    assert r.returncode == 0 and r.stdout.strip() == f"numr-web {nr.__version__}"


@pytest.mark.skipif("cuda" in nr.available_devices(), reason="this machine has CUDA")
def test_demo_on_a_missing_device_fails_before_any_progress():
    r = cli("demo", "--device", "cuda", "--plot", "")
    assert r.returncode == 2
    assert r.stdout == ""                                  # no banner, no progress bar first
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and "BackendUnavailableError" in lines[0] and "cuda" in lines[0], r.stderr


def test_demo_refuses_bad_settings_in_one_line():
    r = cli("demo", "--hidden", "0", "--plot", "")
    assert r.returncode == 2 and r.stdout == ""
    assert r.stderr.strip().count("\n") == 0 and "hidden" in r.stderr and "Traceback" not in r.stderr


def test_info_has_no_mesa_runtime_dir_noise():
    env = {k: v for k, v in os.environ.items() if k != "XDG_RUNTIME_DIR"}
    r = subprocess.run([sys.executable, "-m", "numr_web", "info"], capture_output=True, text=True,
                       env={**env, "PYTHONPATH": str(ROOT)})
    assert r.returncode == 0, r.stderr
    assert "XDG_RUNTIME_DIR" not in r.stderr, r.stderr
    assert "cpu" in r.stdout


def test_library_probe_has_no_mesa_runtime_dir_noise():
    """Not only the command line: importing numr_web and using webgpu from a script is quiet too, and
    leaves the environment as it was."""
    env = {k: v for k, v in os.environ.items() if k != "XDG_RUNTIME_DIR"}
    code = ("import os, numr_web as nr; ok = nr.backends.probe('webgpu')[0]; "
            "print(ok and (nr.ones(3, device='webgpu') * 2).tolist() == [2.0] * 3, "
            "os.environ.get('XDG_RUNTIME_DIR'))")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                       env={**env, "PYTHONPATH": str(ROOT)})
    assert r.returncode == 0, r.stderr
    assert "XDG_RUNTIME_DIR" not in r.stderr, r.stderr
    assert r.stdout.split() == ["True", "None"], r.stdout


def test_bench_passes_its_arguments_through(tmp_path):
    pytest.importorskip("scipy")
    r = cli("bench", "--m", "32", "--k", "16", "--n", "8", "--reps", "1", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    assert "32" in r.stdout and "gelu" in r.stdout
    assert not list(tmp_path.iterdir())                   # no plot written without --plot / --write
    r = cli("bench", "--", "--help")
    assert r.returncode == 0 and "--reps" in r.stdout


def test_serve_without_node_says_why_in_one_line(tmp_path):
    """A checkout whose app must be built, on a machine without Node: one line with cause and fix."""
    bindir = tmp_path / "bin"
    bindir.mkdir()
    for tool in ("bash",):
        os.symlink(shutil.which(tool), bindir / tool)
    r = cli("serve", "--rebuild", "--no-browser", env={"PATH": str(bindir)}, timeout=60)
    assert r.returncode == 1
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1, r.stderr
    assert "Node" in lines[0] and "Traceback" not in r.stderr


@pytest.mark.parametrize("port", ["99999", "-1", "http"])
def test_serve_refuses_a_bad_port_in_one_line(port):
    r = cli("serve", "--no-browser", "--port", port, timeout=60)
    assert r.returncode == 2 and "Traceback" not in r.stderr, r.stderr
    assert "not a port: give 0-65535" in r.stderr.strip().splitlines()[-1]


def test_shaders_dump_shows_the_generated_gemm_slice():
    r = cli("shaders", "--dump", "--kernel", "matmul.wgsl")
    assert r.returncode == 0, r.stderr
    assert "// generated section gemm_v4_ksteps of matmul.wgsl" in r.stdout
    assert "let k = k4 + 15u;" in r.stdout


def test_shaders_into_a_closed_pipe_is_quiet():
    """`numr-web shaders --dump | head -1`: no BrokenPipeError traceback when the reader leaves."""
    e = {**os.environ, "PYTHONPATH": str(ROOT)}
    p = subprocess.Popen([sys.executable, "-m", "numr_web", "shaders", "--dump"], env=e,
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, bufsize=0)
    p.stdout.close()                      # the reader is gone before the first line
    err = p.stderr.read().decode()
    assert p.wait(60) == 0, err
    assert "Traceback" not in err and "BrokenPipe" not in err, err


def _parsers():
    """Every argparse parser a user reaches: numr-web and each subcommand, python -m
    numr_web.apps.serve, python -m numr_web.distributed.launch."""
    import argparse
    from numr_web.apps import cli as cli_mod, serve
    from numr_web.distributed import launch
    top = cli_mod.build_parser()
    subs = [a for a in top._actions if isinstance(a, argparse._SubParsersAction)]
    found = {"numr-web": top, **{f"numr-web {k}": v for s in subs for k, v in s.choices.items()},
             "python -m numr_web.distributed.launch": launch.build_parser(),
             "python -m numr_web.apps.serve": serve.add_arguments(argparse.ArgumentParser())}
    return found


def test_every_command_line_option_has_help():
    import argparse
    missing = [f"{name}: {'/'.join(a.option_strings) or a.dest}"
               for name, p in _parsers().items() for a in p._actions
               if not isinstance(a, argparse._SubParsersAction)
               and (not a.help or a.help == argparse.SUPPRESS)]
    assert not missing, missing
    for name, p in _parsers().items():
        p.format_help()                  # every %(default)s in a help text resolves


@pytest.mark.parametrize("value", ["95", "1.01", "-0.1", "x", "101%"])
def test_min_accuracy_that_is_not_an_accuracy_is_refused(value):
    r = cli("demo", "--min-accuracy", value, "--plot", "")
    assert r.returncode == 2 and r.stdout == "", r.stdout
    assert "--min-accuracy" in r.stderr and "(0.95)" in r.stderr and "(95%)" in r.stderr, r.stderr


def test_min_accuracy_as_a_percentage_and_a_miss_says_what_was_reached():
    from numr_web.apps.demo_run import accuracy_arg
    assert accuracy_arg("95%") == pytest.approx(0.95) and accuracy_arg("0.95") == 0.95
    r = cli("demo", "--epochs", "1", "--hidden", "8", "--plot", "", "--min-accuracy", "100%")
    assert r.returncode == 1, r.stderr
    reached = r.stdout.strip().splitlines()[-1].split()[3]        # final test accuracy: XX.XX%
    assert r.stderr.strip().splitlines()[-1] == (
        f"numr-web demo: test accuracy {reached} is below --min-accuracy 100%: exit status 1")
    r = cli("demo", "--epochs", "1", "--hidden", "8", "--plot", "", "--min-accuracy", "5%")
    assert r.returncode == 0 and "below" not in r.stderr, r.stderr


def test_serve_in_a_checkout_without_the_build_package_says_how_to_get_it(tmp_path, monkeypatch):
    import importlib.util
    from numr_web.apps import serve
    monkeypatch.setattr(serve, "_node_problem", lambda: None)
    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec",
                        lambda name, *a: None if name == "build" else real(name, *a))
    with pytest.raises(serve.ServeError) as e:
        serve.build(tmp_path)
    assert "pip install build" in str(e.value) and "'.[demo]'" in str(e.value)


def test_demo_extra_brings_what_serve_needs_in_a_checkout():
    """README: pip install ".[demo]" then numr-web serve in the checkout (Node aside)."""
    import tomllib
    extras = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"]
    for extra in ("demo", "web"):
        assert any(r.split(">")[0].split("=")[0].strip() == "build" for r in extras[extra]), extra


def test_info_says_where_the_browser_app_would_come_from(tmp_path, monkeypatch):
    """A wheel built from a checkout without web/dist has no app, and pip does not show the build
    hook's notice: `numr-web info` says so, as does serve."""
    from numr_web.apps import serve
    monkeypatch.setattr(serve, "PACKAGED_APP", tmp_path / "no-app")
    monkeypatch.setattr(serve, "find_checkout", lambda: None)
    assert serve.describe_app().startswith("not in this installation (its wheel was built from a "
                                           "checkout without web/dist)")
    root = tmp_path / "checkout"
    (root / "web").mkdir(parents=True)
    monkeypatch.setattr(serve, "find_checkout", lambda: root)
    msg = serve.describe_app()
    assert msg.startswith(f"not built: numr-web serve builds {root / 'web' / 'dist'} first") and \
        "`build` package" in msg, msg
    r = cli("info")
    assert r.returncode == 0 and "browser app (numr-web serve): " in r.stdout, r.stdout


@pytest.mark.parametrize("version, ok", [("v20.19.0", True), ("v20.18.3", False), ("v21.7.1", False),
                                         ("v22.11.0", False), ("v22.12.0", True), ("v24.1.0", True)])
def test_serve_checks_node_against_vites_range(tmp_path, monkeypatch, version, ok):
    """serve builds the app only with a Node that Vite 8 accepts (^20.19 or >= 22.12)."""
    from numr_web.apps import serve
    for tool, text in (("node", version), ("npm", "11.0.0")):
        exe = tmp_path / tool
        exe.write_text(f"#!/bin/sh\necho {text}\n")
        exe.chmod(0o755)
    monkeypatch.setenv("PATH", str(tmp_path))
    problem = serve._node_problem()
    assert (problem is None) == ok, problem
    if not ok:
        assert version in problem and "^20.19 or >= 22.12" in problem
