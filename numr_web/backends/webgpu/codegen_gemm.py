"""Repeated WGSL of the GEMM kernels, generated where shaders/matmul.wgsl says
`// @generate NAME` (a line of its own; its indentation is the generated text's).

  * `gemm_v4_ksteps`: the K-slice of gemm_v4 unrolled, one block per k of the slice (the driver
    does not unroll Naga's bounded loop; the unrolled slice is the faster one on the H200:
    docs/benchmarks.md). Block k reads
    its a slot as ty ^ 2 (k / 4) (the tile's XOR swizzle: the constants ty0, ty2, ty4, ty6 of
    gemm_v4, b's likewise tx0..tx6) and does the 8 x 4 register block's multiply-adds, the
    V4_WIDE half (accumulators 8..15, the columns + 64) under `if (V4_WIDE)`.

kernels.py expands the markers when it assembles a module; `numr-web shaders --dump` prints the
generated text. Nothing here touches a GPU.
"""
from __future__ import annotations

import re

from ...errors import KernelError

V4_KSLICE = 16          # k per K-slice of gemm_v4 (`k0 + 16u` in matmul.wgsl)
V4_SWIZZLE_ROWS = 4     # k rows that share one swizzle constant (slot4: g ^ 2 (k / 4))
V4_A_QUADS = ("a0", "a1")          # a's vec4s: rows 4ty.., 64 + 4ty..
V4_B_QUADS = ("b0", "b1")          # b's vec4s: columns 4tx.., 64 + 4tx.. (b1: V4_WIDE only)
_LANES = "xyzw"
_STEP = "    "

MARKER = re.compile(r"^([ \t]*)// @generate ([A-Za-z0-9_]+)[ \t]*$", re.M)


def _mads(b, first, indent):
    """acc[first + 4 i + c] += a_i[c] * b for both a vec4s, lanes c = x, y, z, w."""
    lines = []
    for i, a in enumerate(V4_A_QUADS):
        for c, lane in enumerate(_LANES):
            j = first + 4 * i + c
            lines.append(f"{indent}acc[{j}] = mad4({a}.{lane}, {b}, acc[{j}]);")
    return lines


def gemm_v4_ksteps(indent=""):
    """The unrolled k loop of gemm_v4's K-slice (inside `for (var k4 ...)`, reading `base`)."""
    inner = indent + _STEP
    half = len(V4_A_QUADS) * len(_LANES)          # accumulators per b vec4
    lines = []
    for k in range(V4_KSLICE):
        s = 2 * (k // V4_SWIZZLE_ROWS)
        lines += [f"{indent}{{",
                  f"{indent}let k = k4 + {k}u;",
                  f"{indent}let a0 = As4[base + k * 32u + ty{s}];",
                  f"{indent}let a1 = As4[base + k * 32u + 16u + ty{s}];",
                  f"{indent}let b0 = Bs4[base + k * 32u + tx{s}];"]
        lines += _mads(V4_B_QUADS[0], 0, indent)
        lines += [f"{indent}if (V4_WIDE) {{",
                  f"{inner}let b1 = Bs4[base + k * 32u + 16u + tx{s}];"]
        lines += _mads(V4_B_QUADS[1], half, inner)
        lines += [f"{indent}}}", f"{indent}}}"]
    return "\n".join(lines)


# section name -> (the kernel file that asks for it, its generator)
SECTIONS = {"gemm_v4_ksteps": ("matmul.wgsl", gemm_v4_ksteps)}


def expand(text, kernel_file):
    """`text` (kernel_file's) with every `// @generate NAME` line replaced by section NAME's code."""
    def section(m):
        where, fn = SECTIONS.get(m.group(2), (None, None))
        if where != kernel_file:
            raise KernelError(f"{kernel_file}: no generated section {m.group(2)!r} for it; "
                              f"known: {', '.join(f'{n} ({w})' for n, (w, _) in SECTIONS.items())}")
        return fn(m.group(1))
    return MARKER.sub(section, text)


def dump(kernel_file=None):
    """The generated sections of `kernel_file` (of every file when None), each after a line naming it."""
    return "\n".join(f"// generated section {n} of {w} (codegen_gemm.py) - do not edit\n{fn()}\n"
                     for n, (w, fn) in SECTIONS.items() if kernel_file in (None, w))
