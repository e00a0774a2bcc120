import subprocess
import sys

import numr_web as nr
from numr_web.data import digits_split, load_digits


def test_digits_data():
    pixels, labels = load_digits()
    assert len(labels) == 1797 and len(pixels) == 1797 * 64
    assert max(pixels) == 16 and sorted(set(labels)) == list(range(10))
    xtr, ytr, xte, yte = digits_split()
    assert xtr.shape == (1438, 64) and xte.shape == (359, 64) and ytr.dtype == nr.int32


def test_demo_trains_to_95_percent(device, tmp_path):
    from numr_web.apps.demo import train_digits
    epochs = 20 if device != "webgpu" else 8
    model, history, acc = train_digits(device=device, epochs=epochs)
    assert history[-1] < history[0] / 5
    assert acc >= 0.95, acc


def test_cli_demo_and_info(tmp_path):
    out = subprocess.run([sys.executable, "-m", "numr_web", "demo", "--epochs", "15",
                          "--plot", str(tmp_path / "loss.png"), "--min-accuracy", "0.95"],
                         capture_output=True, text=True, check=True)
    assert "final test accuracy" in out.stdout
    assert (tmp_path / "loss.png").stat().st_size > 1000
    out = subprocess.run([sys.executable, "-m", "numr_web", "info"], capture_output=True,
                         text=True, check=True)
    assert "cpu" in out.stdout and "available" in out.stdout


# -- the CNN and GPT demos ------------------------------------------------------------------------
import json  # noqa: E402
import os  # noqa: E402
import re  # noqa: E402
from pathlib import Path  # noqa: E402

import numpy as np  # noqa: E402
import pytest  # noqa: E402


ROOT = str(Path(__file__).resolve().parent.parent)


def _cli(*args, cwd=None):
    env = dict(os.environ, PYTHONPATH=ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""))
    return subprocess.run([sys.executable, "-m", "numr_web", "demo", *args],
                          capture_output=True, text=True, cwd=cwd, timeout=600, env=env)


def test_shifted_digits_matches_numpy_shifts():
    from numr_web.apps.demo import shifted_digits
    x = np.random.default_rng(0).random((5, 64), dtype=np.float32)
    out = shifted_digits(nr.tensor(x)).numpy().reshape(5, 5, 8, 8)
    img = x.reshape(5, 8, 8)
    right, left, down, up = (np.zeros_like(img) for _ in range(4))
    right[:, :, 1:], left[:, :, :7] = img[:, :, :7], img[:, :, 1:]
    down[:, 1:, :], up[:, :7, :] = img[:, :7, :], img[:, 1:, :]
    for k, ref in enumerate((img, right, left, down, up)):
        np.testing.assert_array_equal(out[k], ref)


def test_shifted_batches_visit_every_example_once_per_epoch():
    from numr_web.apps.demo import shifted_batches
    n, k = 10, 3
    x = nr.tensor(np.arange(n * k, dtype=np.float32).reshape(n * k, 1))
    y = nr.tensor(np.tile(np.arange(n, dtype=np.int32), k))
    batches = shifted_batches(x, y, n, batch_size=4, seed=1)
    assert len(batches) == 3
    for epoch in range(2):
        got = list(batches(epoch))
        rows = np.concatenate([xb.numpy()[:, 0] for xb, _ in got]).astype(int)
        labels = np.concatenate([yb.numpy() for _, yb in got])
        assert sorted(rows % n) == list(range(n))          # each example once, any version
        assert (rows < n * k).all() and (labels == rows % n).all()


def test_cli_cnn_demo_smoke_and_checkpoint(tmp_path):
    from safetensors.numpy import load_file
    from numr_web.data import digits_split
    from numr_web.models import DigitsCNN
    ckpt = tmp_path / "cnn.safetensors"
    out = _cli("--model", "cnn", "--epochs", "1", "--seed", "3", "--checkpoint", str(ckpt),
               "--plot", str(tmp_path / "cnn.png"))
    assert out.returncode == 0, out.stderr
    last = out.stdout.strip().splitlines()[-1]
    m = re.fullmatch(r"final test accuracy: (\d+\.\d\d)%  \(\d+\.\d s\)", last)
    assert m, last
    assert (tmp_path / "cnn.png").stat().st_size > 1000
    # the safetensors library reads the checkpoint; loaded into a fresh model it gives the accuracy
    # the demo printed
    arrays = load_file(str(ckpt))
    model = DigitsCNN(seed=None)
    assert set(arrays) == set(model.state_dict())
    model.load_state_dict({k: nr.tensor(v) for k, v in arrays.items()})
    model.eval()
    _, _, x_test, y_test = digits_split(seed=3)
    with nr.no_grad():
        acc = (model(x_test).argmax(axis=1).numpy() == y_test.numpy()).mean()
    assert f"{acc * 100:.2f}" == m.group(1)
    # the exit-status gate
    out = _cli("--model", "cnn", "--epochs", "1", "--plot", "", "--min-accuracy", "100%")
    assert out.returncode == 1 and "is below --min-accuracy 100%" in out.stderr, out.stderr


GPT_TINY = ("--model", "gpt", "--steps", "6", "--n-layer", "1", "--n-head", "2", "--n-embd", "16",
            "--block-size", "16", "--batch-size", "4", "--eval-interval", "3", "--sample-chars",
            "12")


def test_cli_gpt_demo_smoke_and_checkpoint(tmp_path):
    from safetensors import safe_open
    from numr_web.apps.demo_gpt import val_loss
    from numr_web.data.text import char_corpus
    from numr_web.models import GPT, GPTConfig
    ckpt = tmp_path / "gpt.safetensors"
    out = _cli(*GPT_TINY, "--checkpoint", str(ckpt), "--plot", str(tmp_path / "gpt.png"),
               "--prompt", "class ")
    assert out.returncode == 0, out.stderr
    lines = out.stdout.strip().splitlines()
    m = re.fullmatch(r"val loss (\d\.\d{3})", lines[-1])
    assert m, lines[-3:]
    start = lines.index("--- sample (prompt 'class ', temperature 0.8) ---")
    assert lines[start + 1].startswith("class ") and lines[-2] == "---"
    assert (tmp_path / "gpt.png").stat().st_size > 1000
    # read by the safetensors library: the weights and the config to rebuild the model from
    with safe_open(str(ckpt), framework="numpy") as f:
        meta = f.metadata()
        arrays = {k: f.get_tensor(k) for k in f.keys()}
    cfg = GPTConfig(**json.loads(meta["config"]))
    assert (cfg.n_layer, cfg.n_head, cfg.n_embd, cfg.block_size) == (1, 2, 16, 16)
    assert arrays["tok_emb.weight"].shape == (96, 16)
    np.testing.assert_array_equal(arrays["head.weight"], arrays["tok_emb.weight"])   # tied
    model = GPT(cfg, seed=None)
    model.load_state_dict({k: nr.tensor(v) for k, v in arrays.items()})
    model.eval()
    # the validation loss of the loaded weights, on the demo's windows, is the printed one
    evaluate = val_loss(char_corpus(), batch_size=4, block_size=16, n_batches=8, seed=0)
    with nr.no_grad():
        v = evaluate(model)["val_loss"].item()
    assert f"{v:.3f}" == m.group(1) and v == pytest.approx(float(meta["val_loss"]), abs=1e-4)


def test_cli_gpt_gates_and_bad_arguments(tmp_path):
    out = _cli(*GPT_TINY, "--sample-chars", "0", "--plot", "", "--checkpoint", "",
               "--max-val-loss", "0.5", cwd=tmp_path)
    assert out.returncode == 1, out.stderr
    last = out.stdout.strip().splitlines()[-1]
    assert last.startswith("val loss ")
    assert out.stderr.strip().splitlines()[-1] == (
        f"numr-web demo: validation loss {last.split()[-1]} is above --max-val-loss 0.5: exit "
        f"status 1")
    assert list(tmp_path.iterdir()) == []                 # '' turned the files off
    for bad, words in ((("--steps", "0"), "steps must be"),
                       (("--n-embd", "30", "--n-head", "4"), "multiple of n_head"),
                       (("--distributed",), "--distributed trains the MLP")):
        out = _cli("--model", "gpt", *bad, cwd=tmp_path)
        assert out.returncode == 2 and words in out.stderr, out.stderr
        assert out.stdout == ""


def test_gpt_demo_is_reproducible_and_samples_from_the_prompt():
    from numr_web.apps.demo_gpt import prepare_gpt, sample_text
    from numr_web.apps.training import fit
    runs = []
    for _ in range(2):
        kwargs, info = prepare_gpt(steps=4, batch_size=2, block_size=8, n_layer=1, n_head=1,
                                   n_embd=8, eval_interval=2, eval_batches=1, seed=5)
        res = fit(**kwargs)
        runs.append((res.history, res.metrics["val_loss"],
                     sample_text(info["model"], info["vocab"], "import", 10, seed=2)))
    assert runs[0] == runs[1]
    assert len(runs[0][0]) == 2 and runs[0][2].startswith("import") and len(runs[0][2]) == 16


def test_cpu_threads_share_the_cores_and_keep_the_users_choice():
    from numr_web.apps.demo_run import cpu_threads
    cores = len(os.sched_getaffinity(0))
    env = {"OMP_NUM_THREADS": "7"}
    cpu_threads(2, env)
    assert env == {"OMP_NUM_THREADS": "7", "OPENBLAS_NUM_THREADS": str(max(1, cores // 2)),
                   "MKL_NUM_THREADS": str(max(1, cores // 2)),
                   "NUMR_CPU_THREADS": str(max(1, cores // 2))}
    env = {}
    cpu_threads(1, env, max_threads=1)
    assert set(env.values()) == {"1"} and "NUMR_CPU_THREADS" not in env


def test_cnn_and_gpt_demos_learn_on_every_device(device):
    """The same preparers on each device: a CNN epoch beats chance by far, a few GPT steps bring
    the validation loss below that of uniform guessing, ln(96). (Initial weights come from each
    device's generator, so the figures differ across devices.)"""
    import math
    from numr_web.apps.demo import prepare_cnn
    from numr_web.apps.demo_gpt import prepare_gpt, sample_text
    from numr_web.apps.training import fit
    kwargs, _ = prepare_cnn(device=device, epochs=1)
    assert fit(**kwargs).metrics["accuracy"] > 0.5
    kwargs, info = prepare_gpt(device=device, steps=4, batch_size=4, block_size=16, n_layer=1,
                               n_head=2, n_embd=16, eval_interval=2, eval_batches=2)
    res = fit(**kwargs)
    assert res.metrics["val_loss"] < math.log(96) - 0.05, res.metrics
    assert len(sample_text(info["model"], info["vocab"], "x", 5)) == 6


@pytest.mark.slow
def test_cnn_recipe_reaches_98_5_percent():
    from numr_web.apps.demo import prepare_cnn
    from numr_web.apps.training import fit
    kwargs, _ = prepare_cnn(seed=0)
    res = fit(**kwargs)
    assert res.metrics["accuracy"] >= 0.985, res.metrics


def test_cli_mlp_checkpoint_activation_and_bad_output_folder(tmp_path):
    """The MLP demo saves --checkpoint (it was ignored), takes any activation of the table, ends
    with its result line, and refuses an output path in a missing folder before training."""
    from safetensors import safe_open
    ckpt = tmp_path / "mlp.safetensors"
    out = _cli("--epochs", "1", "--activation", "mish", "--checkpoint", str(ckpt), "--plot", "",
               cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    assert "fused Linear+mish" in out.stdout
    assert re.fullmatch(r"final test accuracy: \d+\.\d\d%  \(\d+\.\d s\)", out.stdout.strip().splitlines()[-1])
    with safe_open(str(ckpt), "np") as f:
        assert f.metadata()["activation"] == "mish" and f.metadata()["sizes"] == "64,128,128,10"
        assert {f.get_tensor(k).shape for k in f.keys()} >= {(128, 64), (10, 128)}
    for opt in ("--plot", "--checkpoint"):
        out = _cli("--epochs", "1", opt, str(tmp_path / "missing" / "x.out"), cwd=tmp_path)
        assert out.returncode == 2 and out.stdout == "", out.stdout
        assert "does not exist" in out.stderr and "Traceback" not in out.stderr, out.stderr


def test_the_demos_default_outputs_are_ignored_by_git():
    """`numr-web demo` run in a checkout must not leave untracked files behind for git status."""
    import shutil
    from numr_web.apps.demo_run import MODEL_DEFAULTS
    if shutil.which("git") is None or not (Path(ROOT) / ".git").exists():
        pytest.skip("not a git checkout")
    outputs = sorted({v for d in MODEL_DEFAULTS.values() for k, v in d.items()
                      if k in ("plot", "checkpoint") and v} | {"model.safetensors"})
    assert "gpt.safetensors" in outputs
    for name in outputs:
        r = subprocess.run(["git", "check-ignore", "-q", name], cwd=ROOT)
        assert r.returncode == 0, f"{name} is not in .gitignore"


def test_every_demo_sets_its_blas_threads_before_numpy_loads():
    """A second OpenBLAS thread spinning between small GEMMs cost the MLP demo 9x its CPU time on
    a shared 2-core machine: each model has its thread count (the user's variables win)."""
    from numr_web.apps.demo_run import MODEL_DEFAULTS, MODEL_THREADS
    assert set(MODEL_THREADS) == set(MODEL_DEFAULTS)
    code = ("import os, sys; from numr_web.apps import cli; before = 'numpy' in sys.modules; "
            "cli.main(['demo', '--plot', '', '--epochs', '1', '--hidden', '8']); "
            "import threadpoolctl; print(before, os.environ.get('OPENBLAS_NUM_THREADS'), "
            "{i['num_threads'] for i in threadpoolctl.threadpool_info() if i['user_api'] == 'blas'})")
    env = {k: v for k, v in os.environ.items() if not k.endswith("_NUM_THREADS")}
    env["PYTHONPATH"] = ROOT
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env)
    assert out.stdout.strip().splitlines()[-1] == "False 1 {1}", (out.stdout, out.stderr)
