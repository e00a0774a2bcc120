"""Adadelta, Adagrad, RMSprop, Adamax, NAdam and RAdam with torch.optim's update formulas and the
same order of operations (tested against torch in float64, step by step): each update is made of
device ops with Python-float coefficients and rebinds the parameter (optimizer.py). A state that
torch starts at zeros starts as the Python 0.0 here (no zeros tensor is made: 0 * rho + x is x)."""
from __future__ import annotations

import struct

from .. import _core
from .optimizer import (Optimizer, _check, _check_adam, _check_common, _is_number, _lerp,
                        _no_differentiable)


def _weight_decay(g, p, group):
    wd = group["weight_decay"]
    return g + p * wd if wd else g


def _maybe_neg(g, group):
    return -g if group.get("maximize") else g


def _f32(x):
    """x rounded to float32 (torch keeps NAdam's mu_product in a float32 tensor)."""
    return struct.unpack("<f", struct.pack("<f", x))[0]


class Adadelta(Optimizer):
    """torch.optim.Adadelta: E[g^2] = rho E[g^2] + (1 - rho) g^2; delta = sqrt(E[dx^2] + eps) /
    sqrt(E[g^2] + eps) g; E[dx^2] = rho E[dx^2] + (1 - rho) delta^2; p -= lr delta."""

    def __init__(self, params, lr=1.0, rho=0.9, eps=1e-6, weight_decay=0.0, foreach=None, *,
                 capturable=False, maximize=False, differentiable=False):
        _no_differentiable(differentiable)
        _check_common(lr, weight_decay)
        _check("rho value", rho, _is_number(rho) and 0 <= rho <= 1, "0 <= rho <= 1")
        _check("epsilon value", eps, _is_number(eps) and eps >= 0, "eps >= 0")
        super().__init__(params, dict(lr=lr, rho=rho, eps=eps, weight_decay=weight_decay,
                                      maximize=bool(maximize)))

    def _update(self, p, g, state, group):
        rho, eps, lr = group["rho"], group["eps"], group["lr"]
        state["step"] = state.get("step", 0) + 1
        g = _weight_decay(_maybe_neg(g, group), p, group)
        sq = state.get("square_avg", 0.0) * rho + (g * (1 - rho)) * g
        acc = state.get("acc_delta")
        if acc is None:
            acc = _core.zeros_like(p)
        std = (sq + eps).sqrt()
        delta = (acc + eps).sqrt() / std * g
        state["square_avg"] = sq
        state["acc_delta"] = acc * rho + (delta * (1 - rho)) * delta
        self._assign(p, p - delta * lr)


class Adagrad(Optimizer):
    """torch.optim.Adagrad: sum += g^2; p -= lr / (1 + (step - 1) lr_decay) g / (sqrt(sum) + eps)."""

    def __init__(self, params, lr=1e-2, lr_decay=0.0, weight_decay=0.0,
                 initial_accumulator_value=0.0, eps=1e-10, foreach=None, *, maximize=False,
                 differentiable=False, fused=None):
        _no_differentiable(differentiable)
        _check_common(lr, weight_decay)
        _check("lr_decay value", lr_decay, _is_number(lr_decay) and lr_decay >= 0,
               "lr_decay >= 0")
        _check("initial_accumulator_value value", initial_accumulator_value,
               _is_number(initial_accumulator_value) and initial_accumulator_value >= 0,
               "initial_accumulator_value >= 0")
        _check("epsilon value", eps, _is_number(eps) and eps >= 0, "eps >= 0")
        super().__init__(params, dict(lr=lr, lr_decay=lr_decay, weight_decay=weight_decay,
                                      initial_accumulator_value=initial_accumulator_value,
                                      eps=eps, maximize=bool(maximize)))

    def _update(self, p, g, state, group):
        step = state["step"] = state.get("step", 0) + 1
        g = _weight_decay(_maybe_neg(g, group), p, group)
        clr = group["lr"] / (1 + (step - 1) * group["lr_decay"])
        total = state.get("sum")
        if total is None:
            total = _core.full(p.shape, float(group["initial_accumulator_value"]),
                               dtype=p.dtype, device=p.device)
        total = state["sum"] = total + g * g
        self._assign(p, p - (g / (total.sqrt() + group["eps"])) * clr)


class RMSprop(Optimizer):
    """torch.optim.RMSprop: v = alpha v + (1 - alpha) g^2 (centered: minus the running mean's
    square); p -= lr g / (sqrt(v) + eps), through a momentum buffer when momentum > 0."""

    def __init__(self, params, lr=1e-2, alpha=0.99, eps=1e-8, weight_decay=0.0, momentum=0.0,
                 centered=False, capturable=False, foreach=None, maximize=False,
                 differentiable=False):
        _no_differentiable(differentiable)
        _check_common(lr, weight_decay)
        _check("epsilon value", eps, _is_number(eps) and eps >= 0, "eps >= 0")
        _check("momentum value", momentum, _is_number(momentum) and momentum >= 0,
               "momentum >= 0")
        _check("alpha value", alpha, _is_number(alpha) and alpha >= 0, "alpha >= 0")
        super().__init__(params, dict(lr=lr, alpha=alpha, eps=eps, weight_decay=weight_decay,
                                      momentum=momentum, centered=bool(centered),
                                      maximize=bool(maximize)))

    def _update(self, p, g, state, group):
        alpha, lr, mom = group["alpha"], group["lr"], group["momentum"]
        state["step"] = state.get("step", 0) + 1
        g = _weight_decay(_maybe_neg(g, group), p, group)
        sq = state["square_avg"] = state.get("square_avg", 0.0) * alpha + (g * (1 - alpha)) * g
        if group["centered"]:
            ga = state["grad_avg"] = _lerp(state.get("grad_avg", 0.0), g, 1 - alpha)
            avg = (sq - ga * ga).sqrt()
        else:
            avg = sq.sqrt()
        avg = avg + group["eps"]
        if mom > 0:
            buf = state["momentum_buffer"] = state.get("momentum_buffer", 0.0) * mom + g / avg
            self._assign(p, p - buf * lr)
        else:
            self._assign(p, p - (g / avg) * lr)


class Adamax(Optimizer):
    """torch.optim.Adamax: m = lerp(m, g, 1 - beta1); u = max(beta2 u, |g| + eps);
    p -= lr / (1 - beta1^t) m / u."""

    def __init__(self, params, lr=2e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.0,
                 foreach=None, *, maximize=False, differentiable=False, capturable=False):
        _no_differentiable(differentiable)
        _check_common(lr, weight_decay)
        _check_adam(betas, eps)
        super().__init__(params, dict(lr=lr, betas=tuple(betas), eps=eps,
                                      weight_decay=weight_decay, maximize=bool(maximize)))

    def _update(self, p, g, state, group):
        (b1, b2), lr = group["betas"], group["lr"]
        step = state["step"] = state.get("step", 0) + 1
        g = _weight_decay(_maybe_neg(g, group), p, group)
        m = state["exp_avg"] = _lerp(state.get("exp_avg", 0.0), g, 1 - b1)
        u = g.abs() + group["eps"]
        if "exp_inf" in state:
            u = _core.maximum(state["exp_inf"] * b2, u)
        state["exp_inf"] = u
        clr = lr / (1 - b1 ** step)
        self._assign(p, p - (m / u) * clr)


def _decay(p, g, group):
    """NAdam's / RAdam's weight decay: L2 (added to g) or decoupled (p *= 1 - lr wd)."""
    wd = group["weight_decay"]
    if not wd:
        return p, g
    if group["decoupled_weight_decay"]:
        return p * (1 - group["lr"] * wd), g
    return p, g + p * wd


class NAdam(Optimizer):
    """torch.optim.NAdam (Adam with Nesterov momentum and the momentum-decay schedule
    mu_t = beta1 (1 - 0.96^(t psi) / 2))."""

    def __init__(self, params, lr=2e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.0,
                 momentum_decay=4e-3, decoupled_weight_decay=False, *, foreach=None,
                 maximize=False, capturable=False, differentiable=False):
        _no_differentiable(differentiable)
        _check_common(lr, weight_decay)
        _check_adam(betas, eps)
        _check("momentum_decay value", momentum_decay,
               _is_number(momentum_decay) and momentum_decay >= 0, "momentum_decay >= 0")
        super().__init__(params, dict(lr=lr, betas=tuple(betas), eps=eps,
                                      weight_decay=weight_decay, momentum_decay=momentum_decay,
                                      decoupled_weight_decay=bool(decoupled_weight_decay),
                                      maximize=bool(maximize)))

    def _update(self, p, g, state, group):
        (b1, b2), lr, psi = group["betas"], group["lr"], group["momentum_decay"]
        step = state["step"] = state.get("step", 0) + 1
        bc2 = 1 - b2 ** step
        param = p
        p, g = _decay(p, _maybe_neg(g, group), group)
        mu = b1 * (1.0 - 0.5 * (0.96 ** (step * psi)))
        mu_next = b1 * (1.0 - 0.5 * (0.96 ** ((step + 1) * psi)))
        mu_product = state["mu_product"] = _f32(state.get("mu_product", 1.0) * _f32(mu))
        m = state["exp_avg"] = _lerp(state.get("exp_avg", 0.0), g, 1 - b1)
        v = state["exp_avg_sq"] = state.get("exp_avg_sq", 0.0) * b2 + (g * (1 - b2)) * g
        denom = (v / bc2).sqrt() + group["eps"]
        mu_product_next = mu_product * mu_next
        p = p + (g / denom) * (-lr * (1.0 - mu) / (1.0 - mu_product))
        self._assign(param, p + (m / denom) * ((-lr * mu_next) / (1.0 - mu_product_next)))


class RAdam(Optimizer):
    """torch.optim.RAdam: Adam whose adaptive step is rectified by r_t once the variance's
    approximated length rho_t exceeds 5 (plain momentum SGD before)."""

    def __init__(self, params, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.0,
                 decoupled_weight_decay=False, *, foreach=None, maximize=False,
                 capturable=False, differentiable=False):
        _no_differentiable(differentiable)
        _check_common(lr, weight_decay)
        _check_adam(betas, eps)
        super().__init__(params, dict(lr=lr, betas=tuple(betas), eps=eps,
                                      weight_decay=weight_decay,
                                      decoupled_weight_decay=bool(decoupled_weight_decay),
                                      maximize=bool(maximize)))

    def _update(self, p, g, state, group):
        (b1, b2), lr = group["betas"], group["lr"]
        step = state["step"] = state.get("step", 0) + 1
        param = p
        p, g = _decay(p, _maybe_neg(g, group), group)
        m = state["exp_avg"] = _lerp(state.get("exp_avg", 0.0), g, 1 - b1)
        v = state["exp_avg_sq"] = state.get("exp_avg_sq", 0.0) * b2 + (g * (1 - b2)) * g
        bc1, bc2 = 1 - b1 ** step, 1 - b2 ** step
        m_hat = m / bc1
        rho_inf = 2 / (1 - b2) - 1
        rho_t = rho_inf - 2 * step * (b2 ** step) / bc2
        if rho_t > 5.0:
            rect = ((rho_t - 4) * (rho_t - 2) * rho_inf /
                    ((rho_inf - 4) * (rho_inf - 2) * rho_t)) ** 0.5
            adaptive = (bc2 ** 0.5) / (v.sqrt() + group["eps"])
            self._assign(param, p - m_hat * lr * adaptive * rect)
        else:
            self._assign(param, p - m_hat * lr)
