"""Run one of the vendored PyTorch programs with PyTorch or with numr_web (numr_web.install_as_torch(),
so the program's own `import torch` lines give numr_web.torch), record every loss it backpropagates
and its final weights.

    python run_program.py PROGRAM FRAMEWORK WORKDIR [DEVICE]

PROGRAM: nanogpt | mnist | word_language_model. FRAMEWORK: torch | numr | numr_imports (the
program's import lines rewritten to `import numr_web.torch as torch` and friends, the other
recipe; the file is otherwise the same; nanogpt only). WORKDIR: where the
initial weights are exchanged (the torch run writes init.npz, the numr run loads it, so both
start from the same weights) and the results go (FRAMEWORK.json, FRAMEWORK.npz). DEVICE (numr
only): "cpu" (default), "webgpu" or "cuda"; the torch run is the reference on cpu. Dropout is switched off (p = 0) in both runs, the one source
of randomness that would make the losses differ; the data are fixed by numpy seeds.
"""
import contextlib
import importlib.util
import io
import json
import os
import runpy
import sys

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
program, framework, workdir = sys.argv[1:4]
device = sys.argv[4] if len(sys.argv) > 4 else "cpu"
if framework == "numr":
    import numr_web
    numr_web.install_as_torch()
if framework == "numr_imports":
    import numr_web.torch as torch
else:
    import torch  # noqa: E402  (after install_as_torch: numr_web.torch in the numr run)

if framework != "torch" and device != "cpu":
    # the programs' --accel / accelerator flags take torch.accelerator, which is cuda where there
    # is a CUDA GPU: point it at the device under test (webgpu on a machine with both, too)
    torch.accelerator.current_accelerator = lambda check_available=False: torch.device(device)

losses, models = [], []
_backward = torch.Tensor.backward


def _recording_backward(self, *args, **kwargs):
    losses.append(float(self.detach().cpu().double().item()))
    return _backward(self, *args, **kwargs)


torch.Tensor.backward = _recording_backward
INIT = os.path.join(workdir, "init.npz")


def start_from_shared_weights(model):
    """The torch run saves its initial weights; the numr run loads them."""
    models.append(model)
    if framework == "torch":
        np.savez(INIT, **{k: v.detach().cpu().numpy() for k, v in model.state_dict().items()})
    else:
        saved = np.load(INIT)
        model.load_state_dict({k: torch.tensor(saved[k]) for k in saved.files})
    return model


def rewrite_imports(source):
    """The program with `import torch...` / `from torch... import` lines naming numr_web.torch
    instead (and nothing else changed)."""
    out = []
    for line in source.splitlines(keepends=True):
        s = line.strip()
        if s == "import torch":
            line = line.replace("import torch", "import numr_web.torch as torch")
        elif s.startswith(("import torch.", "from torch.", "from torch ")):
            line = line.replace("torch", "numr_web.torch", 1)
        out.append(line)
    return "".join(out)


def _load(path, name):
    if framework == "numr_imports":
        mod = importlib.util.module_from_spec(importlib.util.spec_from_loader(name, loader=None))
        mod.__file__ = path
        sys.modules[name] = mod
        with open(path) as f:
            exec(compile(rewrite_imports(f.read()), path, "exec"), mod.__dict__)
        return mod
    spec = importlib.util.spec_from_file_location(name, path)
    mod = importlib.util.module_from_spec(spec)
    sys.modules[name] = mod
    spec.loader.exec_module(mod)
    return mod


def run_nanogpt(steps=6, batch=4, block=16, vocab=64):
    """nanoGPT's model.py with the core of its train.py loop (AdamW from the model's own
    configure_optimizers, gradient clipping at 1.0), then generation."""
    sys.path.insert(0, os.path.join(HERE, "nanogpt"))
    gpt = _load(os.path.join(HERE, "nanogpt", "model.py"), "model")
    dev = device if framework != "torch" else "cpu"
    cfg = gpt.GPTConfig(block_size=block, vocab_size=vocab, n_layer=2, n_head=2, n_embd=32,
                        dropout=0.0, bias=True)
    torch.manual_seed(0)            # the same initial weights in every run: a reproducible test
    model = start_from_shared_weights(gpt.GPT(cfg)).to(dev)
    opt = model.configure_optimizers(weight_decay=0.1, learning_rate=3e-3, betas=(0.9, 0.95),
                                     device_type="cpu")
    data = np.random.RandomState(0).randint(0, vocab, (steps, batch, block + 1))
    model.train()
    for i in range(steps):
        x = torch.tensor(data[i, :, :-1], dtype=torch.long).to(dev)
        y = torch.tensor(data[i, :, 1:], dtype=torch.long).to(dev)
        logits, loss = model(x, y)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        opt.zero_grad(set_to_none=True)
    model.eval()
    out = model.generate(torch.tensor(data[0, :1, :4], dtype=torch.long).to(dev), 5, top_k=8)
    return {"generated_shape": list(out.shape),
            "generated_in_vocab": bool(((out >= 0) & (out < vocab)).all())}


def run_mnist():
    """pytorch/examples mnist/main.py: main() as is (Adadelta, StepLR, DataLoader, train and
    test), on a small synthetic MNIST (stubs/torchvision), one epoch of 6 batches."""
    sys.path.insert(0, os.path.join(HERE, "mnist", "stubs"))
    main = _load(os.path.join(HERE, "mnist", "main.py"), "mnist_main")
    to = main.Net.to

    def shared_start_then_to(self, *args, **kwargs):     # main() does Net().to(device)
        self.dropout1.p = self.dropout2.p = 0.0
        return to(start_from_shared_weights(self), *args, **kwargs)

    main.Net.to = shared_start_then_to
    if framework != "torch" and device != "cpu":
        # main()'s accelerator branch also shuffles (numr_web's stream, not torch's): keep the
        # batches in the order of the cpu reference, which does not shuffle
        loader = torch.utils.data.DataLoader

        def in_order(*args, shuffle=None, **kwargs):
            return loader(*args, **kwargs)
        main.torch.utils.data.DataLoader = in_order
    sys.argv = ["main.py", "--batch-size", "8", "--test-batch-size", "16", "--epochs", "1",
                "--log-interval", "1"] + (["--no-accel"] if framework == "torch" or
                                          device == "cpu" else [])
    main.main()
    return {}


WORDS = ("the of and to in a is was for on as with by he at from his an were are which this "
         "be or has had not first one their its new after who they two her she been other "
         "when there all time during into school more may years over only year most").split()


def run_word_language_model():
    """pytorch/examples word_language_model/main.py run as a script (a 2-layer LSTM, SGD by
    p.data.add_, gradient clipping, evaluation, torch.save / torch.load of the whole model) on a
    small corpus written here."""
    root = os.path.join(HERE, "word_language_model")
    corpus = os.path.join(workdir, "corpus")
    os.makedirs(corpus, exist_ok=True)
    rng = np.random.RandomState(0)
    for name, lines in (("train", 16), ("valid", 4), ("test", 4)):
        with open(os.path.join(corpus, f"{name}.txt"), "w") as f:
            for _ in range(lines):
                f.write(" ".join(rng.choice(WORDS, rng.randint(4, 12))) + "\n")
    sys.path.insert(0, root)
    lm = _load(os.path.join(root, "model.py"), "model")
    to = lm.RNNModel.to

    def shared_start_then_to(self, *args, **kwargs):     # main.py does RNNModel(...).to(device)
        return to(start_from_shared_weights(self), *args, **kwargs)

    lm.RNNModel.to = shared_start_then_to
    sys.argv = ["main.py", "--data", corpus, "--model", "LSTM", "--emsize", "16", "--nhid", "16",
                "--nlayers", "2", "--lr", "20", "--clip", "0.25", "--epochs", "2",
                "--batch_size", "4", "--bptt", "5", "--dropout", "0", "--seed", "1111",
                "--log-interval", "2", "--save", os.path.join(workdir, f"{framework}_model.pt")]
    if framework == "numr" and device != "cpu":
        sys.argv.append("--accel")
    runpy.run_path(os.path.join(root, "main.py"), run_name="__main__")
    return {}


out = io.StringIO()
with contextlib.redirect_stdout(out):
    extra = {"nanogpt": run_nanogpt, "mnist": run_mnist,
             "word_language_model": run_word_language_model}[program]()
state = models[-1].state_dict()
extra["device"] = next(iter(state.values())).device.type      # where it trained
final = {k: v.detach().cpu().double().numpy() for k, v in state.items()}
np.savez(os.path.join(workdir, f"{framework}.npz"), **final)
with open(os.path.join(workdir, f"{framework}.json"), "w") as f:
    json.dump({"losses": losses, "stdout": out.getvalue(), **extra}, f)
