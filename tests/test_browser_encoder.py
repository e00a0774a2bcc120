"""The browser adapter's submit encoder: pack_dispatches (Python) flattens a submit's dispatches,
encode.js (JavaScript, one call a submit) rebuilds them. Both halves run here: the packing in
Python, the JS in Node against a fake GPUDevice that records every call; the recorded calls must be
the ones the dispatch list asks for, written out in this test from the dispatch list itself."""
import json
import shutil
import subprocess
from importlib.resources import files

import pytest

from numr_web.backends.webgpu import adapter_browser as AB
from numr_web.backends.webgpu.adapter import Binding, Dispatch
from numr_web.backends.webgpu.adapter_browser import ENCODER_PARAMS, pack_dispatches
from numr_web.errors import KernelError

NODE = shutil.which("node") or "node"     # the test command's web build needs Node as well
FAKE_DEVICE = """
const calls = [];
const device = {
  createCommandEncoder: () => ({
    beginComputePass: () => ({
      setPipeline: (p) => calls.push(["pipeline", p]),
      setBindGroup: (i, g) => calls.push(["group", i, g]),
      dispatchWorkgroups: (x, y, z) => calls.push(["dispatch", x, y, z]),
      end: () => calls.push(["end"]),
    }),
    finish: () => "commands",
  }),
  createBindGroup: (desc) => {
    if (desc.layout === failOn) throw new TypeError("bad entry");
    return {layout: desc.layout, entries: desc.entries.map(
      (e) => [e.binding, e.resource.buffer, e.resource.offset, e.resource.size])};
  },
};
const queue = {submit: (list) => calls.push(["submit", list])};
"""


class _Obj:
    """A stand-in for a JS object (pipeline, layout, buffer), passed to Node by its name."""
    def __init__(self, name):
        self.name = name


def _dispatches():
    p0, p1 = (_Obj("P0"), _Obj("L0"), "p0"), (_Obj("P1"), _Obj("L1"), "p1")
    meta, a, b = _Obj("meta"), _Obj("A"), _Obj("B")
    return [
        Dispatch(p0, [Binding(0, meta, 0, 256), Binding(1, a, 0, 4096)], (16, 1, 1), "p0"),
        Dispatch(p0, [Binding(0, meta, 256, 256), Binding(1, b, 2 ** 40, 64)], (1, 2, 3), "p0"),
        Dispatch(p1, [Binding(0, meta, 512, 256), Binding(2, a, 512, 8), Binding(3, b, 0, 4)],
                 (65535, 7), "p1"),
    ]


def _encode_in_node(dispatches, fail_on=None):
    """Run encode.js on pack_dispatches(dispatches) in Node: {"calls": [...], "error": text}."""
    pipes, layouts, bufs, nums = pack_dispatches(dispatches)
    body = (files("numr_web.backends.webgpu") / "encode.js").read_text(encoding="utf-8")
    names = [json.dumps([x.name for x in xs]) for xs in (pipes, layouts, bufs)]
    script = f"const failOn = {json.dumps(fail_on)};" + FAKE_DEVICE + f"""
const encode = new Function({", ".join(json.dumps(p) for p in ENCODER_PARAMS)}, {json.dumps(body)});
let error = null;
try {{ encode(device, queue, {names[0]}, {names[1]}, {names[2]}, new Float64Array({json.dumps(nums)})); }}
catch (e) {{ error = String(e.message); }}
console.log(JSON.stringify({{calls, error}}));
"""
    out = subprocess.run([NODE, "-e", script], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout)


def test_encode_js_replays_the_packed_dispatches():
    ds = _dispatches()
    want, last = [], None
    for d in ds:
        if d.pipeline[0] is not last:                      # a pipeline is set when it changes
            want.append(["pipeline", d.pipeline[0].name])
            last = d.pipeline[0]
        entries = [[b.index, b.buffer.name, b.offset, b.size] for b in d.bindings]
        want.append(["group", 0, {"layout": d.pipeline[1].name, "entries": entries}])
        want.append(["dispatch"] + list(d.groups) + [1] * (3 - len(d.groups)))
    want += [["end"], ["submit", ["commands"]]]
    assert _encode_in_node(ds) == {"calls": want, "error": None}


def test_encode_js_names_the_dispatch_that_failed():
    got = _encode_in_node(_dispatches(), fail_on="L1")
    assert got["error"] == "numr dispatch 2: bad entry"
    assert ["submit", ["commands"]] not in got["calls"]       # nothing submitted


def test_pack_lists_each_pipeline_and_buffer_once():
    ds = _dispatches()
    pipes, layouts, bufs, nums = pack_dispatches(ds)
    assert [p.name for p in pipes] == ["P0", "P1"] and [x.name for x in layouts] == ["L0", "L1"]
    assert [b.name for b in bufs] == ["meta", "A", "B"]
    assert len(nums) == sum(2 + 4 * len(d.bindings) + 3 for d in ds)
    assert max(nums) == 2 ** 40 and all(float(x) == x for x in nums)   # exact in a Float64Array


# -- the adapter's side, against a stand-in for Pyodide's `js` module --------------------------------
class _JsError(Exception):
    pass


class _FakeJs:
    made = []

    class Function:
        @staticmethod
        def new(*args):
            if _FakeJs.forbid:
                raise _JsError("EvalError: call to Function() blocked by CSP")
            _FakeJs.made.append(args)
            return lambda *a: None

    class Float64Array:
        @staticmethod
        def new(n):
            return type("F64", (), {"assign": lambda self, arr: setattr(self, "values", list(arr))})()

    forbid = False


@pytest.fixture
def fake_js(monkeypatch):
    monkeypatch.setattr(AB, "js", _FakeJs)
    monkeypatch.setattr(AB, "JsException", _JsError, raising=False)
    monkeypatch.setattr(AB, "to_js", lambda x: x, raising=False)
    monkeypatch.setattr(_FakeJs, "forbid", False)
    monkeypatch.delenv("NUMR_WEBGPU_JS_ENCODE", raising=False)
    return _FakeJs


def _adapter(monkeypatch):
    """A BrowserAdapter with a stand-in device, made through its constructor."""
    dev = type("Dev", (), {"queue": object(), "limits": object(), "onuncapturederror": None,
                           "features": type("F", (), {"has": lambda self, f: False})()})()
    monkeypatch.setattr(AB, "_init_sync", lambda: None)
    monkeypatch.setitem(AB._STATE, "adapter", object())
    monkeypatch.setitem(AB._STATE, "device", dev)
    monkeypatch.setattr(_FakeJs, "GPUBufferUsage", type("U", (), dict(STORAGE=1, COPY_SRC=2,
                                                                      COPY_DST=4, UNIFORM=8, MAP_READ=16)),
                        raising=False)
    monkeypatch.setattr(_FakeJs, "GPUMapMode", type("M", (), {"READ": 1}), raising=False)
    return AB.BrowserAdapter()


def test_encoder_is_made_from_encode_js_unless_turned_off_or_forbidden(fake_js, monkeypatch):
    assert AB._encoder() is not None
    args = fake_js.made[-1]
    assert args[:-1] == ENCODER_PARAMS and "createBindGroup" in args[-1]
    assert _adapter(monkeypatch).js_encode is True                      # the default
    monkeypatch.setenv("NUMR_WEBGPU_JS_ENCODE", "0")
    made = len(fake_js.made)
    ad = _adapter(monkeypatch)
    assert ad.js_encode is False                        # the knob: the Python encoder ...
    assert len(fake_js.made) == made                    # ... and no attempt to make encode.js
    ad.js_encode = True                                 # assignable at run time
    assert ad.js_encode is True and len(fake_js.made) == made + 1
    ad.js_encode = False
    ad.js_encode = True                                 # made once
    assert ad.js_encode is True and len(fake_js.made) == made + 1
    monkeypatch.delenv("NUMR_WEBGPU_JS_ENCODE")
    fake_js.forbid = True
    assert AB._encoder() is None                        # a page that forbids eval
    ad = _adapter(monkeypatch)
    ad.js_encode = True
    assert ad.js_encode is False                        # ... keeps the Python encoder


def test_submit_names_the_kernel_of_the_dispatch_that_failed(fake_js):
    scopes = []
    device = type("D", (), {"pushErrorScope": lambda self, k: scopes.append(("push", k)),
                            "popErrorScope": lambda self: scopes.append(("pop",)) or "promise"})()
    ad = AB.BrowserAdapter.__new__(AB.BrowserAdapter)
    ad.device, ad._queue, ad._pending = device, object(), []
    packed = []

    def encode(dev, queue, pipes, layouts, bufs, nums):
        packed.append(nums.values)
        raise _JsError("Error: numr dispatch 2: GPUDevice.createBindGroup: bad entry")
    ad._encode = encode
    ds = _dispatches()
    with pytest.raises(KernelError, match="kernel 'p1' failed: .*bad entry"):
        ad.submit(ds)
    assert packed == [pack_dispatches(ds)[3]]
    assert scopes.count(("pop",)) == 2 and len(ad._pending) == 2       # scopes closed
