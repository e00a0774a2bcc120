"""`numr-web demo --model mlp|cnn|gpt`: the command-line runs of the demos (`--distributed` in
numr_web.distributed.demo). Each prints what it trains, trains through `fit_with_progress` (the one
loop, `training.fit`, under a tqdm bar when tqdm is installed, else a line per epoch / evaluation),
and ends with its result line: `final test accuracy: XX.XX%` (mlp, cnn) or `val loss X.XXX` (gpt).
Returns the exit status: 1 when a --min-accuracy / --max-val-loss gate is missed, else 0."""
from __future__ import annotations

import argparse
import json
import os
import sys
import time

MODEL_DEFAULTS = {          # option -> value per model, for options left unset on the command line
    "mlp": {"epochs": 20, "batch_size": 64, "lr": 3e-3, "plot": "loss_curve.png"},
    "cnn": {"epochs": 15, "batch_size": 32, "lr": 2e-3, "plot": "cnn_loss_curve.png"},
    "gpt": {"epochs": None, "batch_size": 32, "lr": 6e-3, "plot": "gpt_loss_curve.png",
            "checkpoint": "gpt.safetensors"},
}


def apply_defaults(args):
    """Fill the options the user left as None with the chosen model's defaults."""
    for k, v in MODEL_DEFAULTS[args.model].items():
        if getattr(args, k, None) is None:
            setattr(args, k, v)


# BLAS threads per model (OPENBLAS_NUM_THREADS etc. set by the user win): the demos' GEMMs (the
# MLP's 64 x 128, at most 2048 x 512 in the GPT) are small, and a second OpenBLAS thread that spins
# between them costs more than it gives once other work shares the cores: the MLP demo took 9x
# the CPU time with two (docs/benchmarks.md)
MODEL_THREADS = {"mlp": 1, "cnn": 1, "gpt": 1}


def cpu_threads(local_processes=1, env=None, max_threads=None):
    """Give OpenBLAS/OpenMP an even share of this machine's cores per local process (at most
    max_threads), unless the user set the variables: e.g. two MPI ranks on two cores get one
    thread each instead of two each (which oversubscribes the cores); several local processes
    also get that share as NUMR_CPU_THREADS. Must run before numpy is imported."""
    env = os.environ if env is None else env
    try:
        cores = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        cores = os.cpu_count() or 1
    share = max(1, cores // max(1, local_processes))
    n = str(min(share, max_threads) if max_threads else share)
    for var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
        env.setdefault(var, n)
    if local_processes > 1:              # the cpu device's own threads: the same share each
        env.setdefault("NUMR_CPU_THREADS", str(share))


def accuracy_arg(text):
    """--min-accuracy: a fraction (0.95) or a percentage with % (95%); a bare number above 1 is
    refused (95 would be a gate no run can pass)."""
    t = text.strip()
    pct = t.endswith("%")
    try:
        v = float(t[:-1] if pct else t)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number: give a fraction (0.95) or "
                                         f"a percentage with % (95%)") from None
    if not pct and v > 1:
        raise argparse.ArgumentTypeError(f"{text} is above 1: the accuracy is a fraction (0.95) "
                                         f"or a percentage with % (95%)")
    v = v / 100 if pct else v
    if not 0 <= v <= 1:
        raise argparse.ArgumentTypeError(f"{text} is not an accuracy: give a fraction from 0 to "
                                         f"1 (0.95) or a percentage from 0% to 100% (95%)")
    return v


def accuracy_gate(acc, wanted):
    """The exit status of a run that reached test accuracy `acc` against --min-accuracy: 1, with
    a line on stderr saying both, when it falls short."""
    if acc >= wanted:
        return 0
    print(f"numr-web demo: test accuracy {acc * 100:.2f}% is below --min-accuracy "
          f"{wanted * 100:g}%: exit status 1", file=sys.stderr)
    return 1


def val_loss_gate(val, wanted):
    """The same for the GPT's validation loss against --max-val-loss."""
    if wanted is None or val <= wanted:
        return 0
    print(f"numr-web demo: validation loss {val:.3f} is above --max-val-loss {wanted:g}: exit "
          f"status 1", file=sys.stderr)
    return 1


def fit_with_progress(kwargs, total, unit, report):
    """Train with `training.fit` on a run built by a `prepare_*` function, showing a tqdm bar of
    `total` `unit`s ("epoch": it moves after every epoch, "step": after every step) or, without
    tqdm, a line per epoch / evaluation. report(EpochInfo) -> (the bar's postfix dict, the line).
    -> (FitResult, seconds)"""
    from .training import fit
    try:
        from tqdm import tqdm
    except ImportError:
        tqdm = None
    bar = tqdm(total=total, unit=unit) if tqdm else None
    per_step = unit == "step"

    def on_step(s):
        bar.update(1)

    def on_epoch(e):
        postfix, line = report(e)
        if bar is None:
            print(line)
            return
        bar.set_postfix(**postfix)
        if not per_step:
            bar.update(1)

    t0 = time.perf_counter()
    try:
        res = fit(**kwargs, on_epoch=on_epoch, on_step=on_step if per_step and bar else None)
    finally:
        if bar is not None:
            bar.close()
    return res, time.perf_counter() - t0


def save_plot(path, series, xlabel, ylabel, title, log_y=False):
    """A PNG of the curves series = {label: (xs, ys)} (matplotlib optional: says so if missing)."""
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("matplotlib is not installed: no loss-curve plot (pip install 'numr-web[demo]')")
        return
    fig, ax = plt.subplots(figsize=(6, 3.5))
    for label, (xs, ys) in series.items():
        ax.plot(xs, ys, marker="o", markersize=3, label=label)
    ax.set(xlabel=xlabel, ylabel=ylabel, title=title)
    if log_y:
        ax.set_yscale("log")
    if len(series) > 1:
        ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)
    print(f"loss curve saved to {path}")


def _prepare_digits_run(args, device):
    """-> (fit kwargs, checkpoint metadata, plot title, accuracy digits) of --model mlp | cnn,
    after printing what it trains."""
    from .demo import prepare_cnn, prepare_digits
    if args.model == "mlp":
        kwargs, info = prepare_digits(device=device, hidden=args.hidden, layers=2,
                                      epochs=args.epochs, batch_size=args.batch_size, lr=args.lr,
                                      activation=args.activation, seed=args.seed)
        sizes = "-".join(map(str, info["sizes"]))
        print(f"training a {sizes} MLP of fused Linear+{args.activation} layers on the UCI digits "
              f"data ({info['n_train']} train / {info['n_test']} test images), device={device}")
        meta = {"model": "MLP", "sizes": ",".join(map(str, info["sizes"])),
                "activation": args.activation}
        return kwargs, meta, f"numr_web digits MLP on {device}", 3
    kwargs, info = prepare_cnn(device=device, epochs=args.epochs, batch_size=args.batch_size,
                               lr=args.lr, hidden=args.hidden, seed=args.seed)
    c1, c2 = info["channels"]
    print(f"training a CNN (conv3x3 {c1} + relu, conv3x3 {c2} + relu, max-pool 2, fused "
          f"Linear+relu {info['hidden']}, Linear 10; {info['parameters']:,} parameters) on the UCI "
          f"digits data ({info['n_train']} train / {info['n_test']} test images, shifted by up to "
          f"1 pixel), AdamW + cosine schedule, label smoothing 0.1, batch {args.batch_size}, "
          f"{args.epochs} epochs, device={device}")
    return kwargs, {"model": "DigitsCNN"}, f"numr_web digits CNN on {device}", 4


def run_digits_demo(args, device):
    """`numr-web demo --model mlp | cnn`: train, then checkpoint, plot and the result line."""
    from ..serialization import save
    kwargs, meta, title, digits = _prepare_digits_run(args, device)

    def report(e):
        acc = e.metrics["accuracy"]
        return ({"loss": f"{e.loss:.4f}", "test_acc": f"{acc:.{digits}f}"},
                f"epoch {e.epoch + 1:3d}  loss {e.loss:.4f}  test accuracy {acc:.{digits}f}")

    res, seconds = fit_with_progress(kwargs, args.epochs, "epoch", report)
    acc = res.metrics["accuracy"]
    if args.checkpoint:
        save(kwargs["model"].state_dict(), args.checkpoint, metadata=meta)
        print(f"checkpoint saved to {args.checkpoint}")
    if args.plot:
        xs = list(range(1, len(res.history) + 1))
        save_plot(args.plot, {"training loss": (xs, res.history)}, "epoch", "training loss",
                  f"{title} (test acc {acc * 100:.2f}%)", log_y=args.model == "mlp")
    print(f"final test accuracy: {acc * 100:.2f}%  ({seconds:.1f} s)")
    return accuracy_gate(acc, args.min_accuracy)


def run_gpt(args, device):
    """`numr-web demo --model gpt`: train, then checkpoint, plot, a sample and the result line."""
    from dataclasses import asdict
    from .demo_gpt import prepare_gpt, sample_text
    from ..serialization import save
    kwargs, info = prepare_gpt(device=device, steps=args.steps, batch_size=args.batch_size,
                               block_size=args.block_size, n_layer=args.n_layer,
                               n_head=args.n_head, n_embd=args.n_embd, lr=args.lr,
                               min_lr=args.lr / 10, eval_interval=args.eval_interval,
                               seed=args.seed)
    cfg = info["config"]
    print(f"training a character GPT ({cfg.n_layer} layers, {cfg.n_head} heads, {cfg.n_embd} dims, "
          f"context {cfg.block_size}; {info['parameters'] / 1e6:.2f}M parameters) on "
          f"{info['train_tokens']:,} characters of Python's standard library "
          f"({info['val_tokens']:,} held out for validation), batch {args.batch_size}, "
          f"{args.steps} steps of AdamW + cosine schedule, device={device}")
    curve = {"step": [], "train": [], "val": []}

    def report(e):
        val = e.metrics["val_loss"]
        curve["step"].append(e.step)
        curve["train"].append(e.loss)
        curve["val"].append(val)
        return ({"train_loss": f"{e.loss:.3f}", "val_loss": f"{val:.3f}"},
                f"step {e.step:5d}  train loss {e.loss:.3f}  val loss {val:.3f}  "
                f"({e.seconds:.0f} s)")

    res, seconds = fit_with_progress(kwargs, args.steps, "step", report)
    val = res.metrics["val_loss"]
    print(f"trained {res.steps} steps in {seconds:.1f} s ({seconds / res.steps * 1e3:.0f} ms/step); "
          f"train loss {res.history[-1]:.3f}")
    model = info["model"]
    if args.checkpoint:
        meta = {"model": "numr_web.models.GPT", "config": json.dumps(asdict(cfg)),
                "vocab": info["vocab"].chars, "steps": str(res.steps), "val_loss": f"{val:.4f}"}
        save(model.state_dict(), args.checkpoint, metadata=meta)
        print(f"checkpoint saved to {args.checkpoint}")
    if args.plot:
        save_plot(args.plot, {"train": (curve["step"], curve["train"]),
                              "val": (curve["step"], curve["val"])}, "step",
                  "loss (nats/char)", f"numr_web character GPT on {device} (val {val:.3f})")
    if args.sample_chars > 0:
        text = sample_text(model, info["vocab"], args.prompt, args.sample_chars,
                           temperature=args.temperature, seed=args.seed)
        print(f"--- sample (prompt {args.prompt!r}, temperature {args.temperature}) ---")
        print(text)
        print("---")
    print(f"val loss {val:.3f}")
    return val_loss_gate(val, args.max_val_loss)


def add_arguments(d):
    """The CNN/GPT options of `numr-web demo` (the parser's MLP options are shared)."""
    d.add_argument("--model", choices=("mlp", "cnn", "gpt"), default="mlp",
                   help="mlp (default): the digits MLP; cnn: a small CNN on the digits; gpt: a "
                        "character-level GPT on Python's standard-library sources")
    g = d.add_argument_group("gpt options")
    g.add_argument("--steps", type=int, default=400, help="optimizer steps (default %(default)s)")
    g.add_argument("--n-layer", type=int, default=2, help="transformer blocks (default %(default)s)")
    g.add_argument("--n-head", type=int, default=4,
                   help="attention heads per block (default %(default)s; must divide --n-embd)")
    g.add_argument("--n-embd", type=int, default=128,
                   help="embedding width, the model dimension (default %(default)s)")
    g.add_argument("--block-size", type=int, default=64, help="context length in characters (default %(default)s)")
    g.add_argument("--eval-interval", type=int, default=50,
                   help="steps between validation-loss evaluations (default %(default)s)")
    g.add_argument("--prompt", default="def ", help="start of the generated sample")
    g.add_argument("--sample-chars", type=int, default=300,
                   help="characters to generate after training (0: none)")
    g.add_argument("--temperature", type=float, default=0.8,
                   help="sampling temperature of the sample (default %(default)s; lower is more "
                        "conservative)")
    g.add_argument("--max-val-loss", type=float, default=None,
                   help="exit with status 1 (saying so) above this validation loss "
                        "(nats/char)")
    d.add_argument("--checkpoint", default=None,
                   help="save the trained weights here (safetensors; gpt default "
                        "gpt.safetensors, '' for none)")
    d.add_argument("--distributed", nargs="?", const="auto", default=None,
                   choices=("auto", "mpi", "nccl"),
                   help="train the MLP data-parallel over the ranks started by mpirun (mpi, cpu) "
                        "or numr_web.distributed.launch (nccl, --device cuda)")
