"""Linear + bias + GELU forward + backward through the engine on webgpu, side by side with torch on
the same GPU (when torch sees a CUDA device). Default GEMM selection ("auto").

    python bench/webgpu_linear.py [--m 8192 --k 4096 --n 4096] [--reps 5]
"""
import argparse
import statistics
import time

import numr_web as nr


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--m", type=int, default=8192)
    p.add_argument("--k", type=int, default=4096)
    p.add_argument("--n", type=int, default=4096)
    p.add_argument("--reps", type=int, default=5)
    a = p.parse_args()
    be = nr.get_backend("webgpu")
    x = nr.randn((a.m, a.k), seed=0, device="webgpu", requires_grad=True)
    w = (nr.randn((a.k, a.n), seed=1, device="webgpu") * 0.02).detach().requires_grad_()
    b = nr.zeros(a.n, device="webgpu", requires_grad=True)
    dy = nr.randn((a.m, a.n), seed=2, device="webgpu")

    def step():
        x.grad = w.grad = b.grad = None
        nr.matmul_bias_activation(x, w, b, "gelu").backward(dy)
        be.to_bytes(be.slice(w.grad._data, ((0, 1, 1), (0, 1, 1))))   # sync: wait for the GPU

    def bench(fn):
        fn()
        ts = []
        for _ in range(a.reps):
            t0 = time.perf_counter()
            fn()
            ts.append(time.perf_counter() - t0)
        return statistics.median(ts)

    t_ours = bench(step)
    line = f"webgpu ({be.adapter.name}, gemm {be.gemm_tile}): {t_ours * 1e3:.2f} ms"
    try:
        import torch
        if torch.cuda.is_available():
            tx = torch.randn(a.m, a.k, device="cuda", requires_grad=True)
            tw = (torch.randn(a.n, a.k, device="cuda") * 0.02).requires_grad_()
            tb = torch.zeros(a.n, device="cuda", requires_grad=True)
            tdy = torch.randn(a.m, a.n, device="cuda")

            def tstep():
                tx.grad = tw.grad = tb.grad = None
                torch.nn.functional.gelu(torch.nn.functional.linear(tx, tw, tb)).backward(tdy)
                torch.cuda.synchronize()
            t_t = bench(tstep)
            line += f"; torch CUDA fp32: {t_t * 1e3:.2f} ms; ratio {t_ours / t_t:.2f}"
    except ImportError:
        pass
    flops = 6 * a.m * a.k * a.n
    print(f"Linear+bias+GELU fwd+bwd {a.m}x{a.k}x{a.n} fp32: {line} "
          f"({flops / t_ours / 1e12:.1f} TFLOP/s ours)", flush=True)


if __name__ == "__main__":
    main()
