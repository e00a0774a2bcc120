"""`numr-web demo --distributed`: the digits MLP trained data-parallel.

    mpirun -n 2 numr-web demo --distributed                       # cpu, MPI
    python -m numr_web.distributed.launch --nproc-per-node 2 -m numr_web demo --device cuda \
        --distributed nccl                                         # one process per GPU

Each step's global batch (batch_size samples) is split evenly across the ranks: DistributedSampler
deals every rank an interleaved shard of the same epoch permutation, so step k's global batch is
the same set of samples a single process with the whole batch would use. Gradients are averaged
by DistributedDataParallel, so every rank takes the same optimizer step and the ranks end with
bit-identical parameters (checked with a digest exchange and reported by rank 0). The steps are
those of every demo: `training.fit`, here on the DistributedDataParallel model.
"""
from __future__ import annotations

import hashlib
import time

from .. import cross_entropy, nn, no_grad, tensor
from ..data import digits_split
from ..errors import DistributedError
from ..distributed import world
from ..distributed.ddp import DistributedDataParallel
from ..distributed.env import read_env
from ..distributed.sampler import DistributedSampler
from .training import fit


def _accuracy(model, x, y):
    with no_grad():
        return (model(x).argmax(axis=1) == y).astype("float32").mean().item()


def param_digest(params):
    h = hashlib.sha256()
    for p in params:
        h.update(p.numpy().tobytes())
    return h.hexdigest()


def run_digits(device=None, backend=None, epochs=20, hidden=128, batch_size=64, lr=3e-3,
               activation="gelu", seed=0, timeout=None, bucket_cap_mb=25, log=print,
               fail_rank=None, fail_step=None):
    """Train 64-hidden-hidden-10 with Adam, data-parallel over the launched ranks (or in one
    process when not launched by mpirun/torchrun and backend is None). Returns a dict: rank,
    world_size, losses (the global-batch loss of every step), epoch_losses, accuracy, identical,
    digest, seconds. fail_rank/fail_step: that rank exits abruptly at that step (failure tests)."""
    import numpy as np
    if not world.is_initialized() and (backend is not None or read_env().world_size > 1):
        world.init(backend or ("nccl" if device == "cuda" else "mpi"), timeout=timeout)
    dist = world.is_initialized()
    W, r = (world.world_size(), world.rank()) if dist else (1, 0)
    if batch_size % W:
        raise DistributedError(f"the global batch ({batch_size}) must split evenly over {W} ranks")
    local = batch_size // W
    x_train, y_train, x_test, y_test = digits_split(device=device, seed=seed)
    xh, yh = x_train.numpy(), y_train.numpy()
    model = nn.MLP([64, hidden, hidden, 10], activation=activation, device=device, seed=seed)
    net = DistributedDataParallel(model, bucket_cap_mb=bucket_cap_mb) if dist else model
    opt = nn.Adam(model.parameters(), lr=lr)
    sampler = DistributedSampler(xh.shape[0], W, r, shuffle=True, seed=seed)
    losses, epoch_losses, local_losses = [], [], []

    def batches(epoch):
        sampler.set_epoch(epoch)
        order = np.fromiter(sampler, dtype=np.int64)
        for k in range(0, len(order), local):
            idx = order[k:k + local]
            yield tensor(xh[idx], device=device), tensor(yh[idx], device=device)

    def loss_fn(logits, y):               # this rank's loss of every step, read once per epoch
        loss = cross_entropy(logits, y)
        local_losses.append(loss.detach())
        return loss

    def on_step(s):
        if fail_rank == r and fail_step == s.step:
            import os
            os._exit(3)

    def on_epoch(e):
        # one collective per epoch: every rank's local losses -> the global-batch loss per step
        curve = tensor(np.array([l.item() for l in local_losses], dtype=np.float64),
                       device="cpu" if not dist or world.backend() == "mpi" else device)
        local_losses.clear()
        if dist and W > 1:
            world.all_reduce(curve, op="mean")
        curve = curve.tolist()
        losses.extend(curve)
        epoch_losses.append(sum(curve) / len(curve))
        if log and r == 0:
            log(f"epoch {e.epoch + 1:3d}  loss {epoch_losses[-1]:.4f}")

    t0 = time.perf_counter()
    fit(net, opt, batches, loss_fn, epochs=epochs, on_step=on_step, on_epoch=on_epoch)
    seconds = time.perf_counter() - t0
    acc = _accuracy(model, x_test, y_test)
    digest = param_digest(model.parameters())
    digests = [d.decode() for d in world.all_gather_bytes(digest.encode())] if dist else [digest]
    identical = len(set(digests)) == 1
    if log and r == 0:
        log(f"final test accuracy: {acc * 100:.2f}%  ({W} rank{'s' if W > 1 else ''}, "
            f"{seconds:.1f} s)")
        if W > 1:
            log(f"parameters bit-identical on all {W} ranks: {'yes' if identical else 'NO'} "
                f"(sha256 {digest[:16]})")
    if not identical:
        raise DistributedError(f"ranks ended with different parameters: {digests}")
    return dict(rank=r, world_size=W, losses=losses, epoch_losses=epoch_losses, accuracy=acc,
                identical=identical, digest=digest, seconds=seconds)


def cli_demo(args):
    """Entry point for `numr-web demo --distributed [mpi|nccl]` (argparse namespace of cli.py)."""
    backend = None if args.distributed in (True, "auto") else args.distributed
    if backend is None:
        backend = "nccl" if args.device == "cuda" else "mpi"
    res = run_digits(device=args.device, backend=backend, epochs=args.epochs, hidden=args.hidden,
                     batch_size=args.batch_size, lr=args.lr, activation=args.activation,
                     seed=args.seed)
    world.destroy()
    wanted = getattr(args, "min_accuracy", 0.0)
    if res["rank"] != 0:                  # rank 0 says why; every rank exits with the status
        return 0 if res["accuracy"] >= wanted else 1
    from .demo_run import accuracy_gate
    return accuracy_gate(res["accuracy"], wanted)
