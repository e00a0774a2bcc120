"""NVRTC for the tests that compile the CUDA source without a GPU: CuPy's where CuPy is
installed, else the `nvidia-cuda-nvrtc` wheel's library (the [dev] extra) through ctypes; and
ptxas (the `nvidia-cuda-nvcc` wheel) for the registers and spills of the compiled kernels."""
from __future__ import annotations

import glob
import importlib.util
import re
import subprocess
import tempfile
from pathlib import Path


def _nvidia_paths(pattern):
    spec = importlib.util.find_spec("nvidia")
    return sorted(p for d in (spec.submodule_search_locations if spec else [])
                  for p in glob.glob(f"{d}/{pattern}"))


class _WheelNVRTC:
    """NVRTC from the `nvidia-cuda-nvrtc` wheel (the [dev] extra), called through ctypes: the whole
    CUDA source compiles to PTX on a machine with no GPU and no CuPy. The same calls as CuPy's
    compiler (create, add name expressions, compile, lowered names, PTX)."""

    def __init__(self):
        import ctypes
        paths = [p for p in _nvidia_paths("cu*/lib/libnvrtc.so.*") +
                 _nvidia_paths("cuda_nvrtc/lib/libnvrtc.so.*") if "builtins" not in p and "alt" not in p]
        if not paths:
            raise ImportError("no libnvrtc in the nvidia-cuda-nvrtc wheel")
        self.ct, self.lib = ctypes, ctypes.CDLL(sorted(paths)[-1])

    def compile(self, src, names, options):
        ct, lib = self.ct, self.lib
        prog = ct.c_void_p()
        assert lib.nvrtcCreateProgram(ct.byref(prog), src.encode(), b"numr.cu", 0, None, None) == 0
        try:
            for n in names:
                assert lib.nvrtcAddNameExpression(prog, n.encode()) == 0
            opts = (ct.c_char_p * len(options))(*[o.encode() for o in options])
            rc = lib.nvrtcCompileProgram(prog, len(options), opts)
            size = ct.c_size_t()
            if rc != 0:
                lib.nvrtcGetProgramLogSize(prog, ct.byref(size))
                log = ct.create_string_buffer(size.value)
                lib.nvrtcGetProgramLog(prog, log)
                raise RuntimeError(log.value.decode(errors="replace"))
            lib.nvrtcGetPTXSize(prog, ct.byref(size))
            ptx = ct.create_string_buffer(size.value)
            lib.nvrtcGetPTX(prog, ptx)
            mapping = {}
            for n in names:
                low = ct.c_char_p()
                assert lib.nvrtcGetLoweredName(prog, n.encode(), ct.byref(low)) == 0
                mapping[n] = low.value.decode()
            return ptx.value.decode(), mapping
        finally:
            lib.nvrtcDestroyProgram(ct.byref(prog))


class _CupyNVRTC:
    def __init__(self):
        from cupy.cuda import compiler
        self.compiler = compiler

    def compile(self, src, names, options):
        ptx, mapping = self.compiler._NVRTCProgram(src, "numr.cu", name_expressions=names).compile(
            options)
        return (ptx.decode() if isinstance(ptx, bytes) else ptx), mapping


_NVRTC = []


def nvrtc():
    """CuPy's NVRTC where CuPy is installed, else the wheel's; None where neither works."""
    if not _NVRTC:
        for make in (_CupyNVRTC, _WheelNVRTC):
            try:
                c = make()
                c.compile("__global__ void k() {}", [], ("--std=c++17", "-arch=compute_80"))
                _NVRTC.append(c)
                break
            except Exception:
                continue
        else:
            _NVRTC.append(None)
    return _NVRTC[0]


def ptxas():
    """The path of the wheel's ptxas, or None."""
    found = _nvidia_paths("cu*/bin/ptxas") + _nvidia_paths("cuda_nvcc/bin/ptxas")
    return found[-1] if found else None


def kernel_resources(src, names, arch, options=("--std=c++17",), stack=False):
    """{name expression: (registers, spill store bytes, spill load bytes)} of the kernels `names`
    of `src` compiled for sm_<arch> (NVRTC to PTX, ptxas -v to the machine code); with `stack`,
    the stack frame's bytes after them."""
    ptx, mapping = nvrtc().compile(src, names, tuple(options) + (f"-arch=compute_{arch}",))
    lowered = {v: k for k, v in mapping.items()}
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "k.ptx"
        path.write_text(ptx)
        log = subprocess.run([ptxas(), f"-arch=sm_{arch}", "-v", str(path), "-o",
                              str(path.with_suffix(".cubin"))], capture_output=True, text=True,
                             check=True).stderr
    out, cur, spills = {}, None, (0, 0)
    for line in log.splitlines():
        m = re.search(r"Compiling entry function '(\w+)'", line)
        if m:
            cur = lowered.get(m.group(1))
        elif cur and "spill stores" in line:
            spills = tuple(int(v) for v in re.findall(r"(\d+) bytes spill (?:stores|loads)", line))
            if stack:
                spills += (int(re.search(r"(\d+) bytes stack frame", line).group(1)),)
        elif cur and "Used" in line and "registers" in line:
            out[cur] = (int(re.search(r"Used (\d+) registers", line).group(1)),) + spills
    return out
