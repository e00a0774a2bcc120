"""Every kernel module the webgpu backend generates (each kernel file of the contract, per dtype)
compiles in Chromium's WGSL compiler (Tint) and makes a compute pipeline for each of its entry points
on a device with WebGPU's default limits (16 KiB of workgroup memory, 8 storage buffers per stage).
The browser runs the same shaders as wgpu-native, whose compiler (naga) accepts some programs Tint
rejects (uniformity, shadowing, constant folding). The GEMM files (matmul.wgsl and matmul_sg.wgsl, which
includes it) are left out of the default-limits check: their larger tiles need the workgroup memory an
adapter grants beyond the defaults, and launch_gemm picks tiles from those limits; the subgroup GEMM is
compiled on its own with the adapter's limits and the "subgroups" feature, where Chromium offers it.
Needs only Chromium, not the built app."""
from __future__ import annotations

import functools
import http.server
import threading

import pytest

from numr_web import dtypes
from numr_web.backends.webgpu import contract, kernels

COMPILE_JS = """
async (jobs) => {
  const adapter = await navigator.gpu.requestAdapter();
  if (!adapter) return {skipped: 'no WebGPU adapter', errors: []};
  const f16 = adapter.features.has('shader-f16');
  const sg = adapter.features.has('subgroups');
  if (jobs.some((j) => j.subgroups) && !sg) return {skipped: 'no subgroups feature', errors: []};
  const requiredFeatures = (f16 ? ['shader-f16'] : []).concat(sg ? ['subgroups'] : []);
  const requiredLimits = jobs.some((j) => j.subgroups)
    ? {maxComputeWorkgroupStorageSize: adapter.limits.maxComputeWorkgroupStorageSize} : {};
  const device = await adapter.requestDevice({requiredFeatures, requiredLimits});
  const errors = [];
  let compiled = 0;
  for (const job of jobs) {
    if (job.f16 && !f16) continue;
    device.pushErrorScope('validation');
    const module = device.createShaderModule({code: job.src});
    for (const m of (await module.getCompilationInfo()).messages) {
      if (m.type === 'error') errors.push(`${job.label} line ${m.lineNum}: ${m.message}`);
    }
    for (const entry of job.entries) {
      try {
        await device.createComputePipelineAsync({layout: 'auto', compute: {module, entryPoint: entry}});
      } catch (e) { errors.push(`${job.label}:${entry}: ${e.message}`); }
    }
    const scope = await device.popErrorScope();
    if (scope) errors.push(`${job.label}: ${scope.message}`);
    compiled += 1;
  }
  return {skipped: null, errors, compiled};
}
"""


class _Quiet(http.server.SimpleHTTPRequestHandler):
    def log_message(self, *args):
        pass


@pytest.fixture(scope="module")
def blank_url(tmp_path_factory):
    """A blank page on 127.0.0.1 (a secure context: navigator.gpu exists there)."""
    root = tmp_path_factory.mktemp("blank")
    (root / "index.html").write_text("<!doctype html><title>wgsl</title>")
    srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0),
                                          functools.partial(_Quiet, directory=str(root)))
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{srv.server_address[1]}/index.html"
    srv.shutdown()
    srv.server_close()


def test_every_generated_kernel_module_compiles_in_chromium(page, blank_url):
    jobs = []
    files = {n: k for n, k in contract.KERNELS.items()
             if n != contract.MATMUL.name and contract.MATMUL.name not in k.includes}
    for name, k in files.items():
        for dt in ("float32", "float16", "int32", "bool"):
            jobs.append({"label": f"{name}[{dt}]", "f16": dt == "float16", "entries": list(k.entries),
                         "src": kernels.module_source(name, dtypes.get_dtype(dt))})
    page.goto(blank_url)
    result = page.evaluate(COMPILE_JS, jobs)
    if result["skipped"]:
        pytest.fail(f"Chromium: {result['skipped']}")
    assert not result["errors"], "\n".join(result["errors"][:10])
    assert result["compiled"] >= 3 * len(files)


def test_subgroup_gemm_compiles_in_chromium(page, blank_url):
    """matmul_sg.wgsl with the browser's `enable subgroups;` directive, as adapter_browser builds it."""
    k = contract.MATMUL_SG
    enables = {"subgroup": "enable_subgroups.wgsl"}
    jobs = [{"label": f"{k.name}[{dt}]", "f16": dt == "float16", "subgroups": True, "entries": list(k.entries),
             "src": kernels.module_source(k.name, dtypes.get_dtype(dt), enables=enables)}
            for dt in ("float32", "float16")]
    page.goto(blank_url)
    result = page.evaluate(COMPILE_JS, jobs)
    if result["skipped"]:
        pytest.skip(f"this Chromium's adapter: {result['skipped']}")
    assert not result["errors"], "\n".join(result["errors"][:10])
    assert result["compiled"] >= 1
