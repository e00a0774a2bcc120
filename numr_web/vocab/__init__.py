"""The bottom layer of the op vocabulary: declarative rows that backends, the tensor layer and
the op layer read, importing nothing above them (errors only):

    elementwise.py    one row per unary / binary / compare op: kernel family, numpy function,
                      dtype class, VJP, parity domain, whether the op layer generates its
                      function, method and in-place form
    activations.py    the ACT table: every activation in numpy, WGSL and CUDA, its third
                      derivative and whether it is piecewise (the GEMM epilogue policy)
    act_numpy.py      the array code the ACT rows call; act_d3.py their third derivatives
    registry.py       OPS, the rows autograd runs (forward + VJP), filled by numr_web/ops/;
                      family_names / numpy_function, from which backends derive their dispatch
    _erf.py, _divmod.py  numpy's missing erf, torch's floor division and remainder
"""
