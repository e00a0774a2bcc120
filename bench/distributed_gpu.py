"""NCCL all-reduce bandwidth and data-parallel scaling on the GPU machine, one command:

    python bench/distributed_gpu.py                     # N = 1, 2, 4, 8 processes (those <= GPUs)
    python bench/distributed_gpu.py --nprocs 1 --models digits,mlp-wide --json out.json

For each N it starts N processes (numr_web.distributed.launch, one per GPU, backend "nccl") that
1. check the nccl backend: all_reduce sum/mean/max, broadcast, barrier, check-mode header
   exchange, and the digits demo (2 epochs) ending with bit-identical parameters on every rank;
2. measure all-reduce like nccl-tests (float32 sum, in place, 1 MiB .. 1 GiB): time per op, algbw
   = bytes / time, busbw = algbw * 2(N-1)/N, for cupy.cuda.nccl alone (20 back-to-back calls on
   one stream, timed with CUDA events) and through numr_web.distributed.all_reduce (sync: each call
   waits; async_op=True: 20 launched, then all waited);
3. time training steps (forward, backward with DDP's bucketed all-reduce, optimizer step) of each
   model at a fixed per-GPU batch, after warm-up: samples/s per GPU, and the scaling efficiency
   (per-GPU throughput at N / at N=1 with DDP; also against a plain 1-GPU step without DDP).
Rank 0 of each N writes a JSON result; the parent prints markdown tables.

Models are pluggable: --models takes names from MODELS below or "package.module:factory" where
factory(device, batch, seed) -> (module, make_batch() -> (x, y), loss_fn(output, y)). "gpt" is
numr_web.models.GPT at bench/gpt.py's default size.
"""
from __future__ import annotations

import argparse
import importlib
import json
import os
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
# import numr_web from this checkout (bench/ itself is not a package path)
sys.path[:] = [p for p in sys.path if os.path.abspath(p or ".") != str(Path(__file__).resolve().parent)]
sys.path.insert(0, str(ROOT))


# -- models -----------------------------------------------------------------------------------------
def _mlp(sizes, batch, device, seed):
    import numr_web as nr
    model = nr.nn.MLP(sizes, activation="gelu", device=device, seed=seed)
    x = nr.rand((batch, sizes[0]), seed=seed + 11, device=device)
    y = (nr.rand((batch,), seed=seed + 12, device=device) * (sizes[-1] - 1e-3)).astype("int32")
    return model, (lambda: (x, y)), nr.cross_entropy


def digits(device, batch, seed):        # the demo's MLP: tiny, launch-bound
    return _mlp([64, 128, 128, 10], batch, device, seed)


def mlp_wide(device, batch, seed):      # compute-bound stand-in until the GPT exists
    return _mlp([1024, 4096, 4096, 4096, 1000], batch, device, seed)


def gpt(device, batch, seed):          # bench/gpt.py's model: 4 layers, 128 dims, context 64
    import random
    import numr_web as nr
    from numr_web.models import GPT, GPTConfig
    cfg = GPTConfig()
    model = GPT(cfg, device=device, dtype="float32", seed=seed)
    rng = random.Random(seed)

    def tokens():
        return nr.tensor([[rng.randrange(cfg.vocab_size) for _ in range(cfg.block_size)]
                          for _ in range(batch)], dtype="int32", device=device)
    x, y = tokens(), tokens()

    def loss_fn(out, y):               # GPT returns (logits (B, T, V), None) without targets
        logits = out[0]
        return nr.cross_entropy(logits.reshape(-1, cfg.vocab_size), y.reshape(-1))
    return model, (lambda: (x, y)), loss_fn


MODELS = {"digits": (digits, 64), "mlp-wide": (mlp_wide, 2048), "gpt": (gpt, 16)}


def resolve(name):
    if name in MODELS:
        return MODELS[name]
    mod, _, fn = name.partition(":")
    return getattr(importlib.import_module(mod), fn), 16


# -- worker (one per GPU) ---------------------------------------------------------------------------
def _sync():
    import cupy
    cupy.cuda.get_current_stream().synchronize()


def check_backend(dist, nr):
    import numpy as np
    r, w = dist.rank(), dist.world_size()
    t = nr.tensor(np.arange(8, dtype=np.float32) * (r + 1), device="cuda")
    dist.all_reduce(t)
    assert t.tolist() == (np.arange(8) * (w * (w + 1) // 2)).tolist(), t.tolist()
    dist.all_reduce(t, op="mean")
    m = nr.tensor(np.full(4, r, np.float16), device="cuda")
    dist.all_reduce(m, op="max")
    assert m.tolist() == [w - 1] * 4
    b = nr.tensor(np.full(3, r + 5, np.int32), device="cuda")
    dist.broadcast(b, src=w - 1)
    assert b.tolist() == [w + 4] * 3
    dist.barrier()
    g = dist.world.group()
    g.check = True
    dist.all_reduce(nr.ones(3, device="cuda"))
    g.check = False
    from numr_web.apps.demo_distributed import run_digits
    res = run_digits(device="cuda", epochs=2, log=None)
    assert res["identical"], res
    return {"digits_demo_accuracy": res["accuracy"], "digits_demo_identical": res["identical"]}


def allreduce_sweep(dist, nr, sizes_mib, iters=20):
    import cupy
    g = dist.world.group()
    nccl, comm, n = g.nccl, g.comm, g.size
    out = []
    for mib in sizes_mib:
        count = mib * (1 << 20) // 4
        x = cupy.zeros(count, dtype=cupy.float32)     # stays finite over the repeated sums
        stream = cupy.cuda.Stream(non_blocking=True)

        def raw():
            comm.allReduce(x.data.ptr, x.data.ptr, count, nccl.NCCL_FLOAT32, nccl.NCCL_SUM,
                           stream.ptr)
        for _ in range(5):
            raw()
        stream.synchronize()
        start, end = cupy.cuda.Event(), cupy.cuda.Event()
        start.record(stream)
        for _ in range(iters):
            raw()
        end.record(stream)
        end.synchronize()
        t_raw = cupy.cuda.get_elapsed_time(start, end) / 1e3 / iters
        t = nr.from_dlpack(x)
        for _ in range(3):
            dist.all_reduce(t)
        _sync()
        t0 = time.perf_counter()
        for _ in range(iters):
            dist.all_reduce(t)
        _sync()
        t_sync = (time.perf_counter() - t0) / iters
        t0 = time.perf_counter()
        works = [dist.all_reduce(t, async_op=True) for _ in range(iters)]
        for wk in works:
            wk.wait()
        _sync()
        t_async = (time.perf_counter() - t0) / iters
        nbytes = count * 4
        bus = 2 * (n - 1) / n
        out.append(dict(bytes=nbytes, raw_s=t_raw, numr_s=t_sync, numr_async_s=t_async,
                        algbw_raw=nbytes / t_raw / 1e9, algbw_numr=nbytes / t_sync / 1e9,
                        algbw_numr_async=nbytes / t_async / 1e9,
                        busbw_raw=bus * nbytes / t_raw / 1e9,
                        busbw_numr=bus * nbytes / t_sync / 1e9,
                        busbw_numr_async=bus * nbytes / t_async / 1e9))
        del x, t
    return out


def _optimizer(nr, params):
    nn = nr.nn
    adam = getattr(getattr(nn, "optim", None), "Adam", None) or nn.Adam
    return adam(params, lr=1e-4)


def time_steps(dist, nr, name, batch, steps, ddp=True):
    factory, _ = resolve(name)
    model, make_batch, loss_fn = factory("cuda", batch, 0)
    net = dist.DistributedDataParallel(model) if ddp else model
    opt = _optimizer(nr, model.parameters())

    def step():
        x, y = make_batch()
        loss = loss_fn(net(x), y)
        opt.zero_grad()
        loss.backward()                 # DDP's hooks finish the gradient all-reduce in here
        opt.step()
    for _ in range(5):
        step()
    _sync()
    if ddp:
        dist.barrier()
    t0 = time.perf_counter()
    for _ in range(steps):
        step()
    _sync()
    dt = (time.perf_counter() - t0) / steps
    return dict(model=name, batch_per_gpu=batch, step_s=dt, samples_per_s_per_gpu=batch / dt)


def worker(cfg):
    import numr_web as nr
    import numr_web.distributed as dist
    dist.init("nccl", timeout=cfg["timeout"])
    res = {"world_size": dist.world_size(), "errors": []}
    try:
        res["checks"] = check_backend(dist, nr)
    except Exception as e:           # noqa: BLE001  (reported, the measurements still run)
        res["errors"].append(f"checks: {type(e).__name__}: {e}")
    res["allreduce"] = allreduce_sweep(dist, nr, cfg["sizes_mib"])
    res["train"] = []
    for name in cfg["models"]:
        batch = cfg["batch"].get(name) or resolve(name)[1]
        try:
            if dist.world_size() == 1:
                res["train"].append(dict(time_steps(dist, nr, name, batch, cfg["steps"], False),
                                         ddp=False))
            res["train"].append(dict(time_steps(dist, nr, name, batch, cfg["steps"]), ddp=True))
        except LookupError as e:
            res["errors"].append(f"{name}: skipped: {e}")
    if dist.rank() == 0:
        with open(cfg["out"], "w") as f:
            json.dump(res, f)
    dist.destroy()


# -- parent -----------------------------------------------------------------------------------------
def gpu_count():
    try:
        import cupy
        return cupy.cuda.runtime.getDeviceCount()
    except Exception as e:           # noqa: BLE001  (no cupy, no driver, no GPU)
        raise SystemExit(f"bench/distributed_gpu.py needs CuPy and NVIDIA GPUs: {e}")


def tables(results):
    lines = ["### NCCL all-reduce, float32 sum in place (GB/s; busbw = algbw * 2(N-1)/N)", "",
             "| N | size | cupy nccl time | algbw | busbw | numr sync time | busbw | numr async "
             "time | busbw |", "|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for n, res in sorted(results.items()):
        for a in res.get("allreduce", []):
            lines.append(f"| {n} | {a['bytes'] >> 20} MiB | {a['raw_s'] * 1e3:.3f} ms | "
                         f"{a['algbw_raw']:.1f} | {a['busbw_raw']:.1f} | {a['numr_s'] * 1e3:.3f} ms"
                         f" | {a['busbw_numr']:.1f} | {a['numr_async_s'] * 1e3:.3f} ms | "
                         f"{a['busbw_numr_async']:.1f} |")
    lines += ["", "### Data-parallel training step (DDP over NCCL), per-GPU throughput", "",
              "| model | batch/GPU | N | step | samples/s per GPU | efficiency vs N=1 DDP | vs "
              "N=1 no DDP |", "|---|---:|---:|---:|---:|---:|---:|"]
    base, plain = {}, {}
    for n, res in sorted(results.items()):
        for t in res.get("train", []):
            key = t["model"]
            if n == 1:
                (base if t["ddp"] else plain)[key] = t["samples_per_s_per_gpu"]
    for n, res in sorted(results.items()):
        for t in res.get("train", []):
            k, v = t["model"], t["samples_per_s_per_gpu"]
            eff = f"{v / base[k]:.3f}" if k in base else "-"
            effp = f"{v / plain[k]:.3f}" if k in plain else "-"
            label = "" if t["ddp"] else " (no DDP)"
            lines.append(f"| {k} | {t['batch_per_gpu']} | {n}{label} | {t['step_s'] * 1e3:.2f} ms"
                         f" | {v:.0f} | {eff} | {effp} |")
    notes = [f"- N={n}: {e}" for n, res in sorted(results.items()) for e in res.get("errors", [])]
    notes += [f"- N={n}: checks {res['checks']}" for n, res in sorted(results.items())
              if "checks" in res]
    return "\n".join(lines + ([""] + notes if notes else []))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--nprocs", default="1,2,4,8")
    ap.add_argument("--models", default="digits,mlp-wide,gpt")
    ap.add_argument("--batch", default="", help="per-GPU batch overrides, e.g. digits=256,gpt=8")
    ap.add_argument("--steps", type=int, default=30)
    ap.add_argument("--sizes-mib", default="1,4,16,64,256,1024")
    ap.add_argument("--timeout", type=float, default=120, help="collective timeout (s)")
    ap.add_argument("--launch-timeout", type=float, default=140, help="per N (s)")
    ap.add_argument("--json", default=None)
    ap.add_argument("--worker", default=None, help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.worker:
        with open(a.worker) as f:
            return worker(json.load(f))
    from numr_web.distributed.launch import launch
    # NVLink multicast (NVLS) stays off: on shared hosts it can take the GPUs out of service
    os.environ.setdefault("NCCL_NVLS_ENABLE", "0")
    ngpu = gpu_count()
    ns = [n for n in (int(x) for x in a.nprocs.split(",")) if n <= ngpu]
    print(f"{ngpu} GPU(s); running N = {ns}", flush=True)
    results, tmp = {}, tempfile.mkdtemp(prefix="numr-dist-")
    for n in ns:
        cfg = dict(models=a.models.split(","), steps=a.steps, timeout=a.timeout,
                   sizes_mib=[int(s) for s in a.sizes_mib.split(",")],
                   batch=dict(kv.split("=") for kv in a.batch.split(",") if kv),
                   out=os.path.join(tmp, f"result_{n}.json"))
        cfg["batch"] = {k: int(v) for k, v in cfg["batch"].items()}
        path = os.path.join(tmp, f"cfg_{n}.json")
        with open(path, "w") as f:
            json.dump(cfg, f)
        t0 = time.perf_counter()
        rc = launch([sys.executable, __file__, "--worker", path], n, timeout=a.launch_timeout,
                    env={**os.environ, "PYTHONPATH": f"{ROOT}{os.pathsep}"
                                                     f"{os.environ.get('PYTHONPATH', '')}"})
        print(f"N={n}: exit {rc} in {time.perf_counter() - t0:.0f} s", flush=True)
        if rc == 0 and os.path.exists(cfg["out"]):
            with open(cfg["out"]) as f:
                results[n] = json.load(f)
    print(tables(results))
    if a.json:
        with open(a.json, "w") as f:
            json.dump(results, f, indent=1)
    return 0 if len(results) == len(ns) else 1


if __name__ == "__main__":
    sys.exit(main())
