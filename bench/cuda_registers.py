"""Registers and spilled bytes of the cuda backend's attention kernels, per tile shape, without a
GPU: NVRTC compiles the backend's CUDA source to PTX and ptxas (the nvidia-cuda-nvrtc and
nvidia-cuda-nvcc wheels of the [dev] extra) assembles it for the chosen architecture.

    python bench/cuda_registers.py                       # sm_90 (H100 / H200), every head dim
    python bench/cuda_registers.py --arch 80 --dims 64 --masks 0

A kernel whose accumulators do not fit in the registers spills them to local memory; compare a
change's table with main's before timing it on a GPU.
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path[0] = str(ROOT)                                  # numr_web from this checkout
sys.path.insert(1, str(ROOT / "tests"))                  # tests/nvrtc.py: NVRTC and ptxas


def main():
    from nvrtc import kernel_resources, nvrtc, ptxas
    from numr_web.backends.cuda import attention as A
    from numr_web.backends.cuda import codegen as G
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--arch", type=int, default=90)
    ap.add_argument("--dims", default=",".join(str(d) for d in A.TILED_DIMS))
    ap.add_argument("--masks", default=",".join(str(m) for m in A.MASK_KINDS),
                    help="mask kinds: 0 none (causal included), 1 bool, 2 additive")
    a = ap.parse_args()
    if nvrtc() is None or ptxas() is None:
        sys.exit("needs NVRTC and ptxas: pip install nvidia-cuda-nvrtc nvidia-cuda-nvcc")
    dims, masks = [int(d) for d in a.dims.split(",")], [int(m) for m in a.masks.split(",")]
    names = [G.attention_tiled(A.KERNELS[k], ct, dm, m, *A.TILES[k][dm])
             for k in A.KERNELS for ct in A.TILED_TYPES for dm in dims for m in masks]
    names += [G.attention_tiled(A.TC_KERNELS[k], "half_t", dm, m, *A.TC_TILES[k][dm])
              for k in A.KERNELS for dm in dims for m in masks]
    got = kernel_resources(G.source(), names, a.arch, G.OPTIONS)
    print(f"| kernel (sm_{a.arch}) | registers | spill stores | spill loads |")
    print("|---|---:|---:|---:|")
    for n in names:
        r, st, ld = got[n]
        print(f"| `{n}` | {r} | {st} | {ld} |")


if __name__ == "__main__":
    main()
