"""A vendored PyTorch program in the browser: nanoGPT's model.py (tests/programs/nanogpt, unmodified)
trains in the page's Pyodide worker through numr_web.install_as_torch() and its own `import torch`
lines, on the page's WebGPU device (SwiftShader here), from the same initial weights and batches as
PyTorch in this process: AdamW from the model's configure_optimizers, gradient clipping, six steps.
The losses agree with PyTorch's to float32 rounding (as natively, tests/programs)."""
from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path

import numpy as np
import pytest

torch = pytest.importorskip("torch")

MODEL = Path(__file__).resolve().parent.parent / "tests" / "programs" / "nanogpt" / "model.py"
CONFIG = dict(block_size=16, vocab_size=64, n_layer=2, n_head=2, n_embd=32, dropout=0.0, bias=True)
STEPS, BATCH = 6, 4

BROWSER = """
import json, os, sys
os.makedirs("/tmp/nanogpt", exist_ok=True)
with open("/tmp/nanogpt/model.py", "w") as f:
    f.write(json.loads(SOURCE_JSON))
import numr_web
numr_web.install_as_torch()
import torch
sys.path.insert(0, "/tmp/nanogpt")
import model as gpt
spec = json.loads(SPEC_JSON)
net = gpt.GPT(gpt.GPTConfig(**spec["config"]))
net.load_state_dict({k: torch.tensor(v) for k, v in spec["weights"].items()})
dev = torch.accelerator.current_accelerator()
net = net.to(dev)
opt = net.configure_optimizers(weight_decay=0.1, learning_rate=3e-3, betas=(0.9, 0.95),
                               device_type=dev.type)
net.train()
losses = []
for batch in spec["data"]:
    x = torch.tensor([row[:-1] for row in batch], dtype=torch.long).to(dev)
    y = torch.tensor([row[1:] for row in batch], dtype=torch.long).to(dev)
    logits, loss = net(x, y)
    loss.backward()
    torch.nn.utils.clip_grad_norm_(net.parameters(), 1.0)
    opt.step()
    opt.zero_grad(set_to_none=True)
    losses.append(loss)
{"device": str(dev), "losses": [await loss.read() for loss in losses]}
"""


def _torch_run():
    """PyTorch's run (cpu): the initial weights, the batches and the loss of every step."""
    spec = importlib.util.spec_from_file_location("nanogpt_model_reference", MODEL)
    gpt = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = gpt                     # dataclasses look the module up by name
    spec.loader.exec_module(gpt)
    torch.manual_seed(0)
    net = gpt.GPT(gpt.GPTConfig(**CONFIG))
    weights = {k: v.detach().numpy().tolist() for k, v in net.state_dict().items()}
    opt = net.configure_optimizers(weight_decay=0.1, learning_rate=3e-3, betas=(0.9, 0.95),
                                   device_type="cpu")
    data = np.random.RandomState(0).randint(0, CONFIG["vocab_size"],
                                            (STEPS, BATCH, CONFIG["block_size"] + 1))
    net.train()
    losses = []
    for batch in data:
        x, y = torch.tensor(batch[:, :-1]), torch.tensor(batch[:, 1:])
        _, loss = net(x, y)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(net.parameters(), 1.0)
        opt.step()
        opt.zero_grad(set_to_none=True)
        losses.append(loss.item())
    return {"config": CONFIG, "weights": weights, "data": data.tolist()}, losses


def test_nanogpt_trains_in_the_browser_like_torch(app):
    spec, want = _torch_run()
    app.goto("index.html")
    res = app.py(f"SOURCE_JSON = {json.dumps(json.dumps(MODEL.read_text()))}\n"
                 f"SPEC_JSON = {json.dumps(json.dumps(spec))}\n" + BROWSER)
    print(f"\nnanoGPT in the browser ({res['device']}): {res['losses']}\nPyTorch: {want}")
    assert res["device"] == "webgpu"
    np.testing.assert_allclose(res["losses"], want, rtol=1e-5)
    app.assert_clean()
