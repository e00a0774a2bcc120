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
from numr_web.demo import accuracy
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
y = nr.matmul_bias_activation(x_test[:2], model.layers[0].weight, model.layers[0].bias, "gelu")
g, = nr.grad(y.sum(), [model.layers[0].weight], create_graph=True)
assert g.shape == (64, 32) and isinstance(g.tolist(), list)
assert "numpy" not in sys.modules, "numpy was imported"
print(f"OK loss {first:.3f} -> {loss.item():.3f} acc {acc:.3f}")
assert loss.item() < first and acc > 0.8
'''


def test_engine_runs_without_numpy():
    out = subprocess.run([sys.executable, "-c", CODE], capture_output=True, text=True, timeout=600)
    assert out.returncode == 0, out.stdout + out.stderr
    assert "OK" in out.stdout
