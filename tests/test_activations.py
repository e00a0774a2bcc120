"""erf (nr.erf, behind exact GELU) within its stated error bounds, against math.erf."""
import math
import os
import subprocess
import sys

import numpy as np
import pytest

import numr_web as nr


def _ulps(got, want, dtype):
    want = want.astype(dtype)
    return np.abs(got.astype(np.float64) - want.astype(np.float64)) / np.spacing(
        np.maximum(np.abs(want), np.finfo(dtype).tiny)).astype(np.float64)


def test_erf_float64_within_1ulp():
    x = np.concatenate([np.linspace(-7, 7, 20001), [0.0, 1e-300, -1e-12, 3.0, 27.0, -30.0]])
    want = np.array([math.erf(v) for v in x])
    assert _ulps(nr.erf(nr.tensor(x)).numpy(), want, np.float64).max() <= 1


@pytest.mark.parametrize("device,ulps", [("cpu", 1), ("webgpu", 2)])
def test_erf_float32_within_stated_ulps(device, ulps):
    """cpu: <= 1 ulp (numr_web/vocab/_erf.py); webgpu: <= 2 ulp (shaders/act.wgsl, erf_s)."""
    x = np.concatenate([np.linspace(-6, 6, 40001), [0.0, 1e-30, 0.5, 3.0, 3.0001, 10.0]]).astype(np.float32)
    want = np.array([math.erf(v) for v in x.astype(np.float64)])
    got = nr.erf(nr.tensor(x, device=device))
    assert got.dtype == nr.float32
    assert _ulps(got.numpy(), want, np.float32).max() <= ulps


def test_erf_float32_cpu_sweep_and_specials():
    """The cpu's float32 erf (a table and a cubic in float64, rounded once) within 1 ulp of
    math.erf over a sweep of float32 bit patterns from 0 to 4.5 (every 1499th, both signs: each
    grid interval many times, the clip at 3.9375 and past it) and GEMM-sized values; erf(-0.0)
    keeps its sign, +-inf give +-1, NaN stays NaN."""
    top = int(np.array([4.5], np.float32).view(np.int32)[0])
    sweep = np.arange(0, top, 1499, dtype=np.int32).view(np.float32)
    wide = (np.random.default_rng(0).standard_normal(200000) * 30).astype(np.float32)
    x = np.concatenate([sweep, -sweep, wide, np.nextafter(np.float32(3.9375), np.float32([0, 9]))])
    want = np.array([math.erf(v) for v in x.astype(np.float64)])
    got = nr.erf(nr.tensor(x)).numpy()
    assert got.dtype == np.float32
    assert _ulps(got, want, np.float32).max() <= 1
    sp = nr.erf(nr.tensor(np.array([0.0, -0.0, np.inf, -np.inf, np.nan, 1e-45], np.float32)))
    sp = sp.numpy()
    assert list(np.signbit(sp[:2])) == [False, True] and list(sp[2:4]) == [1.0, -1.0]
    assert np.isnan(sp[4]) and sp[5] > 0


def _gelu_tanh_mp(t):
    import mpmath
    mpmath.mp.prec = 120
    t = mpmath.mpf(float(t))
    c = mpmath.sqrt(2 / mpmath.pi)
    return t / (1 + mpmath.exp(-2 * c * (t + mpmath.mpf("0.044715") * t ** 3)))


def _gelu_tanh_dz_mp(t):
    """d/dz z sigmoid(2u) = s + 2 z u' s (1 - s), u = c (z + a z³), u' = c (1 + 3 a z²)."""
    import mpmath
    mpmath.mp.prec = 120
    t = mpmath.mpf(float(t))
    c, a = mpmath.sqrt(2 / mpmath.pi), mpmath.mpf("0.044715")
    e = mpmath.exp(-2 * c * (t + a * t ** 3))
    s, q = 1 / (1 + e), e / (1 + e)
    return s + 2 * t * c * (1 + 3 * a * t ** 2) * s * q


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_gelu_tanh_cpu_tails_against_mpmath(dtype):
    """cpu gelu_tanh and its gradient far into the lower tail (y = z sigmoid(2u) down to the
    smallest values the dtype holds) and across blocks of a large array, against mpmath.
    float32 is evaluated in float64 and rounded once (2 ulp); float64 rounds u = c (z + a z³)
    itself, an error of ~|2u| ulp in exp(2u) (torch's float64 formula gives 0 there)."""
    pts = [-30.0, -20.0, -12.5, -11.0, -9.25, -3.0, -0.5, 0.25, 2.0, 9.0] if dtype == np.float64 \
        else [-11.0, -10.0, -9.25, -6.0, -3.0, -0.5, 0.25, 2.0, 9.0, 30.0]
    z = np.tile(np.array(pts, dtype), 20000)                  # > 2 blocks of the cpu path
    x = nr.tensor(z, requires_grad=True)
    y = nr.gelu(x, approximate="tanh")
    y.sum().backward()
    want = np.array([float(_gelu_tanh_mp(t)) for t in pts])
    dwant = np.array([float(_gelu_tanh_dz_mp(t)) for t in pts])
    got, dgot = y.numpy().reshape(-1, len(pts)), x.grad.numpy().reshape(-1, len(pts))
    assert (got == got[0]).all() and (dgot == dgot[0]).all()    # every block alike
    t = np.array(pts)
    ulps = 2.0 if dtype == np.float32 else 4 + 1.6 * np.abs(t + 0.044715 * t ** 3)
    assert (_ulps(got[0], want, dtype) <= ulps).all(), (got[0], want)
    assert (_ulps(dgot[0], dwant, dtype) <= 4 * ulps).all(), (dgot[0], dwant)


def test_gelu_tanh_cpu_blocks_match_one_call():
    """The cpu's blocked float32 path (large arrays, spread over threads) gives exactly what one
    call on each value alone gives, NaN, +-inf, the float32 extremes and signed zeros included."""
    from numr_web.vocab import activations as A
    special = np.array([np.nan, np.inf, -np.inf, -3e38, 3e38, -0.0, 0.0, 1e-45, -1e-45, -11.5,
                        -12.5, -21.9, -22.5, 21.9, 22.5, -0.75], np.float32)
    rng = np.random.default_rng(0)
    z = (rng.standard_normal(300_001) * 6).astype(np.float32)
    at = rng.choice(z.size, 64 * special.size, replace=False)
    z[at] = np.tile(special, 64)
    dy = rng.standard_normal(z.size).astype(np.float32)
    one = {name: np.concatenate([f(z[i:i + 1]) for i in range(0, z.size, 997)])
           for name, f in (("fwd", lambda v: A._gelu_tanh_fwd(np, v.copy())),
                           ("d1", lambda v: A._gelu_tanh_d1(np, np.ones_like(v), v)))}
    y, d = A._gelu_tanh_fwd(np, z.copy()), A._gelu_tanh_d1(np, np.ones_like(z), z)
    np.testing.assert_array_equal(y[::997], one["fwd"])
    np.testing.assert_array_equal(d[::997], one["d1"])
    want_y = np.array([A._gelu_tanh_fwd(np, v.reshape(1).copy())[0] for v in special])
    want_d = np.array([A._gelu_tanh_d1(np, np.ones(1, np.float32), v.reshape(1))[0] for v in special])
    np.testing.assert_array_equal(y[at], np.tile(want_y, 64))          # NaN == NaN here
    np.testing.assert_array_equal(np.signbit(y[at]), np.tile(np.signbit(want_y), 64))
    np.testing.assert_array_equal(d[at], np.tile(want_d, 64))
    dd = A._gelu_tanh_d1(np, dy, z)
    np.testing.assert_array_equal(dd[::997], np.concatenate(
        [A._gelu_tanh_d1(np, dy[i:i + 1], z[i:i + 1]) for i in range(0, z.size, 997)]))
    assert np.isnan(want_y[2]) and want_y[1] == np.inf and np.signbit(want_y[3]) and want_y[3] == 0


_FORK_CHILD = """
import multiprocessing as mp
import numpy as np
import numr_web as nr

def gelu_sum():
    x = nr.tensor(np.linspace(-5, 5, 300_000, dtype=np.float32))   # several blocks: the pool
    return float(nr.gelu(x, approximate="tanh").sum().item())

def child(q):
    q.put(gelu_sum())

if __name__ == "__main__":
    want = gelu_sum()                                  # the parent's pool exists now
    ctx = mp.get_context("fork")
    q = ctx.Queue()
    p = ctx.Process(target=child, args=(q,))
    p.start()
    got = q.get(timeout=60)
    p.join(30)
    assert got == want, (got, want)
    print("ok")
"""


@pytest.mark.skipif(not hasattr(os, "fork"), reason="no fork on this platform")
def test_cpu_activations_work_in_a_forked_child():
    """A process forked after numr's cpu kernels used their worker pool (multiprocessing's default
    on Linux) computes the same values instead of waiting forever on the parent's threads."""
    r = subprocess.run([sys.executable, "-c", _FORK_CHILD], capture_output=True, text=True,
                       timeout=120)
    assert r.returncode == 0 and r.stdout.strip() == "ok", r.stderr[-2000:]
