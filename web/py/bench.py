# Benchmark page driver (web/bench.html): numr_web's fused Linear forward + backward on webgpu.
import array

import js
from pyodide.ffi import to_js

import numr_web as nr


def _f32(jsarr):
    a = array.array("f")
    a.frombytes(jsarr.to_bytes())
    return a


def _flat(v, out):
    if isinstance(v, list):
        for e in v:
            _flat(e, out)
    else:
        out.append(v)
    return out


def _to_js_f32(values):
    a = array.array("f", values)
    t = js.Float32Array.new(len(a))
    t.assign(a)
    return t


_S = {}


def bench_prepare(arg, emit=None, should_stop=None):
    """arg: {cfg, A, W, B, DY} (Float32Arrays from the page): upload the inputs as webgpu tensors
    for bench_iter."""
    cfg, A, W, B, DY = (getattr(arg, k) for k in ("cfg", "A", "W", "B", "DY"))
    cfg = cfg.to_py()
    m, k, n = int(cfg["m"]), int(cfg["k"]), int(cfg["n"])
    dev = cfg.get("device", "webgpu")

    def leaf(jsarr, *shape):
        return nr.tensor(_f32(jsarr), device=dev).reshape(*shape).detach().requires_grad_()

    _S.clear()
    _S.update(a=leaf(A, m, k), w=leaf(W, k, n), b=leaf(B, n), act=cfg["activation"],
              dy=nr.tensor(_f32(DY), device=dev).reshape(m, n), y=None)


async def bench_iter(arg=None, emit=None, should_stop=None):
    """One timed iteration (ms): forward + backward, finished by reading the bias gradient back."""
    a, w, b = _S["a"], _S["w"], _S["b"]
    a.grad = w.grad = b.grad = None
    t0 = js.performance.now()
    y = nr.matmul_bias_activation(a, w, b, activation=_S["act"])
    y.backward(_S["dy"])
    await b.grad.read()                     # in-order queue: waits for the whole iteration
    t = js.performance.now() - t0
    _S["y"] = y
    return t


async def bench_outputs(arg=None, emit=None, should_stop=None):
    """y and the three gradients of the last iteration, as Float32Arrays."""
    res = {}
    for name, t in (("y", _S["y"]), ("da", _S["a"].grad), ("dw", _S["w"].grad), ("db", _S["b"].grad)):
        res[name] = _to_js_f32(_flat(await t.read(), []))
    return to_js(res, dict_converter=js.Object.fromEntries)
