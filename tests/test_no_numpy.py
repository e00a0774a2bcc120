"""The browser has no numpy: the engine, the webgpu backend, autograd, nn and the data loader must
run without it. Run them natively with numpy made unimportable."""
import subprocess
import sys

CODE = r'''
import sys
class BlockNumpy:
    def find_spec(self, name, path=None, target=None):
        if name == "numpy" or name.startswith("numpy."):
            raise ImportError("numpy is blocked for this test")
sys.meta_path.insert(0, BlockNumpy())
import numr_web as nr
from numr_web import nn
from numr_web.data import digits_split
from numr_web.apps.demo import accuracy
assert "numpy" not in sys.modules
x_train, y_train, x_test, y_test = digits_split(device="webgpu")
model = nn.MLP([64, 32, 10], activation="gelu", device="webgpu", seed=0)
opt = nn.Adam(model.parameters(), lr=1e-2)
first = None
for epoch in range(3):
    for s in range(0, x_train.shape[0], 128):
        loss = nr.cross_entropy(model(x_train[s:s + 128]), y_train[s:s + 128])
        opt.zero_grad(); loss.backward(); opt.step()
        first = loss.item() if first is None else first
acc = accuracy(model, x_test, y_test)
y = nr.matmul_bias_activation(x_test[:2], model.layers[0].weight.T, model.layers[0].bias, "gelu")
g, = nr.grad(y.sum(), [model.layers[0].weight], create_graph=True)
assert g.shape == (32, 64) and isinstance(g.tolist(), list)   # torch's (out, in) layout
sd = model.state_dict()
back = nr.load(nr.save_bytes(sd), device="webgpu")           # safetensors without numpy
model.load_state_dict(back)
assert [back[k].tolist() == v.tolist() for k, v in sd.items()] == [True] * len(sd)
import json, struct
head = json.dumps({"h": {"dtype": "F16", "shape": [2], "data_offsets": [0, 4]}}).encode()
half = nr.load(struct.pack("<Q", len(head)) + head + struct.pack("<2e", 1.5, -2.0),
               device="webgpu", dtype="float32")["h"]
assert half.dtype == nr.float32 and half.tolist() == [1.5, -2.0]
from numr_web.data.text import char_corpus
import random
corpus = char_corpus(device="webgpu", text="def f(x):\n    return x\n" * 20)
xb, yb = corpus.batch("train", 2, 8, random.Random(0))
assert xb.shape == (2, 8) and corpus.vocab.decode(xb[0]) in corpus.vocab.decode(corpus.train)
assert "numpy" not in sys.modules, "numpy was imported"
print(f"OK loss {first:.3f} -> {loss.item():.3f} acc {acc:.3f}")
assert loss.item() < first and acc > 0.8
'''


def test_engine_runs_without_numpy():
    out = subprocess.run([sys.executable, "-c", CODE], capture_output=True, text=True, timeout=600)
    assert out.returncode == 0, out.stdout + out.stderr
    assert "OK" in out.stdout
