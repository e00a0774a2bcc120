"""The GPT demo: a character-level GPT (numr_web.models.GPT: pre-LayerNorm blocks, causal
scaled_dot_product_attention, a GELU MLP through the fused Linear, weight tying) trained on
CPython's standard-library sources (numr_web.data.text) with AdamW, a cosine schedule after a
linear warm-up and gradient-norm clipping.

`prepare_gpt(...)` returns `(kwargs, info)` like the other `prepare_*` functions in
numr_web.apps.demo: `kwargs` go to `training.fit` / `training.fit_async`, where one "epoch" is
`eval_interval` optimizer steps on random windows of the training text followed by an evaluation
of the validation loss on fixed windows of the validation text (EpochInfo.loss is the mean
training loss of those steps, EpochInfo.metrics["val_loss"] the validation loss). `info` holds the
model, the corpus (its `vocab` turns text into ids and back), the GPTConfig and the step count.

    kwargs, info = prepare_gpt(device="webgpu", steps=200)
    res = await training.fit_async(**kwargs, on_epoch=...)
    text = await sample_text_async(info["model"], info["vocab"], "def ", 200)

No numpy is used, so the same code runs in Pyodide.
"""
from __future__ import annotations

import random

from .. import nn
from ..data.text import char_corpus
from ..models import GPT, GPTConfig
from ..nn.optim.lr_scheduler import CosineWithWarmup
from ..ops.nn_functional import cross_entropy

# name -> (lowest, highest) allowed; shared by the CLI and the browser page's checks
GPT_LIMITS = {"steps": (1, 1_000_000), "batch_size": (1, 4096), "block_size": (2, 4096),
              "n_layer": (1, 48), "n_head": (1, 64), "n_embd": (1, 8192),
              "eval_interval": (1, 1_000_000), "eval_batches": (1, 10_000)}


def check_gpt_config(**values):
    """Raise ValueError naming the first bad setting (before any device work)."""
    for name, v in values.items():
        if name in GPT_LIMITS:
            lo, hi = GPT_LIMITS[name]
            if isinstance(v, bool) or not isinstance(v, int) or not lo <= v <= hi:
                raise ValueError(f"{name} must be a whole number from {lo} to {hi}, got {v!r}")
    if values["n_embd"] % values["n_head"]:
        raise ValueError(f"n_embd ({values['n_embd']}) must be a multiple of n_head "
                         f"({values['n_head']})")
    lr = values["lr"]
    if isinstance(lr, bool) or not isinstance(lr, (int, float)) or not 0 < lr <= 10:
        raise ValueError(f"lr (learning rate) must be a number in (0, 10], got {lr!r}")
    clip = values["grad_clip"]
    if clip is not None and not (isinstance(clip, (int, float)) and clip > 0):
        raise ValueError(f"grad_clip must be a positive number or None, got {clip!r}")


class ClippedOptimizer:
    """An optimizer whose step() first clips the total gradient norm to max_norm
    (nn.clip_grad_norm_); everything else is the wrapped optimizer's."""

    def __init__(self, optimizer, max_norm):
        self.optimizer, self.max_norm = optimizer, max_norm
        self.params = [p for g in optimizer.param_groups for p in g["params"]]

    def zero_grad(self, set_to_none=True):
        self.optimizer.zero_grad(set_to_none)

    def step(self):
        if self.max_norm is not None:
            nn.clip_grad_norm_(self.params, self.max_norm)
        self.optimizer.step()

    @property
    def param_groups(self):
        return self.optimizer.param_groups


def window_batches(corpus, batch_size, block_size, steps, interval, seed=0):
    """A `batches` callable: epoch e -> the (x, y) windows of steps e*interval ... (at most
    `interval` of them, fewer in the last epoch), drawn from the training split with a random
    generator seeded by (seed, e), so a run is reproducible."""
    class _Batches:
        def __len__(self):
            return interval

        def __call__(self, epoch):
            rng = random.Random(seed * 1_000_003 + epoch)
            for _ in range(min(interval, steps - epoch * interval)):
                yield corpus.batch("train", batch_size, block_size, rng)
    return _Batches()


def gpt_loss(output, targets):
    """The mean next-character cross-entropy of GPT's output (logits (B, T, V), _) vs (B, T)."""
    logits = output[0] if isinstance(output, tuple) else output
    b, t, v = logits.shape
    return cross_entropy(logits.reshape(b * t, v), targets.reshape(b * t))


def val_loss(corpus, batch_size, block_size, n_batches, seed=0):
    """An `evaluate` callable: {'val_loss': the mean loss over n_batches fixed random windows of
    the validation split} as a device scalar (the same windows at every evaluation)."""
    rng = random.Random(seed + 7919)
    windows = [corpus.batch("val", batch_size, block_size, rng) for _ in range(n_batches)]

    def evaluate(model):
        total = None
        for x, y in windows:
            loss = gpt_loss(model(x), y)
            total = loss if total is None else total + loss
        return {"val_loss": total * (1.0 / len(windows))}
    return evaluate


def prepare_gpt(device=None, steps=400, batch_size=32, block_size=64, n_layer=2, n_head=4,
                n_embd=128, lr=6e-3, min_lr=6e-4, warmup_steps=None, weight_decay=0.1,
                grad_clip=1.0, dropout=0.0, eval_interval=50, eval_batches=8, seed=0, text=None,
                dtype=None):
    """-> (fit keyword arguments, info) for training the character GPT for `steps` optimizer
    steps of `batch_size` windows of `block_size` characters. warmup_steps: default steps // 10.
    Weight decay applies to the matrices (embeddings included), not to biases or LayerNorms.
    text: train on this string instead of the standard-library corpus (split 90/10).
    info: model, corpus, vocab, config, steps, parameters, device, train_tokens, val_tokens."""
    check_gpt_config(steps=steps, batch_size=batch_size, block_size=block_size, n_layer=n_layer,
                     n_head=n_head, n_embd=n_embd, eval_interval=eval_interval,
                     eval_batches=eval_batches, lr=lr, grad_clip=grad_clip)
    warmup = steps // 10 if warmup_steps is None else warmup_steps
    if isinstance(warmup, bool) or not isinstance(warmup, int) or not 0 <= warmup <= steps:
        raise ValueError(f"warmup_steps must be a whole number from 0 to steps ({steps}), "
                         f"got {warmup_steps!r}")
    corpus = char_corpus(device=device, text=text)
    cfg = GPTConfig(vocab_size=corpus.vocab.size, block_size=block_size, n_layer=n_layer,
                    n_head=n_head, n_embd=n_embd, dropout=dropout)
    model = GPT(cfg, device=device, dtype=dtype, seed=seed)
    decay, no_decay = [], []
    for _, p in model.named_parameters():
        (decay if p.ndim >= 2 else no_decay).append(p)
    opt = nn.AdamW([{"params": decay, "weight_decay": weight_decay},
                    {"params": no_decay, "weight_decay": 0.0}], lr=lr, betas=(0.9, 0.99))
    sched = CosineWithWarmup(opt, warmup_steps=warmup, total_steps=steps, min_lr=min_lr)
    epochs = -(-steps // eval_interval)
    kwargs = dict(model=model, optimizer=ClippedOptimizer(opt, grad_clip),
                  batches=window_batches(corpus, batch_size, block_size, steps, eval_interval,
                                         seed),
                  loss_fn=gpt_loss, epochs=epochs,
                  evaluate=val_loss(corpus, batch_size, block_size, eval_batches, seed),
                  scheduler=sched)
    info = {"model": model, "corpus": corpus, "vocab": corpus.vocab, "config": cfg,
            "steps": steps, "parameters": sum(p.numel() for p in model.parameters()),
            "device": device or "cpu", "train_tokens": len(corpus.train_ids),
            "val_tokens": len(corpus.val_ids)}
    return kwargs, info


def sample_text(model, vocab, prompt="", max_new_tokens=200, temperature=0.8, top_k=None,
                seed=0):
    """The prompt followed by max_new_tokens sampled characters (blocking readbacks)."""
    model.eval()
    ids = model.generate(list(vocab.encode(prompt or "\n")), max_new_tokens, temperature, top_k,
                         random.Random(seed))
    return vocab.decode(ids[0 if prompt else 1:])


async def sample_text_async(model, vocab, prompt="", max_new_tokens=200, temperature=0.8,
                            top_k=None, seed=0):
    """sample_text for the browser: awaits each readback."""
    model.eval()
    ids = await model.generate_async(list(vocab.encode(prompt or "\n")), max_new_tokens,
                                     temperature, top_k, random.Random(seed))
    return vocab.decode(ids[0 if prompt else 1:])
