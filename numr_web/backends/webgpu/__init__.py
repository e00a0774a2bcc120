"""The webgpu backend: WGSL kernels (shaders/*.wgsl) run through a GPU adapter.

  backend.WebGPUBackend       the Backend (primitives -> dispatches); imports neither wgpu nor numpy
  adapter.GPUAdapter          the adapter protocol (what native and browser implement)
  adapter_native.NativeAdapter  wgpu-py (the only module importing wgpu)
  adapter_browser.BrowserAdapter  Pyodide + navigator.gpu
  kernels                     shader loading, per-dtype specialisation, pipeline cache
  buffers                     buffer pool by size class
  selfcheck                   `python -m numr_web.backends.webgpu.selfcheck [--bench]`

Nothing is imported here, so importing the package never touches a GPU.
"""
