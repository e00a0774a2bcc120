"""Registers and spilled bytes of the cuda backend's attention kernels, per tile shape, without a
GPU: NVRTC compiles the backend's CUDA source to PTX and ptxas (the nvidia-cuda-nvrtc and
nvidia-cuda-nvcc wheels of the [dev] extra) assembles it for the chosen architecture.

    python bench/cuda_registers.py                       # sm_90 (H100 / H200), every head dim
    python bench/cuda_registers.py --arch 80 --dims 64 --masks 0

A kernel whose accumulators do not fit in the registers spills them to local memory; compare a
change's table with main's before timing it on a GPU.

    python bench/cuda_registers.py --loops --dims 64 --masks 0 --kernels fwd,dq,dkv

--loops disassembles each kernel (nvdisasm, from the nvidia-cuda-nvdisasm wheel) and prints its
loops (a backward branch and the instructions it closes): instructions, FFMA / HMMA, shared and
global loads, integer multiply-adds. Two checkouts' tables compare their kernels' machine code
loop by loop (run the script in each).
"""
from __future__ import annotations

import argparse
import collections
import re
import subprocess
import sys
import tempfile
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
    ap.add_argument("--kernels", default=",".join(A.KERNELS), help="of fwd,dq,dkv")
    ap.add_argument("--dense", action="store_true", help="the kernels' variant for dense inputs")
    ap.add_argument("--loops", action="store_true", help="each kernel's loops (nvdisasm)")
    a = ap.parse_args()
    if nvrtc() is None or ptxas() is None:
        sys.exit("needs NVRTC and ptxas: pip install nvidia-cuda-nvrtc nvidia-cuda-nvcc")
    dims, masks = [int(d) for d in a.dims.split(",")], [int(m) for m in a.masks.split(",")]
    kernels = a.kernels.split(",")
    names = [G.attention_tiled(A.KERNELS[k], ct, dm, m, *A.TILES[k][dm], dense=a.dense)
             for k in kernels for ct in A.TILED_TYPES for dm in dims for m in masks]
    names += [G.attention_tiled(A.TC_KERNELS[k], "half_t", dm, m, *A.TC_TILES[k][dm],
                                dense=a.dense)
              for k in kernels for dm in dims for m in masks]
    if a.loops:
        return print_loops(names, a.arch, nvrtc, ptxas)
    got = kernel_resources(G.source(), names, a.arch, G.OPTIONS)
    print(f"| kernel (sm_{a.arch}) | registers | spill stores | spill loads |")
    print("|---|---:|---:|---:|")
    for n in names:
        r, st, ld = got[n]
        print(f"| `{n}` | {r} | {st} | {ld} |")


def print_loops(names, arch, nvrtc, ptxas):
    from nvrtc import _nvidia_paths
    from numr_web.backends.cuda import codegen as G
    tool = (_nvidia_paths("cu*/bin/nvdisasm") + _nvidia_paths("cuda_nvdisasm/bin/nvdisasm"))
    if not tool:
        sys.exit("--loops needs nvdisasm: pip install nvidia-cuda-nvdisasm")
    for name in names:
        ptx, _ = nvrtc().compile(G.source(), [name], tuple(G.OPTIONS) + (f"-arch=compute_{arch}",))
        with tempfile.TemporaryDirectory() as tmp:
            path = Path(tmp) / "k.ptx"
            path.write_text(ptx)
            subprocess.run([ptxas(), f"-arch=sm_{arch}", str(path), "-o",
                            str(path.with_suffix(".cubin"))], check=True)
            sass = subprocess.run([tool[-1], "-c", str(path.with_suffix(".cubin"))],
                                  capture_output=True, text=True, check=True).stdout
        print(f"`{name}` (sm_{arch}):")
        for start, end, ops in _loops(sass):
            print(f"  loop {start:#07x}-{end:#07x}: {sum(ops.values())} instructions, "
                  f"FFMA {ops['FFMA']}, HMMA {ops['HMMA']}, LDS {ops['LDS']}, LDSM {ops['LDSM']}, "
                  f"LDG {ops['LDG']}, IMAD {ops['IMAD']}")


def _loops(sass):
    """[(start, end, Counter of opcodes)] of each backward branch's loop in nvdisasm's text."""
    code, label_at, pending = [], {}, []
    for line in sass.splitlines():
        s = line.strip()
        m = re.match(r"(\.L_x_\d+):", s)
        if m:
            pending.append(m.group(1))
            continue
        m = re.match(r"/\*([0-9a-f]{4,})\*/\s+(.*?);", s)
        if m:
            addr = int(m.group(1), 16)
            for p in pending:
                label_at[p] = addr
            pending = []
            words = m.group(2).split()
            op = words[1] if words[0].startswith("@") else words[0]
            code.append((addr, op.split(".")[0], m.group(2)))
    out = []
    for addr, op, text in code:
        m = re.search(r"BRA\s+(?:`\()?(\.L_x_\d+)", text)
        if op == "BRA" and m and label_at.get(m.group(1), addr + 1) <= addr:
            start = label_at[m.group(1)]
            out.append((start, addr, collections.Counter(o for a, o, _ in code
                                                         if start <= a <= addr)))
    return out


if __name__ == "__main__":
    main()
