"""The cuda device (CuPy), in layers:

    kernels.cu   hand-written CUDA bodies (elementwise, GEMM epilogue, fused act-backward with the
                 bias gradient, deterministic scatter-add), with one marker line where
    codegen.py   inserts the per-activation functions and dispatch GENERATED from the activation
                 table (numr_web/vocab/activations.py); needs neither cupy nor a GPU
    launch.py    compiles each kernel family once (NVRTC via cupy.RawModule) and launches the
                 kernels with argument buffers bound once (cuLaunchKernel through CuPy's driver API)
    blas.py      2-D GEMMs through cuBLAS on numr's own handle and workspace (recordable in graphs)
    backend.py   CudaBackend: the Backend interface on ArrayBackend (cupy) plus those kernels
    graphs.py    recording a step into a CUDA graph (used by nr.capture, numr_web/capture.py)

Nothing here imports cupy at import time; the registry loads backend.py when "cuda" is first used.
"""
