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
    from numr_web.demo import train_digits
    epochs = 20 if device != "webgpu" else 8
    model, history, acc = train_digits(device=device, epochs=epochs)
    assert history[-1] < history[0] / 5
    assert acc >= 0.95, acc


def test_cli_demo_and_info(tmp_path):
    out = subprocess.run([sys.executable, "-m", "numr_web.cli", "demo", "--epochs", "15",
                          "--plot", str(tmp_path / "loss.png"), "--min-accuracy", "0.95"],
                         capture_output=True, text=True, check=True)
    assert "final test accuracy" in out.stdout
    assert (tmp_path / "loss.png").stat().st_size > 1000
    out = subprocess.run([sys.executable, "-m", "numr_web.cli", "info"], capture_output=True,
                         text=True, check=True)
    assert "cpu" in out.stdout and "available" in out.stdout
