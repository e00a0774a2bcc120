"""The webgpu backend: WGSL kernels (shaders/*.wgsl) run through a GPU adapter.

  backend.WebGPUBackend      the Backend: primitives composed from views and launchers; chooses
                             the multi-launch schedules (split-K, chunked / tree reductions)
  launch_elementwise, launch_reduce, launch_gemm   one launcher per kernel family
  dispatch                   metadata arena, batching into queue submits, binding ranges, memory
  fusion, codegen_fused      elementwise chains recorded lazily and run as one generated kernel
  contract, codegen          the named metadata / binding contract and the WGSL generated from it
                             and from the op and activation tables (codegen.dump())
  kernels                    shader loading, module assembly per dtype, pipeline cache
  views                      GPUArray views and stride algebra (pure)
  buffers                    buffer pool by size class
  adapter.GPUAdapter         the adapter protocol (what native and browser implement)
  adapter_native.NativeAdapter   wgpu-py (the only module importing wgpu)
  adapter_browser.BrowserAdapter Pyodide + navigator.gpu

Nothing is imported here, so importing the package never touches a GPU.
"""
