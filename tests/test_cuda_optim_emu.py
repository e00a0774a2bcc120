"""nn.cu's optimizer kernels checked without a GPU: compiled with g++ against tests/cuda_emu.h
and launched on numpy arrays, against the updates written here in float32 numpy in torch's
order of operations (each operation rounded on its own, as the kernel's __f*_rn). Adam / AdamW
(adam_f32): every decay kind, both of torch.lerp's forms, a first step (no moments yet) and a later one, the
step count on the device, and GradScaler's flag, which leaves the parameter and its moments as
they were (moments 0 on a first step) instead of updating them. SGD (sgd_f32): below."""
import math
import shutil
from pathlib import Path

import numpy as np
import pytest

from numr_web.backends.cuda import nn as K

from helpers import emu_compile, emu_run

CXX = shutil.which("g++")
pytestmark = pytest.mark.skipif(CXX is None, reason="g++ is not installed")
NN_CU = Path(K.__file__).with_name("nn.cu")
DECAYS = {"none": 0, "l2": 1, "decoupled": 2}
CASES = [(d, first, dev, hi) for d in DECAYS for first in (True, False) for dev in (False, True)
         for hi in (False, True)]


def _kernel_source():
    text = NN_CU.read_text()
    start = text.index("#define ADAM_DECAY_NONE")
    end = text.index("// -- scatter-add of whole rows")
    return text[start:end]


_compile = emu_compile


def _run(lib, i, args):
    emu_run(lib, i, 2, 64, args)                # 2 blocks of 64 threads over 300 elements


@pytest.fixture(scope="module")
def lib(tmp_path_factory):
    names = [f"adam_f32<{DECAYS[d]}, {str(first).lower()}, {str(dev).lower()}, {str(hi).lower()}>"
             for d, first, dev, hi in CASES]
    return _compile(tmp_path_factory.mktemp("adam_emu"), _kernel_source(), names)


def _launch(lib, case, args):
    _run(lib, CASES.index(case), args)


def _reference(p, g, m, v, decay, factor, w, b2, eps, ss, bc):
    f32 = np.float32
    base = p * f32(factor) if decay == "decoupled" else p
    if decay == "l2":
        g = g + p * f32(factor)
    m0 = np.zeros_like(p) if m is None else m
    m = m0 + (g - m0) * f32(w) if abs(w) < 0.5 else g - (g - m0) * f32(1 - w)
    gg = (g * f32(1 - b2)) * g
    v = gg if v is None else v * f32(b2) + gg
    den = np.sqrt(v) / f32(bc) + f32(eps)
    return base - (m * f32(ss)) / den, m, v


@pytest.mark.parametrize("case", CASES, ids=["-".join(map(str, c)) for c in CASES])
@pytest.mark.parametrize("skip", [False, True])
def test_adam_kernel_matches_the_composed_update(lib, case, skip):
    decay, first, dev, hi = case
    r = np.random.default_rng(CASES.index(case))
    n = 300
    p, g = (r.normal(size=n).astype(np.float32) for _ in range(2))
    m = None if first else r.normal(size=n).astype(np.float32)
    v = None if first else np.abs(r.normal(size=n)).astype(np.float32)
    b1, b2, eps, lr, t = 0.9, 0.999, 1e-8, 1e-2, 7
    w = 0.6 if hi else 1 - b1                     # torch.lerp's second form from 0.5 on
    factor = 1 - lr * 0.1 if decay == "decoupled" else 0.01
    if dev:       # the corrections in float32 on the device: 1 - b^t = -expm1(t ln b)
        f32 = np.float32
        ss = float(f32(lr) / -np.expm1(f32(t) * f32(math.log(b1))))
        bc = float(np.sqrt(-np.expm1(f32(t) * f32(math.log(b2)))))
    else:
        ss, bc = lr / (1 - b1 ** t), math.sqrt(1 - b2 ** t)
    out = [np.full(n, np.nan, np.float32) for _ in range(3)]
    dstep = np.array([t], np.float32)
    found = np.array([1.0 if skip else 0.0], np.float32)
    _launch(lib, case, [p, g, 0 if first else m, 0 if first else v, *out,
                        dstep if dev else 0, found if skip or dev else 0, n, float(factor),
                        float(w), float(1 - w), b2, 1 - b2, eps, 0.0 if dev else ss,
                        0.0 if dev else bc, lr, math.log(b1), math.log(b2)])
    if skip:
        want = (p, np.zeros(n, np.float32) if first else m, np.zeros(n, np.float32) if first else v)
    else:
        want = _reference(p, g, m, v, decay, factor, w, b2, eps, ss, bc)
    for name, got, exp in zip(("p", "m", "v"), out, want):
        if dev and not skip and name == "p":
            # the host's expm1f and numpy's may round the corrections an ulp apart: a few
            # float32 ulps of the update's size, plus one of p
            upd = np.abs(want[1] * np.float32(ss) / (np.sqrt(want[2]) / np.float32(bc) + 1e-8))
            tol = 4 * 2.0 ** -24 * upd + np.spacing(np.abs(exp))
            assert (np.abs(got - exp) <= tol).all(), name
        else:
            np.testing.assert_array_equal(got, exp, err_msg=name)


# -- SGD (sgd_f32): plain, weight decay, maximize, momentum on a first step (the buffer starts as
# the decayed gradient) and a later one, dampening and Nesterov
SGD_CASES = [  # (first step, weight decay, momentum, dampening, nesterov, maximize)
    (True, 0.0, 0.0, 0.0, False, False), (False, 0.01, 0.0, 0.0, False, True),
    (True, 0.01, 0.9, 0.0, False, False), (False, 0.01, 0.9, 0.0, False, False),
    (False, 0.0, 0.9, 0.25, False, True), (False, 0.05, 0.8, 0.0, True, False),
    (True, 0.05, 0.8, 0.0, True, True)]


@pytest.fixture(scope="module")
def sgd_lib(tmp_path_factory):
    text = NN_CU.read_text()
    src = text[text.index("#define SGD_MAXIMIZE"):text.index("// -- scatter-add of whole rows")]
    return _compile(tmp_path_factory.mktemp("sgd_emu"), src, ["sgd_f32<false>", "sgd_f32<true>"])


def _sgd_reference(p, g, buf, wd, mom, damp, nesterov, maximize, lr):
    f32 = np.float32
    if maximize:
        g = -g
    if wd:
        g = g + p * f32(wd)
    if mom:
        buf = g.copy() if buf is None else buf * f32(mom) + (g * f32(1 - damp) if damp else g)
        g = g + buf * f32(mom) if nesterov else buf
    return p - g * f32(lr), buf


@pytest.mark.parametrize("case", SGD_CASES)
def test_sgd_kernel_matches_the_composed_update(sgd_lib, case):
    first, wd, mom, damp, nesterov, maximize = case
    r = np.random.default_rng(SGD_CASES.index(case))
    n, lr = 300, 0.05
    p, g, buf = (r.normal(size=n).astype(np.float32) for _ in range(3))
    flags = sum(K.SGD_FLAGS[k] for k, on in (("maximize", maximize), ("decay", wd),
                                             ("momentum", mom), ("damp", damp),
                                             ("nesterov", nesterov)) if on)
    po, bo = np.full(n, np.nan, np.float32), np.full(n, np.nan, np.float32)
    args = [p, g, 0 if first else buf, po, bo, n, flags, wd, mom, 1 - damp, lr]
    _run(sgd_lib, int(first), args)
    want_p, want_b = _sgd_reference(p, g, None if first else buf, wd, mom, damp, nesterov,
                                    maximize, lr)
    np.testing.assert_array_equal(po, want_p)
    if mom:
        np.testing.assert_array_equal(bo, want_b)
    else:
        assert np.isnan(bo).all()               # no buffer written without momentum
