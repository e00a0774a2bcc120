"""Other people's PyTorch programs, vendored unmodified with their licences (see README.md here),
run by PyTorch and by numr_web from the same initial weights: the losses of every optimizer step
agree to 1e-5 relative on cpu (they agree to ~1e-7), the final weights and what the programs
print agree too. numr_web runs them through numr_web.install_as_torch() (their own `import
torch` lines), and nanoGPT also with its import lines rewritten to `import numr_web.torch as
torch` (the only change). word_language_model also runs on webgpu (its --accel flag picks
torch.accelerator, pointed at the device under test). Each also trains on webgpu (lavapipe in CI)
and on cuda (where there is a GPU), against PyTorch's cpu run.

Each run is a fresh process (tests/programs/run_program.py): PyTorch and the alias cannot share
one. Weights compare to an absolute 5e-5 (1e-4 on accelerators), all but one element in a
thousand, which may differ by up to ten times that: attention's key bias has a gradient that is
zero but for rounding, and a weight's can be as small at a step, which Adam's normalised step
turns into updates of either sign (in torch too, between two machines)."""
import json
import os
import re
import subprocess
import sys

import numpy as np
import pytest

import numr_web as nr

pytest.importorskip("torch")

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
_REFERENCE = {}


def _run(program, framework, workdir, device="cpu"):
    env = dict(os.environ, PYTHONPATH=ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""))
    env.pop("NUMR_DEVICE", None)
    r = subprocess.run([sys.executable, os.path.join(HERE, "run_program.py"), program, framework,
                        str(workdir), device], capture_output=True, text=True, env=env,
                       timeout=900)
    assert r.returncode == 0, f"{program} with {framework} failed:\n{r.stderr[-4000:]}"
    with open(os.path.join(workdir, f"{framework}.json")) as f:
        result = json.load(f)
    result["weights"] = dict(np.load(os.path.join(workdir, f"{framework}.npz")))
    return result


@pytest.fixture(scope="module")
def reference(tmp_path_factory):
    """PyTorch's run of each program (once per test module), with its initial weights file."""
    def get(program):
        if program not in _REFERENCE:
            workdir = tmp_path_factory.mktemp(program)
            _REFERENCE[program] = (workdir, _run(program, "torch", workdir))
        return _REFERENCE[program]
    return get


def _compare(ours, ref, loss_rtol=1e-5, weight_atol=5e-5, outliers=1e-3):
    """`outliers`: the fraction of a tensor's elements allowed past `weight_atol` (but within ten
    times it): Adam's normalised step turns rounding noise in a near-zero gradient into a step
    of either sign, and another summation order (a device's, another BLAS's: torch's MKL
    against numpy's OpenBLAS) makes that noise."""
    assert len(ref["losses"]) >= 5, "the program must take at least 5 optimizer steps"
    np.testing.assert_allclose(ours["losses"], ref["losses"], rtol=loss_rtol)
    assert set(ours["weights"]) == set(ref["weights"])
    for k, v in ref["weights"].items():
        got = ours["weights"][k]
        np.testing.assert_allclose(got, v, rtol=1e-4, atol=10 * weight_atol, err_msg=k)
        off = np.abs(got - v) > weight_atol + 1e-4 * np.abs(v)
        assert off.sum() <= int(outliers * v.size), \
            f"{k}: {off.sum()} of {v.size} elements differ by more than {weight_atol}"


_CUDA, _WHY = nr.backends.probe("cuda")
# the accelerators: float32 sums in other orders (GEMM tiles, reductions; lavapipe's order follows
# the host's vector width), so the losses agree to ~1e-6 and the weights after Adam's normalised
# steps to ~1e-5 rather than cpu's ~1e-7, but for one element in a thousand at most
ACCELERATORS = [pytest.param("webgpu", id="webgpu"),
                pytest.param("cuda", id="cuda",
                             marks=pytest.mark.skipif(not _CUDA, reason=f"cuda: {_WHY}"))]


def _lines(stdout, pattern):
    return [m.group(0) for m in re.finditer(pattern, stdout)]


@pytest.mark.parametrize("framework", ["numr", "numr_imports"])
def test_nanogpt_trains_like_torch(reference, framework):
    workdir, ref = reference("nanogpt")
    ours = _run("nanogpt", framework, workdir)
    _compare(ours, ref)
    assert ours["generated_shape"] == ref["generated_shape"] == [1, 9]
    assert ours["generated_in_vocab"]
    assert _lines(ours["stdout"], r"num (non-)?decayed .*") == \
        _lines(ref["stdout"], r"num (non-)?decayed .*")


def test_nanogpt_imports_rewrite_changes_only_import_lines():
    sys.path.insert(0, HERE)
    try:
        spec_src = open(os.path.join(HERE, "run_program.py")).read()
        ns = {}
        start = spec_src.index("def rewrite_imports")
        exec(spec_src[start:spec_src.index("\n\n\n", start)], ns)
    finally:
        sys.path.remove(HERE)
    with open(os.path.join(HERE, "nanogpt", "model.py")) as f:
        before = f.read().splitlines()
    after = ns["rewrite_imports"]("\n".join(before)).splitlines()
    changed = [(a, b) for a, b in zip(before, after) if a != b]
    assert len(before) == len(after) and len(changed) == 3
    assert all(a.lstrip().startswith(("import torch", "from torch")) for a, _ in changed)


def test_mnist_main_trains_like_torch(reference):
    workdir, ref = reference("mnist")
    ours = _run("mnist", "numr", workdir)
    _compare(ours, ref)
    assert len(_lines(ours["stdout"], r"Train Epoch: .*")) == len(ref["losses"])
    pattern = r"Test set: .*"                     # the per-step losses are compared above
    assert _lines(ours["stdout"], pattern) == _lines(ref["stdout"], pattern)


def test_word_language_model_trains_like_torch(reference):
    workdir, ref = reference("word_language_model")
    ours = _run("word_language_model", "numr", workdir)
    _compare(ours, ref)
    pattern = r"valid loss +[\d.]+|test loss +[\d.]+"
    assert _lines(ours["stdout"], pattern) == _lines(ref["stdout"], pattern)
    assert len(_lines(ours["stdout"], pattern)) == 3       # two epochs, then the reloaded model


@pytest.mark.parametrize("program", ["nanogpt", "mnist", "word_language_model"])
@pytest.mark.parametrize("device", ACCELERATORS)
def test_programs_train_like_torch_on_accelerators(reference, program, device):
    workdir, ref = reference(program)
    ours = _run(program, "numr", workdir, device=device)
    assert ours["device"] == device and ref["device"] == "cpu"
    _compare(ours, ref, loss_rtol=1e-5, weight_atol=1e-4)
    if program == "word_language_model":
        assert f"Using device: {device}" in ours["stdout"]
