"""What a training step holds for its backward: the bytes the autograd graph keeps alive after the
forward and the loss, numr_web against torch's saved tensors for the same model, on the cpu.

    python bench/saved_memory.py                       # nanogpt and cifar_cnn at 1/8 of their batch
    python bench/saved_memory.py --models nanogpt --batch-scale 1

This is the part of a step's peak memory that the graph decides (the activations saved for the
backward), independent of the device: the same graph runs on cpu, cuda and webgpu. numr: the
distinct buffers that the graph's nodes reference (grad_fn.saved_tensors, walked through
next_functions), views counted once by their base; torch: the distinct storages its
saved-tensor hooks see. Parameters are left out of both. The models are bench/models.py's.
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path[0] = str(Path(__file__).resolve().parent.parent)   # numr_web from this checkout
sys.path.insert(1, str(Path(__file__).resolve().parent))

import numpy as np  # noqa: E402

import models as M  # noqa: E402

MiB = 2 ** 20


def _base(a):
    while isinstance(a, np.ndarray) and a.base is not None:
        a = a.base
    return a


def numr_saved(name, scale):
    import numr_web as nr
    model, batch, cfg = M.numr_model(name, "cpu")
    batch = max(1, int(batch * scale))
    data = M.batch_data(name, batch, cfg)
    x = nr.tensor(data[0], dtype="int32" if cfg else "float32")
    if cfg is None:
        x = x.reshape(batch, *data[2])
    logits = model(x)
    logits = logits[0] if isinstance(logits, tuple) else logits
    loss = nr.cross_entropy(logits.reshape(-1, logits.shape[-1]),
                            nr.tensor(data[1], dtype="int32").reshape(-1))
    params = {id(_base(p._data)) for p in model.parameters()}
    held, by_node, seen, stack = {}, {}, set(), [loss.grad_fn]
    while stack:
        fn = stack.pop()
        if fn is None or id(fn) in seen or not hasattr(fn, "saved_tensors"):
            continue
        seen.add(id(fn))
        for t in fn.saved_tensors:
            b = _base(t._data)
            if id(b) not in params and id(b) not in held:
                held[id(b)] = b.nbytes
                by_node[fn.name] = by_node.get(fn.name, 0) + b.nbytes
        stack.extend(fn.next_functions)
    return batch, sum(held.values()), by_node


def torch_saved(name, batch):
    import torch
    model, _, cfg = M.torch_model(name, "cpu")
    data = M.batch_data(name, batch, cfg)
    params = {p.untyped_storage().data_ptr() for p in model.parameters()}
    saved = {}

    def pack(t):
        s = t.untyped_storage()
        if s.data_ptr() not in params:
            saved[s.data_ptr()] = s.nbytes()
        return t
    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        x = torch.tensor(data[0], dtype=torch.long if cfg else torch.float32)
        if cfg is None:
            x = x.reshape(batch, *data[2])
        logits = model(x)
        logits = logits[0] if isinstance(logits, tuple) else logits
        torch.nn.functional.cross_entropy(logits.reshape(-1, logits.shape[-1]),
                                          torch.tensor(data[1]).reshape(-1))
    return sum(saved.values())


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--models", default="nanogpt,cifar_cnn", help="of " + ",".join(M.MODELS))
    p.add_argument("--batch-scale", type=float, default=0.125)
    a = p.parse_args()
    print("| model | batch | numr MiB | torch MiB | ratio | numr's largest holders (MiB) |")
    print("|---|---:|---:|---:|---:|---|")
    for name in a.models.split(","):
        batch, mine, by_node = numr_saved(name, a.batch_scale)
        theirs = torch_saved(name, batch)
        top = ", ".join(f"{k} {v / MiB:.1f}" for k, v in
                        sorted(by_node.items(), key=lambda kv: -kv[1])[:4])
        print(f"| {name} | {batch} | {mine / MiB:.1f} | {theirs / MiB:.1f} | "
              f"{mine / theirs:.3f}x | {top} |", flush=True)


if __name__ == "__main__":
    main()
