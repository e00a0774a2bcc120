# Parity page driver (web/parity.html): runs parity_cases.py (loaded before this file) on webgpu
# against the golden JSON and reports one row per case through a JS callback.
import json
import time

import numr_web as nr
from numr_web.apps.js_values import js_object


async def parity_run(arg, emit=None, should_stop=None, device="webgpu"):
    """arg: {golden: the golden JSON text, only: run the cases whose name contains this ('' = all),
    device: the device to run on (the page's: webgpu, or cpu where the browser has no WebGPU)}.
    emit(row) after every case; returns the summary."""
    arg = arg.to_py() if hasattr(arg, "to_py") else dict(arg)
    device = arg.get("device") or device
    golden = json.loads(arg["golden"])
    only = arg.get("only") or ""
    by_name = {c.name: c for c in CASES}
    rows = []
    for g in golden["cases"]:
        if only and only not in g["name"]:
            continue
        row = {"name": g["name"], "group": g.get("group", ""), "outputs": "", "max_abs": None,
               "max_rel": None, "worst": None, "ms": 0.0, "status": "FAIL", "error": ""}
        t0 = time.perf_counter()
        try:
            if "error" in g:
                raise RuntimeError(f"no golden value (failed natively: {g['error']})")
            c = by_name.get(g["name"])
            if c is None:
                raise RuntimeError("case missing from parity_cases.py (stale golden JSON?)")
            inputs = {k: v["data"] for k, v in g["inputs"].items()}
            got, shapes, _ = await run_case(nr, c, inputs, device, w=g.get("w"))
            max_abs = max_rel = worst = 0.0
            for k, ref in g["outputs"].items():
                if k not in got:
                    raise RuntimeError(f"output {k} missing")
                if shapes.get(k) != g["shapes"].get(k):
                    raise RuntimeError(f"{k}: shape {shapes.get(k)} != golden {g['shapes'].get(k)}")
                a, r, w = compare(got[k], ref, g["atol"], g["rtol"])
                max_abs, max_rel, worst = max(max_abs, a), max(max_rel, r), max(worst, w)
            row.update(outputs=", ".join(g["outputs"]), max_abs=max_abs, max_rel=max_rel, worst=worst,
                       status="PASS" if worst <= 1.0 else "FAIL")
        except Exception as e:
            row["error"] = f"{type(e).__name__}: {e}"
        row["ms"] = (time.perf_counter() - t0) * 1e3
        rows.append(row)
        if emit is not None:
            emit(js_object(row))
    ok = all(r["status"] == "PASS" for r in rows)
    return js_object({"status": "PASS" if ok and rows else "FAIL", "n": len(rows),
                      "failed": [r["name"] for r in rows if r["status"] != "PASS"],
                      "max_worst": max([r["worst"] for r in rows if r["worst"] is not None] or [0.0]),
                      "meta": golden.get("meta", {})})
