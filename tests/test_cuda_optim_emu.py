"""optim.cu's optimizer kernels checked without a GPU: compiled with g++ against tests/cuda_emu.h
and launched on numpy arrays, against the updates written here in float32 numpy in torch's
order of operations (each operation rounded on its own, as the kernel's __f*_rn).

Each kernel updates a list of tensors in one launch (their addresses and sizes in a struct passed
by value, packed by cuda/optim.py): the lists here have tensors of several sizes, an empty one
among them, on a grid smaller than the list, so one thread walks through several tensors. Adam /
AdamW (adam_list): every decay kind, both of torch.lerp's forms, a first step (no moments yet)
and a later one, step counts on the device (a different one per tensor), and GradScaler's flag,
which leaves each parameter and its moments as they were (moments 0 on a first step). SGD
(sgd_list): below. Then cuda/optim.py's host logic (lists of more tensors than one launch takes,
first steps beside later ones, tensors the kernel does not take) with numpy standing in for CuPy."""
import ctypes
import math
import shutil
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest

from numr_web.backends.cuda import optim as K
from numr_web.backends.array_optim import ArrayOptim

from helpers import emu_compile, emu_run

CXX = shutil.which("g++")
pytestmark = pytest.mark.skipif(CXX is None, reason="g++ is not installed")
OPTIM_CU = Path(K.__file__).with_name("optim.cu")
DECAYS = {"none": 0, "l2": 1, "decoupled": 2}
CASES = [(d, first, dev, hi) for d in DECAYS for first in (True, False) for dev in (False, True)
         for hi in (False, True)]
ADAM_NAMES = [f"adam_list<{DECAYS[d]}, {str(first).lower()}, {str(dev).lower()}, "
              f"{str(hi).lower()}>" for d, first, dev, hi in CASES]
SGD_NAMES = ["sgd_list<false>", "sgd_list<true>"]
SIZES = [300, 1, 0, 77, 129]        # a list's tensors
B1, B2, EPS, LR = 0.9, 0.999, 1e-8, 1e-2
f32 = np.float32


@pytest.fixture(scope="module")
def lib(tmp_path_factory):
    sizes = ('extern "C" long long list_sizes(int k) '
             "{ return k ? sizeof(SgdList) : sizeof(AdamList); }\n")
    return emu_compile(tmp_path_factory.mktemp("optim_emu"), OPTIM_CU.read_text() + sizes,
                       ADAM_NAMES + SGD_NAMES)


def test_the_packed_lists_are_the_kernels_structs(lib):
    lib.list_sizes.restype = ctypes.c_longlong
    assert lib.list_sizes(0) == K.ADAM_LIST.size
    assert lib.list_sizes(1) == K.SGD_LIST.size


def _ptr(a):
    return 0 if a is None else a.ctypes.data


def _ends(arrays):
    return list(np.cumsum([a.size for a in arrays]))


def _adam_reference(p, g, m, v, decay, factor, w, ss, bc):
    base = p * f32(factor) if decay == "decoupled" else p
    if decay == "l2":
        g = g + p * f32(factor)
    m0 = np.zeros_like(p) if m is None else m
    m = m0 + (g - m0) * f32(w) if abs(w) < 0.5 else g - (g - m0) * f32(1 - w)
    gg = (g * f32(1 - B2)) * g
    v = gg if v is None else v * f32(B2) + gg
    den = np.sqrt(v) / f32(bc) + f32(EPS)
    return base - (m * f32(ss)) / den, m, v


def _corrections(t, dev):
    """(step size, sqrt(1 - b2^t)): in float32 as the kernel computes them from a count on the
    device (1 - b^t = -expm1(t ln b)), else the host's doubles."""
    if dev:
        ss = float(f32(LR) / -np.expm1(f32(t) * f32(math.log(B1))))
        return ss, float(np.sqrt(-np.expm1(f32(t) * f32(math.log(B2)))))
    return LR / (1 - B1 ** t), math.sqrt(1 - B2 ** t)


def _check_adam(got, want, ss, bc, loose_p):
    for name, a, b in zip(("p", "m", "v"), got, want):
        if loose_p and name == "p":
            # the host's expm1f and numpy's may round the corrections an ulp apart: a few
            # float32 ulps of the update's size, plus one of p
            upd = np.abs(want[1] * f32(ss) / (np.sqrt(want[2]) / f32(bc) + f32(EPS)))
            assert (np.abs(a - b) <= 4 * 2.0 ** -24 * upd + np.spacing(np.abs(b))).all(), name
        else:
            np.testing.assert_array_equal(a, b, err_msg=name)


@pytest.mark.parametrize("case", CASES, ids=["-".join(map(str, c)) for c in CASES])
@pytest.mark.parametrize("skip", [False, True])
def test_adam_list_kernel_matches_the_composed_update(lib, case, skip):
    decay, first, dev, hi = case
    r = np.random.default_rng(CASES.index(case))
    ps, gs = ([r.normal(size=n).astype(f32) for n in SIZES] for _ in range(2))
    ms = [None if first else r.normal(size=n).astype(f32) for n in SIZES]
    vs = [None if first else np.abs(r.normal(size=n)).astype(f32) for n in SIZES]
    counts = [7, 3, 5, 1, 12] if dev else [7] * len(SIZES)
    w = 0.6 if hi else 1 - B1                     # torch.lerp's second form from 0.5 on
    factor = 1 - LR * 0.1 if decay == "decoupled" else 0.01
    outs = [[np.full(n, np.nan, f32) for n in SIZES] for _ in range(3)]
    steps = [np.array([t], f32) for t in counts]
    found = np.array([1.0 if skip else 0.0], f32)
    ss, bc = (0.0, 0.0) if dev else _corrections(counts[0], False)
    scalars = (factor, w, 1 - w, B2, 1 - B2, EPS, ss, bc, LR, math.log(B1), math.log(B2))
    ptrs = [[_ptr(a) for a in col] for col in (ps, gs, ms, vs, *outs, steps if dev else [None] * 5)]
    data = K.pack_adam(ptrs, _ends(ps), _ptr(found) if skip or dev else 0, scalars)
    emu_run(lib, CASES.index(case), 2, 64, data)
    for i, (p, g, m, v, t) in enumerate(zip(ps, gs, ms, vs, counts)):
        got = [o[i] for o in outs]
        if skip:
            zeros = np.zeros_like(p)
            want = (p, zeros if first else m, zeros if first else v)
        else:
            want = _adam_reference(p, g, m, v, decay, factor, w, *_corrections(t, dev))
        _check_adam(got, want, *_corrections(t, dev), dev and not skip)


# -- SGD (sgd_list): plain, weight decay, maximize, momentum on a first step (the buffer starts as
# the decayed gradient) and a later one, dampening and Nesterov
SGD_CASES = [  # (first step, weight decay, momentum, dampening, nesterov, maximize)
    (True, 0.0, 0.0, 0.0, False, False), (False, 0.01, 0.0, 0.0, False, True),
    (True, 0.01, 0.9, 0.0, False, False), (False, 0.01, 0.9, 0.0, False, False),
    (False, 0.0, 0.9, 0.25, False, True), (False, 0.05, 0.8, 0.0, True, False),
    (True, 0.05, 0.8, 0.0, True, True)]


def _sgd_reference(p, g, buf, wd, mom, damp, nesterov, maximize, lr):
    if maximize:
        g = -g
    if wd:
        g = g + p * f32(wd)
    if mom:
        buf = g.copy() if buf is None else buf * f32(mom) + (g * f32(1 - damp) if damp else g)
        g = g + buf * f32(mom) if nesterov else buf
    return p - g * f32(lr), buf


def _flags(wd, mom, damp, nesterov, maximize):
    return sum(K.SGD_FLAGS[k] for k, on in (("maximize", maximize), ("decay", wd),
                                            ("momentum", mom), ("damp", damp),
                                            ("nesterov", nesterov)) if on)


@pytest.mark.parametrize("case", SGD_CASES)
def test_sgd_list_kernel_matches_the_composed_update(lib, case):
    first, wd, mom, damp, nesterov, maximize = case
    r = np.random.default_rng(SGD_CASES.index(case))
    lr = 0.05
    ps, gs, bufs = ([r.normal(size=n).astype(f32) for n in SIZES] for _ in range(3))
    po, bo = ([np.full(n, np.nan, f32) for n in SIZES] for _ in range(2))
    ptrs = [[_ptr(a) for a in col] for col in (ps, gs, [None] * 5 if first else bufs, po, bo)]
    data = K.pack_sgd(ptrs, _ends(ps), _flags(wd, mom, damp, nesterov, maximize),
                      (wd, mom, 1 - damp, lr))
    emu_run(lib, len(ADAM_NAMES) + int(first), 2, 64, data)
    for p, g, buf, got_p, got_b in zip(ps, gs, bufs, po, bo):
        want_p, want_b = _sgd_reference(p, g, None if first else buf, wd, mom, damp, nesterov,
                                        maximize, lr)
        np.testing.assert_array_equal(got_p, want_p)
        if mom:
            np.testing.assert_array_equal(got_b, want_b)
        else:
            assert np.isnan(got_b).all()            # no buffer written without momentum


# -- the host logic of cuda/optim.py, numpy standing in for CuPy ------------------------------------
class HostKernels:
    """Kernels' launch_block running the g++ build: the list's addresses are numpy arrays'."""
    launches_blocks = True

    def __init__(self, lib):
        self.lib, self.launches = lib, []

    def function(self, name, family):
        return name

    def launch_block(self, fn, blocks, threads, data, stream):
        self.launches.append(fn)
        emu_run(self.lib, (ADAM_NAMES + SGD_NAMES).index(fn), blocks, threads, bytes(data))


class HostCuda(K.CudaOptim, ArrayOptim):
    xp = np
    _sms = 1

    def __init__(self, lib):
        self.kernels = HostKernels(lib)

    @staticmethod
    def _address(a):
        return 0 if a is None else a.ctypes.data

    @staticmethod
    def _stream():
        return SimpleNamespace(ptr=0)


def _params(r, n_tensors):
    shapes = [(3, 5), (7,), (0, 4), (2, 2, 2), (33,)]
    return [r.normal(size=shapes[i % len(shapes)]).astype(f32) for i in range(n_tensors)]


def test_adam_many_takes_long_lists_mixed_steps_and_leaves_what_it_cannot(lib):
    """More tensors than one launch takes, first steps beside later ones (two kernels), a float64
    tensor (None: the optimizer composes it) and empty tensors: every update is the composed one."""
    be = HostCuda(lib)
    r = np.random.default_rng(0)
    n = K.LIST_TENSORS + 5
    ps, gs = _params(r, n), _params(r, n)
    later = [i % 3 == 0 for i in range(n)]
    ms = [r.normal(size=p.shape).astype(f32) if k else None for p, k in zip(ps, later)]
    vs = [np.abs(r.normal(size=p.shape)).astype(f32) if k else None for p, k in zip(ps, later)]
    ps[4], gs[4] = ps[4].astype(np.float64), gs[4].astype(np.float64)
    w, factor, t = 1 - B1, 1 - LR * 0.1, 4
    out = be.adam_update_many(list(zip(ps, gs, ms, vs)), "decoupled", factor, w, B2, EPS, LR, B1,
                              t)
    ss, bc = _corrections(t, False)
    assert out[4] is None
    for i in range(n):
        if i == 4:
            continue
        assert all(o.shape == ps[i].shape for o in out[i])
        want = _adam_reference(ps[i].ravel(), gs[i].ravel(), None if ms[i] is None else
                               ms[i].ravel(), None if vs[i] is None else vs[i].ravel(),
                               "decoupled", factor, w, ss, bc)
        _check_adam([o.ravel() for o in out[i]], want, ss, bc, False)
    firsts = sum(1 for i in range(n) if not later[i] and i != 4 and ps[i].size)
    assert len(be.kernels.launches) == -(-firsts // K.LIST_TENSORS) + 1


def test_adam_many_with_counts_on_the_device_and_the_scalers_flag(lib):
    be = HostCuda(lib)
    r = np.random.default_rng(1)
    ps, gs = _params(r, 6), _params(r, 6)
    steps = [np.array(float(t), f32) for t in (1, 2, 3, 4, 5, 6)]
    items = [(p, g, None, None) for p, g in zip(ps, gs)]
    out = be.adam_update_many(items, None, 0.0, 1 - B1, B2, EPS, LR, B1, steps)
    for (p, g, _, _), o, t in zip(items, out, (1, 2, 3, 4, 5, 6)):
        ss, bc = _corrections(t, True)
        want = _adam_reference(p.ravel(), g.ravel(), None, None, "none", 0.0, 1 - B1, ss, bc)
        _check_adam([a.ravel() for a in o], want, ss, bc, True)
    skipped = be.adam_update_many(items, None, 0.0, 1 - B1, B2, EPS, LR, B1, 3,
                                  found=np.array(1.0, f32))
    for (p, _, _, _), (po, mo, vo) in zip(items, skipped):
        np.testing.assert_array_equal(po, p)
        assert not mo.any() and not vo.any()


def test_sgd_many_matches_the_composed_update(lib):
    be = HostCuda(lib)
    r = np.random.default_rng(2)
    n = K.LIST_TENSORS + 2
    ps, gs = _params(r, n), _params(r, n)
    bufs = [r.normal(size=p.shape).astype(f32) if i % 2 else None for i, p in enumerate(ps)]
    out = be.sgd_update_many(list(zip(ps, gs, bufs)), 0.01, 0.9, 0.0, True, False, 0.1)
    for p, g, buf, (po, bo) in zip(ps, gs, bufs, out):
        want_p, want_b = _sgd_reference(p, g, buf, 0.01, 0.9, 0.0, True, False, 0.1)
        np.testing.assert_array_equal(po, want_p)
        np.testing.assert_array_equal(bo, want_b)
    plain = be.sgd_update(ps[0], gs[0], None, 0.0, 0.0, 0.0, False, False, 0.1)
    np.testing.assert_array_equal(plain[0], ps[0] - gs[0] * f32(0.1))
    assert plain[1] is None
