"""`numr-web info | demo [--device D] | bench [ARGS] | serve [--port P] [--no-browser] | --version`."""
from __future__ import annotations

import argparse
import os
import sys

from .. import __version__
from . import demo_run, serve


def cmd_info(args):
    from .. import backends
    print(f"numr_web {__version__}  (Python {sys.version.split()[0]})")
    for dev in backends.REGISTRY:
        ok, why = backends.probe(dev)
        print(f"  {dev:7s} {'available' if ok else 'unavailable'}: {why}")
        if ok:
            try:
                for k, v in backends.get_backend(dev).info().items():
                    print(f"            {k}: {v}")
            except Exception as e:  # info must never crash the listing
                print(f"            (info failed: {type(e).__name__}: {e})")
    print(f"  browser app (numr-web serve): {serve.describe_app()}")
    return 0


def _check_output_paths(args):
    """--plot / --checkpoint into a folder that exists: said before training, not after it."""
    for opt in ("plot", "checkpoint"):
        path = getattr(args, opt, None)
        if path:
            folder = os.path.dirname(os.path.abspath(path))
            if not os.path.isdir(folder):
                raise ValueError(f"--{opt} {path}: the folder {folder} does not exist; create it "
                                 f"or pick another path ('' for no file)")


def cmd_demo(args):
    from .demo_run import apply_defaults, cpu_threads
    apply_defaults(args)
    _check_output_paths(args)
    if args.distributed:
        if args.model != "mlp":
            raise ValueError(f"--distributed trains the MLP (--model mlp), not --model {args.model}")
        from ..distributed.env import read_env
        cpu_threads(read_env().local_world_size)  # before numpy loads: one share of the cores each
        from .demo_distributed import cli_demo
        return cli_demo(args)
    from .demo_run import MODEL_THREADS, run_digits_demo, run_gpt
    cpu_threads(max_threads=MODEL_THREADS.get(args.model))   # before numpy loads
    from .. import backends
    device = backends.normalize_device(args.device)
    backends.get_backend(device)          # an unavailable device fails here, before any output
    return (run_gpt if args.model == "gpt" else run_digits_demo)(args, device)


def cmd_bench(args):
    import runpy
    root = serve.find_checkout()
    script = root / "bench" / "linear.py" if root else None
    if script is None or not script.is_file():
        print("numr-web bench: it runs bench/linear.py from the source checkout, and none was found "
              "here: run it inside the repository (or set NUMR_WEB_ROOT=/path/to/numr_web)",
              file=sys.stderr)
        return 1
    sys.argv = [str(script)] + args.rest
    try:
        runpy.run_path(str(script), run_name="__main__")
    except ModuleNotFoundError as e:
        print(f"numr-web bench: {e.name} is not installed: pip install 'numr-web[bench]'",
              file=sys.stderr)
        return 1
    except SystemExit as e:
        if e.code is None or isinstance(e.code, int):
            return e.code or 0
        print(e.code, file=sys.stderr)
        return 1
    return 0


def cmd_shaders(args):
    """Print the generated kernel code: the per-activation and per-op dispatch built from the
    tables, and the kernels' generated sections (the unrolled GEMM K-slice)."""
    if args.language == "cuda":
        from ..backends.cuda.codegen import dump as dump_cuda
        print(dump_cuda())
        return 0
    from ..backends.webgpu.codegen import KERNELS, dump
    from ..backends.webgpu.codegen_gemm import dump as dump_sections
    if args.kernel is not None and args.kernel not in KERNELS:
        print(f"numr-web shaders: no kernel file {args.kernel!r}; one of: {', '.join(sorted(KERNELS))}",
              file=sys.stderr)
        return 2
    print(dump(args.kernel))
    sections = dump_sections(args.kernel)       # the kernel files' generated repeated code
    if sections:
        print(sections)
    return 0


def _per_model(option):
    """'mlp 20, cnn 15' : an option's default per model (demo_run.MODEL_DEFAULTS)."""
    return ", ".join(f"{m} {v[option]:g}" for m, v in demo_run.MODEL_DEFAULTS.items()
                     if v.get(option) is not None)


def build_parser():
    p = argparse.ArgumentParser(prog="numr-web", description=__doc__)
    p.add_argument("--version", action="version", version=f"numr-web {__version__}")
    sub = p.add_subparsers(dest="cmd", required=True)
    sub.add_parser("info", help="list devices and their details")
    from ..ops.activations import ACT
    ACTIVATIONS = [n for n in ACT if n != "none"]
    d = sub.add_parser("demo", help="train a model (the digits MLP, a digits CNN or a character "
                                    "GPT) and print its test accuracy or validation loss")
    d.add_argument("--device", default=None,
                   help="cpu (default, or $NUMR_DEVICE), webgpu or cuda")
    d.add_argument("--epochs", type=int, default=None,
                   help=f"training epochs ({_per_model('epochs')}; the gpt counts --steps)")
    d.add_argument("--hidden", type=int, default=128,
                   help="width of the hidden layers (mlp: 64-H-H-10; cnn: the fused Linear "
                        "after the convolutions; default %(default)s)")
    d.add_argument("--batch-size", type=int, default=None,
                   help=f"examples (gpt: windows) per step ({_per_model('batch_size')})")
    d.add_argument("--lr", type=float, default=None,
                   help=f"learning rate ({_per_model('lr')})")
    d.add_argument("--activation", default="gelu", metavar="NAME",
                   help="the MLP's fused activation, a row of the activation table: "
                        f"{', '.join(ACTIVATIONS)} (default gelu)")
    d.add_argument("--seed", type=int, default=0,
                   help="seed of the initial weights, the data split / batch order and the "
                        "sample (default %(default)s; runs with one seed repeat)")
    d.add_argument("--plot", default=None, help="loss-curve PNG ('' for none; default "
                                                "loss_curve.png, cnn_ or gpt_loss_curve.png)")
    d.add_argument("--min-accuracy", type=demo_run.accuracy_arg, default=0.0, metavar="A",
                   help="exit with status 1 (saying so) below this test accuracy: a fraction "
                        "(0.95) or a percentage (95%%)")
    demo_run.add_arguments(d)
    b = sub.add_parser("bench", help="run bench/linear.py from the source checkout; the arguments "
                                     "after `bench` go to it (its options: numr-web bench -- --help)")
    b.add_argument("rest", nargs=argparse.REMAINDER,
                   help="arguments of bench/linear.py (after --)")
    sh = sub.add_parser("shaders", help="print the kernel code generated from the activation and op "
                                        "tables (WGSL headers and dispatch, or the CUDA source)")
    sh.add_argument("--dump", action="store_true", help="print the generated code (the default)")
    sh.add_argument("--language", choices=("wgsl", "cuda"), default="wgsl",
                    help="wgsl (default): the WebGPU kernels; cuda: the CUDA source")
    sh.add_argument("--kernel", default=None, help="one WGSL kernel file (default: all)")
    serve.add_arguments(sub.add_parser("serve", help="serve the web app on 127.0.0.1 (offline)"))
    return p


def main(argv=None):
    p = build_parser()
    args, extra = p.parse_known_args(argv)
    if args.cmd == "bench":           # everything after `bench` belongs to bench/linear.py
        rest = extra + args.rest
        args.rest = rest[1:] if rest[:1] == ["--"] else rest
    elif extra:
        p.error(f"unrecognized arguments: {' '.join(extra)}")
    if args.cmd == "serve":
        return serve.run(args)
    from ..errors import NumrError
    try:
        return {"info": cmd_info, "demo": cmd_demo, "bench": cmd_bench,
                "shaders": cmd_shaders}[args.cmd](args)
    except (NumrError, ValueError) as e:
        print(f"numr-web {args.cmd}: {type(e).__name__}: {e}", file=sys.stderr)
        return 2
    except BrokenPipeError:           # `numr-web shaders | head`: the reader left, nothing to say
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0
    except OSError as e:              # a file that cannot be written or read: one line, no traceback
        print(f"numr-web {args.cmd}: {e}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
