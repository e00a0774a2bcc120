"""The demo data set: the UCI optical handwritten digits (1,797 8x8 images, pixel values 0..16, the
copy scikit-learn ships), stored as raw bytes so it loads without numpy (the browser has none).

digits.bin: 1,797 records of 65 unsigned bytes: 64 pixels in row-major order, then the label 0..9.
"""
from __future__ import annotations

import array
import random
from importlib import resources

from ..creation import tensor

N_PIXELS = 64
RECORD = N_PIXELS + 1


def load_digits():
    """-> (pixels, labels): array.array('B') of n*64 pixel values 0..16, array.array('B') of n labels."""
    raw = resources.files(__package__).joinpath("digits.bin").read_bytes()
    if len(raw) % RECORD:
        raise ValueError(f"digits.bin is corrupt: {len(raw)} bytes is not a multiple of {RECORD}")
    n = len(raw) // RECORD
    pixels, labels = array.array("B"), array.array("B")
    for i in range(n):
        rec = raw[i * RECORD:(i + 1) * RECORD]
        pixels.frombytes(rec[:N_PIXELS])
        labels.append(rec[N_PIXELS])
    return pixels, labels


def digits_split(test_fraction=0.2, seed=0, device=None):
    """Shuffled train/test split as tensors: x scaled to [0, 1] float32 (n, 64), y int32 (n,)."""
    pixels, labels = load_digits()
    n = len(labels)
    order = list(range(n))
    random.Random(seed).shuffle(order)
    n_test = int(round(n * test_fraction))

    def take(idx):
        xs = array.array("f", [0.0]) * (len(idx) * N_PIXELS)
        for r, i in enumerate(idx):
            base = i * N_PIXELS
            for j in range(N_PIXELS):
                xs[r * N_PIXELS + j] = pixels[base + j] / 16.0
        x = tensor(memoryview(xs), device=device).reshape(len(idx), N_PIXELS)
        y = tensor(array.array("i", [labels[i] for i in idx]), device=device)
        return x, y

    x_test, y_test = take(order[:n_test])
    x_train, y_train = take(order[n_test:])
    return x_train, y_train, x_test, y_test
