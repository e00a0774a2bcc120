"""webgpu GEMMs whose output has few tiles and whose K is long (a weight gradient x.T @ dz, K =
tokens) run as batched slices of K summed after: the results against float64, and the Linear's
weight gradient through that path. The split is off under a loop budget (Mesa llvmpipe's default),
so these tests make a backend without one (the loop_budget knob) and keep K small enough for
lavapipe's per-invocation loop limit."""
import numpy as np
import pytest

import numr_web as nr


@pytest.fixture(scope="module")
def be():
    if "webgpu" not in nr.available_devices():
        pytest.skip("no webgpu adapter")
    from numr_web.backends.webgpu.backend import WebGPUBackend
    return WebGPUBackend(loop_budget=0)


def _gemm(be, a, b, transpose_a):
    x = nr.tensor(a.T.copy() if transpose_a else a, device="webgpu")._data
    ha = be.permute(x, (1, 0)) if transpose_a else x
    hb = nr.tensor(b, device="webgpu")._data
    before = be.info()["dispatches"].get("reduce.reduce_thread", 0) + \
        be.info()["dispatches"].get("reduce.reduce_wg", 0)
    out = be.matmul(ha, hb)
    after = be.info()["dispatches"].get("reduce.reduce_thread", 0) + \
        be.info()["dispatches"].get("reduce.reduce_wg", 0)
    got = np.frombuffer(be.to_bytes(out), np.float32).reshape(a.shape[0], b.shape[1])
    return got, after > before


@pytest.mark.parametrize("M, N, K, transpose_a, split", [
    (64, 96, 4096, True, True),       # a weight gradient's layout (a column-major view)
    (40, 52, 2048, False, True),      # row-major, sizes off the tile
    (128, 64, 8192, True, True),
    (64, 64, 256, False, False),      # K too short to split
])
def test_split_k_matches_float64(be, M, N, K, transpose_a, split):
    rng = np.random.default_rng(M + K)
    a = rng.normal(size=(M, K)).astype(np.float32)
    b = rng.normal(size=(K, N)).astype(np.float32)
    got, did_split = _gemm(be, a, b, transpose_a)
    assert did_split == split
    want = a.astype(np.float64) @ b.astype(np.float64)
    size = np.abs(a).astype(np.float64) @ np.abs(b).astype(np.float64)
    # float32 products and sums over K: within K roundings of the terms' size (any order)
    err = np.abs(got - want) / (size * 2.0 ** -24)
    assert err.max() <= K


_LINEAR = """
import json, numpy as np, numr_web as nr
rng = np.random.default_rng(1)
x = rng.normal(size=(4, 1024, 48)).astype(np.float32)          # 4096 tokens, 48 -> 40
w = rng.normal(size=(48, 40)).astype(np.float32)
g = rng.normal(size=(4, 1024, 40)).astype(np.float32)
ws = nr.tensor(w, device="webgpu", requires_grad=True)
y = nr.matmul_bias_activation(nr.tensor(x, device="webgpu"), ws, None, activation="tanh")
y.backward(nr.tensor(g, device="webgpu"))
d = nr.get_backend("webgpu").info()["dispatches"]
print(json.dumps({"grad": ws.grad.numpy().tolist(),
                  "reductions": sum(v for k, v in d.items() if k.startswith("reduce."))}))
"""


def test_linear_weight_gradient_through_split_k(be):
    """The Linear's backward (public API) with the loop budget off (NUMR_WEBGPU_LOOP_BUDGET=0, read
    when the backend starts: a fresh process)."""
    import json
    import os
    import subprocess
    import sys
    env = dict(os.environ, NUMR_WEBGPU_LOOP_BUDGET="0")
    out = subprocess.run([sys.executable, "-c", _LINEAR], env=env, capture_output=True,
                         text=True, check=True).stdout
    res = json.loads(out.strip().splitlines()[-1])
    assert res["reductions"] == 1                 # the weight gradient's sum over the slices
    rng = np.random.default_rng(1)
    x = rng.normal(size=(4, 1024, 48))
    w = rng.normal(size=(48, 40)).astype(np.float32).astype(np.float64)
    g = rng.normal(size=(4, 1024, 40)).astype(np.float32).astype(np.float64)
    x = x.astype(np.float32).astype(np.float64)
    dz = g * (1 - np.tanh(x @ w) ** 2)
    want = x.reshape(-1, 48).T @ dz.reshape(-1, 40)
    size = np.abs(x.reshape(-1, 48)).T @ np.abs(dz.reshape(-1, 40))
    err = np.abs(np.array(res["grad"]) - want) / (size * 2.0 ** -24)
    assert err.max() <= 16         # dz rounded in float32 (tanh'), then the sums over K
