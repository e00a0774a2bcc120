"""A small CNN for the bundled 8x8 digits: two 3x3 convolutions (bias + ReLU fused into each),
a 2x2 max-pool, then a fused Linear + ReLU and a Linear classifier."""
from __future__ import annotations

from .. import nn


class DigitsCNN(nn.Module):
    def __init__(self, channels=(32, 64), hidden=128, num_classes=10, dropout=0.0, device=None,
                 dtype=None, seed=0):
        super().__init__()
        c1, c2 = channels
        s = (lambda i: None) if seed is None else (lambda i: seed + 2 * i)
        kw = dict(device=device, dtype=dtype)
        self.features = nn.Sequential(
            nn.Conv2d(1, c1, 3, padding=1, activation="relu", seed=s(0), **kw),
            nn.Conv2d(c1, c2, 3, padding=1, activation="relu", seed=s(1), **kw),
            nn.MaxPool2d(2))
        self.classifier = nn.Sequential(
            nn.Flatten(),
            nn.Linear(c2 * 4 * 4, hidden, activation="relu", seed=s(2), **kw),
            nn.Dropout(dropout),
            nn.Linear(hidden, num_classes, seed=s(3), **kw))

    def forward(self, x):
        """x: (N, 64) pixel rows (as numr_web.data.digits_split gives) or (N, 1, 8, 8)."""
        if x.ndim == 2:
            x = x.reshape(x.shape[0], 1, 8, 8)
        return self.classifier(self.features(x))
