"""Host cost of encoding an eager webgpu step: the dispatches of one training step of a
nanoGPT-shaped GPT (6 layers, 6 heads; tiny widths, so the GPU's share is small) are recorded,
then encoded again and again with the queue's submit switched off: once with the adapter's
bind-group cache emptied before each round (every bind group made anew, as for ~95% of an eager
step's dispatches: its buffers change from step to step) and once with it warm. Also prints the
eager step's host time (issuing its ops, before the read-back) and its whole time.

    python bench/webgpu_encode.py [--rounds 7] [--layers 6]

Median ms per round; divide by the dispatch count for a dispatch's cost. Run it in two checkouts
for an A/B: it imports numr_web from the checkout it lies in.
"""
from __future__ import annotations

import argparse
import os
import random
import statistics
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

import numr_web as nr  # noqa: E402
from numr_web import nn  # noqa: E402
from numr_web.models.gpt import GPT, GPTConfig  # noqa: E402


class _NoQueue:
    def submit(self, command_buffers):
        pass


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=7)
    ap.add_argument("--layers", type=int, default=6)
    args = ap.parse_args()
    cfg = GPTConfig(vocab_size=65, block_size=16, n_layer=args.layers, n_head=6, n_embd=48)
    model = GPT(cfg, device="webgpu", dtype="float32", seed=0)
    r = random.Random(0)
    toks = [[r.randrange(65) for _ in range(17)] for _ in range(2)]
    x = nr.tensor([t[:-1] for t in toks], dtype="int32", device="webgpu")
    y = nr.tensor([t[1:] for t in toks], dtype="int32", device="webgpu")
    opt = nn.optim.AdamW(model.parameters(), lr=3e-4)

    def step():
        _, loss = model(x, y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        return loss

    for _ in range(10):
        step().item()
    issue, whole = [], []
    for _ in range(args.rounds):
        t0 = time.perf_counter()
        loss = step()
        t1 = time.perf_counter()
        loss.item()
        issue.append(t1 - t0)
        whole.append(time.perf_counter() - t0)
    adapter = x._backend.adapter
    recorded, submit = [], adapter.submit

    def grab(dispatches, timed=False):
        recorded.extend(dispatches)
        return submit(dispatches, timed)
    adapter.submit = grab
    step().item()
    del adapter.submit
    queue, adapter._queue = adapter._queue, _NoQueue()
    try:
        rows = {}
        for name, cold in (("every bind group new", True), ("bind groups cached", False)):
            ts = []
            for _ in range(args.rounds):
                if cold:
                    adapter._bind_groups.clear()
                t0 = time.perf_counter()
                adapter.submit(recorded)
                ts.append(time.perf_counter() - t0)
            rows[name] = 1e3 * statistics.median(ts)
    finally:
        adapter._queue = queue
    n = len(recorded)
    print(f"adapter: {adapter.name} ({adapter.backend}); {n} dispatches a step")
    print(f"eager step: host {1e3 * statistics.median(issue):.2f} ms, "
          f"whole {1e3 * statistics.median(whole):.2f} ms")
    for name, ms in rows.items():
        print(f"encode, {name}: {ms:.2f} ms ({1e3 * ms / n:.1f} us a dispatch)")


if __name__ == "__main__":
    main()
