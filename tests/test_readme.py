"""Every code block of README.md runs as printed, in order, as a newcomer would run it.

  * python blocks: in one interpreter, one after the other (each may use what the ones before
    it defined), in a scratch folder;
  * bash blocks: in a copy of this checkout (the files git tracks or would track) with a new
    virtual environment on PATH, one after the other (`pip install ".[demo]"` really installs);
    the results the README prints beside a command (`# ... final test accuracy: 96.94%`) are
    compared with the run's;
  * the js block: in a page of the app in Chromium (e2e/test_readme_js.py);
  * text blocks (the command-line synopsis, the layout) are checked against the parser and the
    tree.
A block preceded by `<!-- readme-test: ... -->` says what it needs: the test command itself is not
run inside its own run, `numr-web serve` is stopped once its page loads, and blocks that need
hardware or system packages (MPI as root, CUDA GPUs) run only where they are present, else skip
saying what is missing.
"""
import os
import re
import shutil
import signal
import subprocess
import sys
import urllib.request
import venv
from pathlib import Path

import pytest

import numr_web as nr

ROOT = Path(__file__).resolve().parent.parent
README = ROOT / "README.md"
BLOCK = re.compile(r"(?:<!-- readme-test: (?P<mark>[^\n]*?) -->\n)?```(?P<lang>[a-z]*)\n(?P<code>.*?)```",
                   re.S)


def _blocks(lang=None):
    text = README.read_text()
    out = []
    for m in BLOCK.finditer(text):
        line = text.count("\n", 0, m.start("code"))
        if lang is None or m.group("lang") == lang:
            out.append((line, m.group("lang"), m.group("mark") or "", m.group("code")))
    return out


def test_every_block_is_run_or_checked():
    kinds = {"python", "bash", "js", "text"}
    for line, lang, mark, _ in _blocks():
        assert lang in kinds, f"README.md:{line}: a ```{lang} block: give it one of {kinds}"
        if lang == "js":
            assert mark.startswith("browser") and (ROOT / "e2e" / "test_readme_js.py").is_file()
        if mark:
            assert mark.split()[0] in ("serves", "needs", "the", "browser"), mark


def test_readme_using_it_example_runs(capsys):
    text = README.read_text()
    block = re.search(r"## Using it\n\n```python\n(.*?)```", text, re.S).group(1)
    exec(compile(block, "README.md (Using it)", "exec"), {})
    assert capsys.readouterr().out.strip() == "(32, 10) MatmulBiasActivationBackward"


def test_python_blocks_run_in_order_in_one_interpreter(tmp_path):
    """Every python block, in order, in one fresh interpreter (as pasted into a new `python`
    session: install_as_torch() must come before any `import torch`, which this process has)."""
    blocks = _blocks("python")
    for _, _, mark, _ in blocks:
        assert not mark, mark
    sep = "@@ end of a README block @@"
    driver = "ns = {'__name__': '__main__'}\n" + "".join(
        f"exec(compile({code!r}, 'README.md:{line}', 'exec'), ns)\nprint({sep!r}, flush=True)\n"
        for line, _, _, code in blocks)
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(
        [str(ROOT)] + [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]))
    run = subprocess.run([sys.executable, "-c", driver], cwd=tmp_path, env=env,
                         capture_output=True, text=True, timeout=900)
    assert run.returncode == 0, run.stderr[-4000:]
    printed = run.stdout.split(sep + "\n")
    assert len(printed) == len(blocks) + 1
    for (line, _, _, code), out in zip(blocks, printed):
        # a comment after a print(...) that starts like a value ("(32,)") is what it prints
        for want in re.findall(r"^print\(.*?\)\s+# ([(\[\d].*)$", code, re.M):
            assert want.split("  ")[0].strip() in out, (line, want, out)
    assert (tmp_path / "model.safetensors").is_file()


def test_readme_lists_every_activation():
    line = re.search(r"Activations: (`[^`]+`)", README.read_text()).group(1).strip("`").split()
    assert line == list(nr.ACT)


# the README's elementwise math that is not a public row: hand-written functions and composites
HAND_WRITTEN = {"round", "square", "frac", "atan2", "fmod", "remainder", "floor_divide", "pow",
                "maximum", "minimum", "clamp", "lerp", "nan_to_num"}


def test_readme_lists_every_elementwise_row():
    """The README's list of elementwise math is the public rows of the elementwise table
    (numr_web/vocab/elementwise.py: their functions are generated) and the hand-written ones,
    no more: a row made public must be listed, and every listed name is a function."""
    from numr_web.vocab.elementwise import rows
    text = re.search(r"Elementwise math besides the activations [^`]*`([^`]+)`", README.read_text())
    listed = re.sub(r"\([^)]*\)", " ", text.group(1)).split()    # round(decimals=), remainder (%)
    assert len(listed) == len(set(listed)), "README's elementwise list repeats a name"
    public = {r.name for r in rows(public=True)}
    assert set(listed) == public | HAND_WRITTEN, (
        f"README lacks {sorted(public - set(listed))}, lists besides the rows "
        f"{sorted(set(listed) - public - HAND_WRITTEN)}")
    x = nr.tensor([0.5, 1.5])
    assert all(callable(getattr(nr, n, None)) and callable(getattr(x, n, None)) for n in listed), \
        "README's elementwise list names a function or method numr_web lacks"


def test_readme_autocast_example_runs(capsys):
    text = README.read_text()
    block = re.search(r"## Mixed precision: `nr.autocast` and `GradScaler`\n\n```python\n(.*?)```",
                      text, re.S).group(1)
    scope = {}
    exec(compile(block, "README.md (Mixed precision)", "exec"), scope)
    want = re.search(r"\n# (numr_web\.float16 .*)\n", block).group(1)
    assert capsys.readouterr().out.strip() == want
    bf16 = re.search(r"so it needs no GradScaler:\n\n```python\n(.*?)```", text, re.S).group(1)
    exec(compile(bf16, "README.md (bfloat16 autocast)", "exec"), scope)      # the same model
    want = re.search(r"\n# (numr_web\.bfloat16 .*)\n", bf16).group(1)
    assert capsys.readouterr().out.strip() == want


def test_command_line_synopsis_matches_the_parser():
    import argparse
    from numr_web.apps import cli
    top = cli.build_parser()
    subs = next(a for a in top._actions if isinstance(a, argparse._SubParsersAction)).choices
    text = next(code for _, lang, _, code in _blocks("text") if code.startswith("numr-web"))
    for cmd_line in re.split(r"\n(?=numr-web)", text):
        words = cmd_line.split()
        parser = subs.get(words[1], top)
        known = {o for a in parser._actions for o in a.option_strings}
        for opt in re.findall(r"(?<![\w-])(--[a-z][a-z-]*)", cmd_line.split("#")[0]):
            assert opt in known, f"README's synopsis: `{words[0]} {words[1]}` has no {opt}"


def test_layout_names_files_that_exist():
    text = next(code for _, lang, _, code in _blocks("text") if code.startswith("numr_web/"))
    for row in text.splitlines():
        if row and not row.startswith(" "):
            for path in row.split("  ")[0].replace(",", " ").split():
                matches = list(ROOT.glob(path.rstrip("/")))
                assert matches, f"README's layout names {path}, which is not in the checkout"


# -- the shell blocks, in a copy of the checkout with a new virtual environment ----------------------
@pytest.fixture(scope="module")
def sandbox(tmp_path_factory):
    """(folder, env): a copy of the files git tracks (or would: untracked, not ignored) and a new
    venv whose bin/ is first on PATH; PYTHONPATH is dropped so the installed package runs."""
    if shutil.which("git") is None:
        pytest.skip("git is needed to list the checkout's files")
    base = tmp_path_factory.mktemp("readme")
    work = base / "numr_web"
    files = subprocess.run(["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
                           cwd=ROOT, capture_output=True, check=True).stdout.decode().split("\0")
    for f in filter(None, files):
        src = ROOT / f
        if src.is_file():
            (work / f).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(src, work / f)
    venv.EnvBuilder(with_pip=True).create(base / "venv")
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONHOME")}
    env.update(PATH=f"{base / 'venv' / 'bin'}{os.pathsep}{env.get('PATH', '')}",
               VIRTUAL_ENV=str(base / "venv"), BROWSER="true", PIP_DISABLE_PIP_VERSION_CHECK="1")
    return work, env


def _results(text):
    """The result lines a run printed or the README promises, in order: ('acc', 99.44) / ('val', 1.665)."""
    out = []
    for kind, value in re.findall(r"(final test accuracy: |val loss )(\d+\.\d+)", text):
        out.append(("acc" if kind.startswith("final") else "val", float(value)))
    return out


def _cuda_gpus():
    if "cuda" not in nr.available_devices():
        return 0
    import cupy
    return cupy.cuda.runtime.getDeviceCount()


def _skip_reason(mark, code):
    if mark.startswith("the test command"):
        return "the test command: it runs this test (scripts/test-all.sh)"
    if mark.startswith("needs mpi"):
        if not (shutil.which("mpirun") and shutil.which("apt-get")):
            return "needs Open MPI's mpirun and apt-get (Debian) on PATH"
        if os.geteuid() != 0:
            return "apt-get install needs root"
    if mark.startswith("needs"):
        n = re.search(r"needs (\d+) cuda", mark)
        if n and _cuda_gpus() < int(n.group(1)):
            return f"needs {n.group(1)} NVIDIA GPUs; this machine has {_cuda_gpus()}"
    if mark.startswith("serves"):
        if not (ROOT / "web" / "dist" / "index.html").is_file():
            return "web/dist is not built here (scripts/build-web.sh; scripts/test-all.sh builds it)"
        import socket
        with socket.socket() as s:
            if s.connect_ex(("127.0.0.1", 8000)) == 0:
                return "port 8000 is in use on this machine"
    return None


def _serve(code, work, env):
    """Run the block until its server prints its address, load the page, stop it (Ctrl+C)."""
    shutil.copytree(ROOT / "web" / "dist", work / "web" / "dist", dirs_exist_ok=True)
    proc = subprocess.Popen(["bash", "-e", "-c", code], cwd=work, env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True, start_new_session=True)
    log = []
    try:
        for line in proc.stdout:
            log.append(line)
            m = re.search(r"numr_web app: (http://127\.0\.0\.1:\d+/)", line)
            if m:
                page = urllib.request.urlopen(m.group(1) + "index.html", timeout=60).read()
                assert b"<html" in page.lower()
                return "".join(log)
        raise AssertionError("numr-web serve stopped before serving:\n" + "".join(log))
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGINT)
            try:
                proc.wait(30)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()


@pytest.mark.slow
@pytest.mark.timeout(3600)          # pip installs and the three demos, on a busy 2-core machine
@pytest.mark.parametrize("line,mark,code", [b[:1] + b[2:] for b in _blocks("bash")],
                         ids=[f"README.md:{b[0]}" for b in _blocks("bash")])
def test_shell_block_runs_as_printed(sandbox, line, mark, code):
    work, env = sandbox
    why = _skip_reason(mark, code)
    if why:
        pytest.skip(why)
    if mark.startswith("serves"):
        out = _serve(code, work, env)
        assert "serving" in out
        return
    if mark.startswith("needs mpi") and os.geteuid() == 0:
        # Open MPI refuses root without these (README: "as root, add --allow-run-as-root")
        env = {**env, "OMPI_ALLOW_RUN_AS_ROOT": "1", "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM": "1"}
    r = subprocess.run(["bash", "-e", "-c", code], cwd=work, env=env, capture_output=True,
                       text=True, stdin=subprocess.DEVNULL, timeout=3000)
    assert r.returncode == 0, f"README.md:{line} exited {r.returncode}:\n{r.stdout[-3000:]}\n{r.stderr[-3000:]}"
    promised = _results("\n".join(c for c in code.splitlines() if c.lstrip().startswith("#")))
    got = _results(r.stdout)
    assert len(got) >= len(promised), (promised, r.stdout[-2000:])
    # seeded runs: the same numbers up to the BLAS's summation order on another CPU
    for (kind, want), (_, have) in zip(promised, got[-len(promised):] if promised else []):
        if kind == "acc":
            assert have >= want - 1.0, f"README.md:{line}: accuracy {have}% vs the README's {want}%"
        else:
            assert have <= want + 0.05, f"README.md:{line}: val loss {have} vs the README's {want}"
    if "bit-identical" in code:
        assert "parameters bit-identical on all 2 ranks: yes" in r.stdout, r.stdout
