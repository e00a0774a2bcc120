"""The op vocabulary, one module per family: each op's public function (argument checks, dtype
rules), the Tensor methods it provides and, for the families other than the elementwise one, its
row (forward + VJP). The declarative rows (elementwise ops, the ACT table) and OPS live one layer
down, in numr_web/vocab/, which backends read:

    elementwise.py    the elementwise rows registered as ops; where, astype, activations, act_backward
    reductions.py     sum mean max min, argmax argmin, softmax log_softmax
    linalg.py         matmul, matmul_bias_activation (the fused layer)
    shape_ops.py      reshape permute expand indexing concat stack
    nn_functional.py  one_hot, nll_loss, cross_entropy
    parametric.py     leaky_relu, elu, softplus, hardtanh, relu6 with torch's parameters
    padding.py        pad (constant, reflect, replicate, circular)
    losses.py         mse, l1, smooth L1, Huber, binary cross entropy (+ with logits), KL divergence
    math_ops.py       rounding, exp2/log2/log10, tan, hyperbolic and inverse trig, fmod, atan2, and
                      torch's predicates (isnan, isclose, ...) and comparison functions
    composites.py     torch functions made of the ops above: movedim, roll, tile, mm, norm, cumsum ...
    sorting.py        argsort (a backend primitive or a bitonic network), sort, topk, median
    inplace.py        x.add_(y), x += y, x[i] = v: a write re-points the tensor object (versions
                      checked by autograd)
    torch_aliases.py  torch's other names: t(), mH, clamp_min, is_tensor, numel
    torch_functions.py  broadcasting helpers, take_along_dim, scatter_add, tensordot, kron, cross,
                      logaddexp, hypot, fmax, randperm, and method forms (x.add(y, alpha=), ...)

This package file imports nothing; numr_web/__init__.py imports the families. (registry.py and
activations.py here re-export numr_web/vocab's names for code that imports them from ops.)
"""
