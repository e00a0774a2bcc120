"""Golden values for the browser parity page, computed natively on the cpu (numpy) backend.

    python scripts/make_golden.py [--out web/public/golden/parity.json]

The cases are defined once in web/py/parity_cases.py (the parity page runs the same file in Pyodide on
the webgpu backend). A case that fails natively is recorded with its error (the page shows it as FAIL).
"""
from __future__ import annotations

import argparse
import asyncio
import importlib.util
import json
import platform
import sys
import time
import traceback
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def load_cases():
    spec = importlib.util.spec_from_file_location("parity_cases", ROOT / "web" / "py" / "parity_cases.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


async def build(pc, nr, device):
    out = []
    for c in pc.CASES:
        inputs = {name: {"kind": kind, "shape": list(shape), "data": pc.make_data(kind, shape, f"{c.name}/{name}")}
                  for name, kind, shape in c.inputs}
        rec = {"name": c.name, "group": c.group, "grad": c.grad, "atol": c.atol, "rtol": c.rtol,
               "inputs": inputs}
        try:
            outs, shapes, w = await pc.run_case(nr, c, {k: v["data"] for k, v in inputs.items()}, device)
            rec.update(outputs=outs, shapes=shapes, w=w)
        except Exception as e:  # recorded; the page reports it
            rec["error"] = f"{type(e).__name__}: {e}"
            print(f"make_golden: case {c.name!r} failed on {device}: {rec['error']}", file=sys.stderr)
            traceback.print_exc(limit=2)
        out.append(rec)
    return out


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--out", default=str(ROOT / "web" / "public" / "golden" / "parity.json"))
    p.add_argument("--device", default="cpu")
    a = p.parse_args(argv)
    sys.path.insert(0, str(ROOT))
    import numr_web as nr
    pc = load_cases()
    t0 = time.perf_counter()
    cases = asyncio.run(build(pc, nr, a.device))
    doc = {"meta": {"device": a.device, "numr_web": getattr(nr, "__version__", "?"),
                    "python": platform.python_version(), "atol": pc.ATOL, "rtol": pc.RTOL,
                    "generated_in_s": round(time.perf_counter() - t0, 3)},
           "cases": cases}
    Path(a.out).parent.mkdir(parents=True, exist_ok=True)
    Path(a.out).write_text(json.dumps(doc, separators=(",", ":")))
    bad = sum("error" in c for c in cases)
    print(f"make_golden: {len(cases)} cases ({bad} failed natively) -> {a.out}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
