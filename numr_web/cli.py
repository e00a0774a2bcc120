"""`numr-web info | demo [--device D] | bench | serve [--port P] [--no-browser]`."""
from __future__ import annotations

import argparse
import sys
import time


def cmd_info(args):
    from . import backends
    print(f"numr_web {__import__('numr_web').__version__}  (Python {sys.version.split()[0]})")
    for dev in backends.REGISTRY:
        ok, why = backends.probe(dev)
        print(f"  {dev:7s} {'available' if ok else 'unavailable'}: {why}")
        if ok:
            try:
                for k, v in backends.get_backend(dev).info().items():
                    print(f"            {k}: {v}")
            except Exception as e:  # info must never crash the listing
                print(f"            (info failed: {type(e).__name__}: {e})")
    return 0


def cmd_demo(args):
    from .demo import train_digits
    try:
        from tqdm import tqdm
    except ImportError:
        tqdm = None
    device = args.device
    print(f"training a 64-{args.hidden}-{args.hidden}-10 MLP of fused Linear+{args.activation} "
          f"layers on the UCI digits data, device={device or 'cpu'}")
    bar = tqdm(total=args.epochs, unit="epoch") if tqdm else None

    def on_epoch(epoch, loss, acc):
        if bar is not None:
            bar.set_postfix(loss=f"{loss:.4f}", test_acc=f"{acc:.3f}")
            bar.update(1)
        else:
            print(f"epoch {epoch + 1:3d}  loss {loss:.4f}  test accuracy {acc:.3f}")

    t0 = time.perf_counter()
    model, history, acc = train_digits(device=device, epochs=args.epochs, hidden=args.hidden,
                                       activation=args.activation, seed=args.seed,
                                       on_epoch=on_epoch)
    if bar is not None:
        bar.close()
    print(f"final test accuracy: {acc * 100:.2f}%  ({time.perf_counter() - t0:.1f} s)")
    if args.plot:
        try:
            import matplotlib
            matplotlib.use("Agg")
            import matplotlib.pyplot as plt
            fig, ax = plt.subplots(figsize=(6, 3.5))
            ax.plot(range(1, len(history) + 1), history, marker="o")
            ax.set(xlabel="epoch", ylabel="training loss", yscale="log",
                   title=f"numr_web digits MLP on {device or 'cpu'} (test acc {acc * 100:.1f}%)")
            fig.tight_layout()
            fig.savefig(args.plot, dpi=100)
            print(f"loss curve saved to {args.plot}")
        except ImportError:
            print("matplotlib is not installed: no loss-curve plot (pip install matplotlib)")
    return 0 if acc >= args.min_accuracy else 1


def cmd_bench(args):
    import runpy
    from pathlib import Path
    script = Path(__file__).resolve().parent.parent / "bench" / "linear.py"
    if not script.exists():
        print("bench/linear.py is part of the source checkout; run it from there")
        return 1
    sys.argv = [str(script)] + args.rest
    runpy.run_path(str(script), run_name="__main__")
    return 0


def cmd_serve(args):
    from . import serve
    return serve.main(args)


def main(argv=None):
    p = argparse.ArgumentParser(prog="numr-web", description=__doc__)
    sub = p.add_subparsers(dest="cmd", required=True)
    sub.add_parser("info", help="list devices and their details")
    d = sub.add_parser("demo", help="train the digits MLP and print the test accuracy")
    d.add_argument("--device", default=None, help="cpu (default), webgpu or cuda")
    d.add_argument("--epochs", type=int, default=20)
    d.add_argument("--hidden", type=int, default=128)
    d.add_argument("--activation", default="gelu")
    d.add_argument("--seed", type=int, default=0)
    d.add_argument("--plot", default="loss_curve.png", help="loss-curve PNG ('' for none)")
    d.add_argument("--min-accuracy", type=float, default=0.0,
                   help="exit with status 1 below this test accuracy (0..1)")
    b = sub.add_parser("bench", help="run bench/linear.py (source checkout)")
    b.add_argument("rest", nargs=argparse.REMAINDER)
    s = sub.add_parser("serve", help="build and serve the web app on 127.0.0.1")
    s.add_argument("--port", type=int, default=8000)
    s.add_argument("--no-browser", action="store_true", help="do not open a web browser")
    s.add_argument("--rebuild", action="store_true", help="rebuild the wheel and the app first")
    s.add_argument("--quiet", action="store_true", help="no request log")
    args = p.parse_args(argv)
    from .errors import NumrError
    try:
        return {"info": cmd_info, "demo": cmd_demo, "bench": cmd_bench, "serve": cmd_serve}[args.cmd](args)
    except NumrError as e:
        print(f"numr-web: {type(e).__name__}: {e}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
