"""Sampling from distributions given as tensors: multinomial, bernoulli, poisson, normal (torch's
signatures), composed from the uniform generator and device ops, so they run on every device and
draw from the default generator (nr.manual_seed) unless given one. The distributions are torch's;
the streams are not (a seed gives other values than in torch).

    multinomial  without replacement: the exponential race (the k largest w_i / E_i, E_i ~ Exp(1)
                 are a draw of k categories without replacement: torch's method); with
                 replacement: inversion of the row's cumulative weights
    bernoulli    u < p
    poisson      rate < 10: inversion by sequential search; rate >= 10: Hormann's transformed
                 rejection with squeeze (PTRS, numpy's and torch's method); both read back once
                 per few rounds whether every element is done (as nonzero does)
"""
from __future__ import annotations

import math

from .. import dtypes as dt
from ..creation import full, rand, randn
from ..errors import DTypeError, ShapeError
from ..gradmode import no_grad
from ..tensor import Tensor
from .common import method_class, need_tensor
from .composites import cumsum
from .elementwise import where
from .inplace import _method as _inplace
from .sorting import topk


def _check_later(x, bad, message):
    """Raise ShapeError(message) if any of `bad` is true: at once on cpu, at the next readback
    on a GPU (numr_web's deferred checks, naming the call)."""
    op, _, text = message.partition(": ")
    x._backend.check_later(bad.any()._data if bad.size else None, op, text)


def _float_work(x):
    return x.detach() if x.dtype in (dt.float32, dt.float64) else x.detach().astype(dt.float32)


def multinomial(input, num_samples, replacement=False, *, generator=None):  # noqa: A002
    """Indices of categories drawn from each row of non-negative weights `input` (1-D or 2-D,
    need not sum to 1): (num_samples,) or (rows, num_samples), int32 (torch's int64)."""
    w = need_tensor(input, "multinomial")
    if not w.dtype.is_floating:
        raise DTypeError(f"multinomial needs floating-point weights, got {w.dtype.name}")
    if w.ndim not in (1, 2):
        raise ShapeError(f"multinomial: weights must be 1-D or 2-D, got shape {w.shape}")
    if not isinstance(num_samples, int) or isinstance(num_samples, bool) or num_samples < 1:
        raise ShapeError(f"multinomial: num_samples must be a positive int, got {num_samples!r}")
    n = w.shape[-1]
    if n == 0:
        raise ShapeError("multinomial: the weights have no categories (last dim of size 0)")
    if not replacement and num_samples > n:
        raise ShapeError(f"multinomial: cannot draw {num_samples} samples without replacement "
                         f"from {n} categories; use replacement=True or num_samples <= {n}")
    rows = w.reshape(-1, n)
    with no_grad():
        p = _float_work(rows)
        _check_later(p, (p < 0) | (p != p) | (p == math.inf),
                     "multinomial: the weights contain inf, NaN or a negative value")
        positive = (p > 0).astype(dt.int32).sum(-1)
        _check_later(p, positive == 0, "multinomial: a row of weights sums to 0 (at least one "
                                       "weight must be positive)")
        if not replacement:
            _check_later(p, positive < num_samples,
                         f"multinomial: a row has fewer than {num_samples} categories of positive "
                         "weight, too few to draw that many without replacement")
            # 1 - u is in (0, 1]: E = -log(1 - u) is finite and >= 0
            e = -(1.0 - rand(p.shape, generator=generator, dtype=p.dtype, device=p.device)).log()
            out = topk(p / e, num_samples, -1).indices
        else:
            c = cumsum(p, -1)
            c = c / c[:, -1:]                   # the last bound is exactly 1: u < 1 stays inside
            u = rand((p.shape[0], num_samples, 1), generator=generator, dtype=p.dtype,
                     device=p.device)
            out = (c.unsqueeze(1) <= u).astype(dt.int32).sum(-1)
    return out.reshape(w.shape[:-1] + (num_samples,))


def bernoulli(input, p=None, *, generator=None):  # noqa: A002
    """1 with probability p (default: input's values, which must be in [0, 1]) else 0, in
    input's dtype."""
    x = need_tensor(input, "bernoulli")
    if not x.dtype.is_floating:
        raise DTypeError(f"bernoulli needs a floating-point tensor, got {x.dtype.name}")
    with no_grad():
        if p is None:
            prob = x.detach()
            _check_later(prob, ~((prob >= 0) & (prob <= 1)),
                         "bernoulli: probabilities must be in [0, 1]")
        else:
            if isinstance(p, Tensor):
                prob = p.detach()
            elif isinstance(p, (int, float)) and not isinstance(p, bool):
                if not 0 <= p <= 1:
                    raise ShapeError(f"bernoulli: p must be in [0, 1], got {p}")
                prob = p
            else:
                raise DTypeError(f"bernoulli: p must be a number or a Tensor, got {p!r}")
        u = rand(x.shape, generator=generator, dtype=x.dtype, device=x.device)
        return (u < prob).astype(x.dtype)


def normal(mean, std=1.0, size=None, *, generator=None, dtype=None, device=None):
    """torch.normal: mean and std tensors (broadcast) or numbers (then `size` gives the shape);
    differentiable in mean and std (out = mean + std * z)."""
    if not isinstance(mean, Tensor) and not isinstance(std, Tensor):
        if size is None:
            raise ShapeError("normal(mean, std) with two numbers needs size=")
        if std < 0:
            raise ShapeError(f"normal: std must be >= 0, got {std}")
        return randn(tuple(size), generator=generator, dtype=dtype, device=device) * std + mean
    like = mean if isinstance(mean, Tensor) else std
    shape = like.shape
    if isinstance(mean, Tensor) and isinstance(std, Tensor):
        from ..shapes import broadcast_shapes
        shape = broadcast_shapes(mean.shape, std.shape)
    if isinstance(std, Tensor):
        _check_later(std, std.detach() < 0, "normal: std must be >= 0")
    elif std < 0:
        raise ShapeError(f"normal: std must be >= 0, got {std}")
    z = randn(shape, generator=generator, dtype=like.dtype, device=like.device)
    return mean + std * z


# -- poisson ---------------------------------------------------------------------------------------
_SMALL = 10.0                  # below: inversion; from here: PTRS (valid for rate >= 10)
_ROUNDS = 16                   # sequential-search steps / rejection rounds between readbacks


def _log_factorial(k):
    """log(k!) for integer-valued k >= 0 (a float tensor): Stirling's series at k + 8, shifted
    back by the log of (k+1)...(k+7); the series' error there is below 1e-10."""
    z = k + 8.0
    s = (z - 0.5) * z.log() - z + 0.5 * math.log(2 * math.pi)
    s = s + 1.0 / (12.0 * z) - 1.0 / (360.0 * z * z * z) + 1.0 / (1260.0 * z ** 5)
    prod = k + 1.0
    for j in range(2, 8):
        prod = prod * (k + float(j))
    return s - prod.log()


def _poisson_small(lam, generator):
    """Inversion: the count of cumulative probabilities below u (rates < 10 here)."""
    lam = where(lam < _SMALL, lam, 0.0)
    u = rand(lam.shape, generator=generator, dtype=lam.dtype, device=lam.device)
    pmf = (-lam).exp()
    cdf, count, k = pmf, full(lam.shape, 0.0, dtype=lam.dtype, device=lam.device), 0
    while True:
        for _ in range(_ROUNDS):
            above = u > cdf
            count = count + above.astype(lam.dtype)
            k += 1
            pmf = pmf * lam / float(k)
            cdf = cdf + pmf
        if not bool(((u > cdf) & (pmf > 0)).any()):
            return count


def _poisson_ptrs(lam, generator):
    """Hormann (1993), "The transformed rejection method for generating Poisson random
    variables", algorithm PTRS, for rates >= 10."""
    lam = where(lam >= _SMALL, lam, _SMALL)
    slam, loglam = lam.sqrt(), lam.log()
    b = 0.931 + 2.53 * slam
    a = -0.059 + 0.02483 * b
    log_inv_alpha = (1.1239 + 1.1328 / (b - 3.4)).log()
    vr = 0.9277 - 3.6224 / (b - 2.0)
    out = full(lam.shape, -1.0, dtype=lam.dtype, device=lam.device)
    while True:
        for _ in range(_ROUNDS):
            u = rand(lam.shape, generator=generator, dtype=lam.dtype, device=lam.device) - 0.5
            v = rand(lam.shape, generator=generator, dtype=lam.dtype, device=lam.device)
            us = 0.5 - u.abs()
            k = ((2.0 * a / us + b) * u + lam + 0.43).floor()
            quick = (us >= 0.07) & (v <= vr)
            valid = (k >= 0) & ~((us < 0.013) & (v > us))
            kk = where(k >= 0, k, 0.0)
            lhs = v.log() + log_inv_alpha - (a / (us * us) + b).log()
            accept = quick | (valid & (lhs <= -lam + kk * loglam - _log_factorial(kk)))
            out = where((out < 0) & accept, k, out)
        if not bool((out < 0).any()):
            return out


def poisson(input, generator=None):  # noqa: A002
    """Poisson counts with the rates in `input` (>= 0), as floats of input's dtype."""
    x = need_tensor(input, "poisson")
    if not x.dtype.is_floating:
        raise DTypeError(f"poisson needs floating-point rates, got {x.dtype.name}")
    with no_grad():
        lam = _float_work(x)
        if x.dtype is dt.float32 and x.device != "webgpu":
            lam = lam.astype(dt.float64)        # the rejection test in double, where there is one
        bad = ~(lam >= 0) | (lam == math.inf)
        if bool(bad.any()):
            raise ShapeError("poisson: rates must be finite and >= 0 (some are negative, inf or "
                             "NaN)")
        small = lam < _SMALL
        out = _poisson_small(lam, generator)
        if not bool(small.all()):
            out = where(small, out, _poisson_ptrs(lam, generator))
        return out.astype(x.dtype)


def _exponential(x, lambd=1.0, *, generator=None):
    if not x.dtype.is_floating:
        raise DTypeError(f"exponential_ needs a floating-point tensor, got {x.dtype.name}")
    if not lambd > 0:
        raise ShapeError(f"exponential_ expects lambd > 0, got {lambd}")
    with no_grad():
        u = rand(x.shape, generator=generator, dtype=x.dtype, device=x.device)
        return -(1.0 - u).log() / lambd


def _bernoulli_fill(x, p=0.5, *, generator=None):
    return bernoulli(x.detach(), p, generator=generator)


SamplingMethods = method_class(
    "SamplingMethods", multinomial=multinomial, bernoulli=bernoulli,
    bernoulli_=_inplace("bernoulli", _bernoulli_fill),
    exponential_=_inplace("exponential", _exponential))
