# GPT page (web/gpt.html): the character-level GPT of numr_web.models.gpt trains in the tab on the
# standard-library text corpus (numr_web.data.text: CPython's own sources, which Pyodide ships, so
# nothing is downloaded), through numr_web.apps.training.fit_async, the loop every demo uses; then it
# writes text after a prompt. This file only adapts model + data + loop to the page: settings from
# JS, progress events out through `emit`, Stop through `should_stop`.
import asyncio
import random
import time

import numr_web as nr
from numr_web.data.text import char_corpus
from numr_web.models.gpt import GPT, GPTConfig
from numr_web.nn import AdamW
from numr_web.nn.optim.lr_scheduler import CosineWithWarmup
from numr_web.apps.js_values import js_object, py_value, sender, whole_number
from numr_web.apps.training import fit_async

# the model and vocabulary of the last run (generation uses the live model, also while it trains);
# `gen` counts generate calls: a newer prompt supersedes the one still writing
_state = {"model": None, "vocab": None, "corpus": None, "device": None, "gen": 0}

# name -> (lowest, highest, whole number?); the page checks the same limits next to its fields
LIMITS = {"layers": (1, 8, True), "dim": (8, 512, True), "heads": (1, 16, True),
          "context": (4, 256, True), "batch": (1, 256, True), "steps": (1, 100_000, True),
          "eval_every": (1, 10_000, True), "lr": (0.0, 1.0, False)}
DEFAULTS = {"layers": 2, "dim": 64, "heads": 4, "context": 32, "batch": 16, "steps": 400,
            "eval_every": 20, "lr": 3e-3, "seed": 0, "device": "webgpu"}


def check_config(cfg):
    """-> the settings with defaults filled in; ValueError naming the first bad one."""
    out = dict(DEFAULTS)
    out.update({k: whole_number(v) for k, v in cfg.items() if v is not None})
    for name, (lo, hi, whole) in LIMITS.items():
        v = out[name]
        ok = not isinstance(v, bool) and isinstance(v, (int, float))
        ok = ok and (isinstance(v, int) if whole else True)
        ok = ok and (lo <= v <= hi if whole else lo < v <= hi)
        if not ok:
            kind = "a whole number from" if whole else "a number in"
            rng = f"{lo} to {hi}" if whole else f"({lo}, {hi}]"
            raise ValueError(f"{name} must be {kind} {rng}, got {v!r}")
    if out["dim"] % out["heads"]:
        raise ValueError(f"dim ({out['dim']}) must be a multiple of heads ({out['heads']})")
    return out


class _LanguageModel:
    """What fit_async trains: x (B, T) token ids -> logits (B, T, V); train()/eval() pass through."""

    def __init__(self, gpt):
        self.gpt = gpt

    def __call__(self, idx):
        return self.gpt(idx)[0]

    def train(self):
        self.gpt.train()

    def eval(self):
        self.gpt.eval()


def _lm_loss(logits, targets):
    b, t, v = logits.shape
    return nr.cross_entropy(logits.reshape(b * t, v), targets.reshape(b * t))


def _batches(corpus, batch, context, per_epoch, seed):
    rng = random.Random(seed)

    class Batches:
        def __len__(self):
            return per_epoch

        def __call__(self, epoch):
            for _ in range(per_epoch):
                yield corpus.batch("train", batch, context, rng)
    return Batches()


async def gpt_train(cfg, emit=None, should_stop=None):
    """cfg: {layers, dim, heads, context, batch, steps, eval_every, lr, seed, device}. emit(event)
    gets {kind: 'start' | 'step' | 'eval', ...}; should_stop() is asked after every step."""
    c = check_config(dict(py_value(cfg or {})))
    should_stop = should_stop or None          # JS null arrives as a (falsy) JsNull
    send = sender(emit)
    device = c["device"]
    t_load = time.perf_counter()
    corpus = _state["corpus"]
    if corpus is None or _state["device"] != device:
        corpus = char_corpus(device=device)
        _state.update(corpus=corpus, device=device)
    vocab = corpus.vocab
    gpt = GPT(GPTConfig(vocab_size=len(vocab), block_size=c["context"], n_layer=c["layers"],
                        n_head=c["heads"], n_embd=c["dim"]), device=device, seed=c["seed"])
    _state.update(model=gpt, vocab=vocab)
    opt = AdamW(gpt.parameters(), lr=c["lr"], weight_decay=0.01)
    steps, every = c["steps"], min(c["eval_every"], c["steps"])
    epochs = -(-steps // every)
    sched = CosineWithWarmup(opt, warmup_steps=min(20, steps // 10), total_steps=steps,
                             min_lr=c["lr"] / 10)
    val_x, val_y = corpus.batch("val", c["batch"], c["context"], random.Random(c["seed"] + 1))
    lm = _LanguageModel(gpt)

    def evaluate(model):
        return {"val_loss": _lm_loss(model(val_x), val_y)}

    n_params = sum(p.size for p in gpt.parameters())
    send({"kind": "start", "params": n_params, "vocab": len(vocab), "total_steps": steps,
          "train_chars": len(corpus.train_ids), "val_chars": len(corpus.val_ids),
          "config": {k: c[k] for k in LIMITS}, "device": device,
          "load_s": time.perf_counter() - t_load})
    t0 = time.perf_counter()
    first = {}          # the clock when step 1 was done: steps/s leaves out the kernel compiles

    def stop():
        return (should_stop is not None and should_stop()) or \
            (first.get("n", 0) >= steps)

    def on_step(s):
        now = time.perf_counter() - t0
        first.setdefault("t", now)
        first["n"] = s.step
        rate = (s.step - 1) / (now - first["t"]) if s.step > 1 and now > first["t"] else None
        send({"kind": "step", "step": s.step, "loss": s.loss, "elapsed_s": now,
              "steps_per_s": rate, "lr": opt.param_groups[0]["lr"]})

    def on_epoch(e):
        send({"kind": "eval", "step": e.step, "loss": e.loss, "val_loss": e.metrics["val_loss"],
              "elapsed_s": e.seconds})

    res = await fit_async(lm, opt, _batches(corpus, c["batch"], c["context"], every, c["seed"]),
                          _lm_loss, epochs=epochs, evaluate=evaluate, on_step=on_step,
                          on_epoch=on_epoch, should_stop=stop, read_loss_every=1, scheduler=sched)
    span = first.get("n", 0) - 1
    rate = span / (res.seconds - first["t"]) if span > 0 and res.seconds > first["t"] else None
    stopped = res.stopped and first.get("n", 0) < steps
    return js_object({"steps": res.steps, "seconds": res.seconds, "stopped": stopped,
                      "val_loss": res.metrics.get("val_loss"), "history": res.history,
                      "steps_per_s": rate, "params": n_params})


async def gpt_generate(cfg, emit=None, should_stop=None):
    """cfg: {prompt, max_new (characters), temperature, top_k, seed}. Writes with the model as it is
    now; emit gets {kind: 'token', text} per character. A later call supersedes this one (it ends
    after its current character). -> {prompt, text (the new characters), superseded}"""
    c = dict(py_value(cfg or {}))
    should_stop = should_stop or None          # JS null arrives as a (falsy) JsNull
    model, vocab = _state["model"], _state["vocab"]
    if model is None:
        raise ValueError("train the model first: there is nothing to generate with yet")
    prompt = str(c.get("prompt", ""))
    n = whole_number(c.get("max_new", 120))
    temperature = float(c.get("temperature", 0.8))
    top_k = whole_number(c.get("top_k", 20)) or None
    if isinstance(n, bool) or not isinstance(n, int) or not 1 <= n <= 2000:
        raise ValueError(f"max_new must be a whole number from 1 to 2000, got {n!r}")
    if not 0 < temperature <= 10:
        raise ValueError(f"temperature must be a number in (0, 10], got {temperature!r}")
    _state["gen"] += 1
    me = _state["gen"]
    ids = list(vocab.encode(prompt)) or list(vocab.encode("\n"))
    start = len(ids)
    rng = random.Random(whole_number(c.get("seed", 0)))
    send = sender(emit)
    superseded = False
    for _ in range(n):
        if _state["gen"] != me or (should_stop is not None and should_stop()):
            superseded = True
            break
        ids = await model.generate_async(ids, 1, temperature=temperature, top_k=top_k, rng=rng)
        send({"kind": "token", "text": vocab.decode(ids[-1:])})
        await asyncio.sleep(0)                 # a turn for a newer prompt or a training step
    return js_object({"prompt": prompt, "text": vocab.decode(ids[start:]), "superseded": superseded})
