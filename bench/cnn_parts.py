"""Where a conv-net layer's time goes, per device: the convolution op forward and backward and,
for the composed im2col form (cpu, webgpu; cuda with NUMR_CUDA_CONV=im2col), its parts, called as
backend primitives (im2col in the (C*kh*kw, N*L) layout, the GEMMs, the transposing copy with the
bias, col2im); the fused batch norm + ReLU and the 2x2 max pool, forward and backward. Shapes:
the CIFAR-shaped net of bench/models.py (batch 128). torch's conv2d / batch_norm / max_pool2d
forward + backward on cuda alongside (TF32 off).

    python bench/cnn_parts.py --devices cpu,cuda,webgpu [--reps 10] [--layers 1,2]
"""
from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

sys.path[0] = str(Path(__file__).resolve().parent.parent)   # numr_web from this checkout

LAYERS = [(3, 32, 32), (32, 64, 32), (64, 128, 16), (128, 256, 8)]   # (C in, C out, H = W)


def _sync(device):
    import numr_web as nr
    if device == "cuda":
        import cupy
        cupy.cuda.get_current_stream().synchronize()
    elif device == "webgpu":
        nr.zeros(1, device="webgpu").numpy()


def timed(fn, device, reps):
    fn()
    _sync(device)
    t0 = time.perf_counter()
    for _ in range(reps):
        fn()
    _sync(device)
    return (time.perf_counter() - t0) / reps * 1e3


def numr_rows(device, cin, cout, hw, reps, batch, tiles=()):
    import numpy as np
    import numr_web as nr
    from numr_web.nn import functional as F
    r = np.random.default_rng(0)
    x = nr.tensor(r.normal(size=(batch, cin, hw, hw)).astype(np.float32), device=device,
                  requires_grad=True)
    w = nr.tensor(r.normal(size=(cout, cin, 3, 3)).astype(np.float32) * 0.1, device=device,
                  requires_grad=True)
    b = nr.zeros(cout, device=device, requires_grad=True)
    g = nr.tensor(r.normal(size=(batch, cout, hw, hw)).astype(np.float32), device=device)
    rows = []
    y = nr.conv2d_bias_activation(x, w, b, "none", padding=1)
    rows.append(("conv2d forward", timed(lambda: nr.conv2d_bias_activation(
        x, w, b, "none", padding=1), device, reps)))
    rows.append(("conv2d backward", timed(lambda: nr.grad(y, [x, w, b], g, retain_graph=True),
                                          device, reps)))
    be = x._backend
    geo = ((3, 3), (1, 1), (1, 1), (1, 1))
    cols = be.im2col(x._data, *geo, cn=True)
    w2 = be.reshape(be.contiguous(w._data), (cout, cin * 9))
    zt = be.matmul(w2, cols)
    zv = be.permute(be.reshape(zt, (cout, batch, hw * hw)), (1, 0, 2))
    dzt = be.reshape(be.contiguous(be.permute(be.reshape(g._data, (batch, cout, hw * hw)),
                                              (1, 0, 2))), (cout, batch * hw * hw))
    dcols = be.matmul(be.permute(w2, (1, 0)), dzt)
    parts = [
        ("  im2col (CK, N*L)", lambda: be.im2col(x._data, *geo, cn=True)),
        ("  GEMM W @ cols", lambda: be.matmul(w2, cols)),
        ("  NCHW copy + bias", lambda: be._channel_bias_act(zv, b._data, "none")),
        ("  dz transpose", lambda: be.contiguous(be.permute(
            be.reshape(g._data, (batch, cout, hw * hw)), (1, 0, 2)))),
        ("  GEMM dW^T = cols' dz'^T", lambda: be.matmul(cols, be.permute(dzt, (1, 0)))),
        ("  (GEMM dW = dz' cols'^T)", lambda: be.matmul(dzt, be.permute(cols, (1, 0)))),
        ("  GEMM dcols = W^T dz'", lambda: be.matmul(be.permute(w2, (1, 0)), dzt)),
        ("  col2im", lambda: be.col2im(dcols, x.shape, *geo, cn=True)),
    ]
    for name, fn in parts:
        rows.append((name, timed(fn, device, reps)))
    if device == "webgpu":      # the GEMMs under each tile, and the forward's transposed form
        old = be.gemm_tile
        gemms = [("W @ cols", lambda: be.matmul(w2, cols)),
                 ("cols^T @ W^T", lambda: be.matmul(be.permute(cols, (1, 0)),
                                                    be.permute(w2, (1, 0)))),
                 ("dW^T", lambda: be.matmul(cols, be.permute(dzt, (1, 0)))),
                 ("dW", lambda: be.matmul(dzt, be.permute(cols, (1, 0)))),
                 ("dcols", lambda: be.matmul(be.permute(w2, (1, 0)), dzt))]
        try:
            for tile in tiles:
                be.gemm_tile = tile
                for name, fn in gemms:
                    rows.append((f"  GEMM {name} [tile {tile}]", timed(fn, device, reps)))
        finally:
            be.gemm_tile = old
    rm, rv = nr.zeros(cout, device=device), nr.ones(cout, device=device)
    gamma = nr.ones(cout, device=device, requires_grad=True)
    xb = nr.tensor(r.normal(size=(batch, cout, hw, hw)).astype(np.float32), device=device,
                   requires_grad=True)
    yb = F.batch_norm(xb, rm, rv, gamma, b, training=True, activation="relu")
    rows.append(("batch_norm + relu forward", timed(lambda: F.batch_norm(
        xb, rm, rv, gamma, b, training=True, activation="relu"), device, reps)))
    rows.append(("batch_norm + relu backward", timed(lambda: nr.grad(
        yb, [xb, gamma, b], g, retain_graph=True), device, reps)))
    yp = F.max_pool2d(xb, 2)
    gp = nr.tensor(r.normal(size=yp.shape).astype(np.float32), device=device)
    rows.append(("max_pool2d forward", timed(lambda: F.max_pool2d(xb, 2), device, reps)))
    rows.append(("max_pool2d backward", timed(lambda: nr.grad(yp, [xb], gp, retain_graph=True),
                                              device, reps)))
    return rows


def torch_rows(cin, cout, hw, reps, batch):
    import torch
    import torch.nn.functional as TF
    torch.backends.cudnn.allow_tf32 = False
    torch.backends.cuda.matmul.allow_tf32 = False
    dev = "cuda"
    x = torch.randn(batch, cin, hw, hw, device=dev, requires_grad=True)
    w = torch.randn(cout, cin, 3, 3, device=dev, requires_grad=True)
    b = torch.zeros(cout, device=dev, requires_grad=True)
    g = torch.randn(batch, cout, hw, hw, device=dev)

    def t(fn):
        fn()
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        for _ in range(reps):
            fn()
        torch.cuda.synchronize()
        return (time.perf_counter() - t0) / reps * 1e3
    y = TF.conv2d(x, w, b, padding=1)
    xb = torch.randn(batch, cout, hw, hw, device=dev, requires_grad=True)
    rm, rv = torch.zeros(cout, device=dev), torch.ones(cout, device=dev)
    gamma = torch.ones(cout, device=dev, requires_grad=True)
    yb = torch.relu(TF.batch_norm(xb, rm, rv, gamma, b, training=True))
    yp = TF.max_pool2d(xb, 2)
    gp = torch.randn_like(yp)
    return [("conv2d forward", t(lambda: TF.conv2d(x, w, b, padding=1))),
            ("conv2d backward", t(lambda: torch.autograd.grad(y, [x, w, b], g, retain_graph=True))),
            ("batch_norm + relu forward", t(lambda: torch.relu(
                TF.batch_norm(xb, rm, rv, gamma, b, training=True)))),
            ("batch_norm + relu backward", t(lambda: torch.autograd.grad(
                yb, [xb, gamma, b], g, retain_graph=True))),
            ("max_pool2d forward", t(lambda: TF.max_pool2d(xb, 2))),
            ("max_pool2d backward", t(lambda: torch.autograd.grad(yp, [xb], gp,
                                                                  retain_graph=True)))]


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--devices", default="cpu")
    p.add_argument("--layers", default="0,1,2,3", help="indices into the four conv layers")
    p.add_argument("--reps", type=int, default=10)
    p.add_argument("--batch", type=int, default=128)
    p.add_argument("--tiles", default="64,v4,v4w",
                   help="webgpu: also time the GEMMs with these NUMR_WEBGPU_GEMM_TILE values")
    a = p.parse_args(argv)
    for li in (int(i) for i in a.layers.split(",")):
        cin, cout, hw = LAYERS[li]
        print(f"\n## layer {li}: {a.batch}x{cin}x{hw}x{hw} -> {cout} channels, 3x3, padding 1")
        cols = {}
        for dev in a.devices.split(","):
            cols[dev] = dict(numr_rows(dev, cin, cout, hw, a.reps, a.batch,
                                       [t for t in a.tiles.split(",") if t]))
        if "cuda" in a.devices.split(","):
            try:
                cols["torch cuda"] = dict(torch_rows(cin, cout, hw, a.reps, a.batch))
            except Exception as e:            # no torch with CUDA here
                print(f"(torch cuda: {type(e).__name__}: {e})")
        names = list(dict.fromkeys(n for c in cols.values() for n in c))
        print("| part (ms) | " + " | ".join(cols) + " |")
        print("|---|" + "---:|" * len(cols))
        for n in names:
            print(f"| {n} | " + " | ".join(f"{c[n]:.3f}" if n in c else "" for c in cols.values())
                  + " |")


if __name__ == "__main__":
    main()
