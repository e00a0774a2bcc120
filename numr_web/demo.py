"""The main job: train an MLP of fused layers on the shipped digits data. Shared by `numr-web demo`
and the browser training page (it uses no numpy)."""
from __future__ import annotations

import random

from . import nn
from .autograd import no_grad
from .data import digits_split
from .ops import cross_entropy


def accuracy(model, x, y):
    with no_grad():
        pred = model(x).argmax(axis=1)
        return (pred == y).astype("float32").mean().item()


def train_digits(device=None, epochs=20, hidden=128, batch_size=64, lr=3e-3, activation="gelu",
                 seed=0, on_epoch=None, on_step=None):
    """Train 64 -> hidden -> hidden -> 10 with Adam. Calls on_step(step, loss_tensor) after each
    step and on_epoch(epoch, mean_loss, test_acc) after each epoch. Returns (model, history, acc)."""
    x_train, y_train, x_test, y_test = digits_split(device=device, seed=seed)
    model = nn.MLP([64, hidden, hidden, 10], activation=activation, device=device, seed=seed)
    opt = nn.Adam(model.parameters(), lr=lr)
    n = x_train.shape[0]
    rng = random.Random(seed)
    history, step = [], 0
    starts = list(range(0, n, batch_size))
    for epoch in range(epochs):
        rng.shuffle(starts)
        losses = []
        for s in starts:
            xb, yb = x_train[s:s + batch_size], y_train[s:s + batch_size]
            loss = cross_entropy(model(xb), yb)
            opt.zero_grad()
            loss.backward()
            opt.step()
            losses.append(loss)
            step += 1
            if on_step is not None:
                on_step(step, loss)
        mean_loss = sum(l.item() for l in losses) / len(losses)   # one sync per epoch
        history.append(mean_loss)
        acc = accuracy(model, x_test, y_test)
        if on_epoch is not None:
            on_epoch(epoch, mean_loss, acc)
    return model, history, accuracy(model, x_test, y_test)
