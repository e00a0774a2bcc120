"""Optimizers with torch.optim's formulas, step for step (tested against torch in float64).

Every update is made of device ops with Python-float hyperparameters: a step never reads a value
back, so it queues on a GPU without waiting. The engine has no in-place ops, so an update computes
the new values and re-points the parameter at them (its identity stays; see _core.rebind)."""
from __future__ import annotations

import collections
import math

from .. import _core
from .._core import NumrError, Tensor
from ...profiler import scope as profiler_scope


class Optimizer:
    """Base class: param_groups (dicts with "params" and hyperparameters), per-parameter state,
    step(), zero_grad(), state_dict() / load_state_dict()."""

    def __init__(self, params, defaults):
        self.defaults = dict(defaults)
        self.state = collections.defaultdict(dict)   # parameter -> dict of its state (torch's)
        self.param_groups = []
        if isinstance(params, Tensor):
            raise NumrError("params must be an iterable of Tensors (or of dicts with 'params'), "
                            "got a single Tensor; wrap it in a list")
        groups = list(params)
        if not groups:
            raise NumrError(f"{type(self).__name__} got an empty parameter list")
        if not isinstance(groups[0], dict):
            groups = [{"params": groups}]
        for g in groups:
            self.add_param_group(g)

    def add_param_group(self, group):
        group = dict(group)
        ps = group["params"]
        ps = [ps] if isinstance(ps, Tensor) else list(ps)
        for p in ps:
            if not isinstance(p, Tensor):
                raise NumrError(f"optimizers take Tensors, got {type(p).__name__}")
            if not p.is_leaf:
                raise NumrError("can't optimize a non-leaf Tensor (one computed by ops); "
                                "optimize the leaves it came from")
        known = {id(p) for g in self.param_groups for p in g["params"]}
        if len({id(p) for p in ps}) != len(ps) or any(id(p) in known for p in ps):
            raise NumrError("some parameters appear more than once in the optimizer's groups")
        for k, v in self.defaults.items():
            group.setdefault(k, v)
        group["params"] = ps
        self.param_groups.append(group)

    def zero_grad(self, set_to_none=True):
        for g in self.param_groups:
            for p in g["params"]:
                if p.grad is not None:
                    p.grad = None if set_to_none else _core.zeros_like(p.grad)

    def step(self, closure=None):
        """One update of every parameter that has a .grad. closure (optional) re-evaluates the
        model and returns the loss, which step returns."""
        loss = None
        if closure is not None:
            with _core.enable_grad():
                loss = closure()
        first = self.param_groups[0]["params"][:1]
        with _core.no_grad(), profiler_scope(f"{type(self).__name__}.step",
                                             first[0]._backend if first else None):
            for group in self.param_groups:
                self._step_group(group, [p for p in group["params"] if p.grad is not None])
        return loss

    def _step_group(self, group, params):
        """Update the parameters of one group that have a gradient (one by one here)."""
        for p in params:
            self._update(p, p.grad, self.state.setdefault(p, {}), group)

    def _update(self, p, g, state, group):
        raise NotImplementedError

    def _step_skipping(self, found, *args, **kwargs):
        """step() for GradScaler with its device flag `found` (a 0-d float32 tensor, 1 where a
        gradient was inf / NaN): returns the ids of the parameters whose update this optimizer
        already skipped on the device where the flag is set (their state too); the scaler
        selects every other parameter back itself. Here: none."""
        self.step(*args, **kwargs)
        return set()

    @staticmethod
    def _assign(p, value):
        """Point the parameter at its new values (same shape, dtype, device). A p.detach() taken
        earlier keeps the old values, unlike torch's in-place step."""
        value = value.astype(p.dtype)
        if value.shape != p.shape:
            raise _core.ShapeError(f"optimizer update of shape {value.shape} for a parameter of "
                                   f"shape {p.shape}")
        _core.rebind(p, value)

    # -- checkpoints (torch's layout: parameters by their index over all groups) -------------------
    def state_dict(self):
        index, groups = {}, []
        for g in self.param_groups:
            for p in g["params"]:
                index.setdefault(id(p), len(index))
            groups.append({**{k: v for k, v in g.items() if k != "params"},
                           "params": [index[id(p)] for p in g["params"]]})
        # as torch: no entry for a parameter without state (SGD without momentum)
        state = {index[id(p)]: {k: v.detach() if isinstance(v, Tensor) else v
                                for k, v in s.items()}
                 for p, s in self.state.items() if s and id(p) in index}
        return {"state": state, "param_groups": groups}

    def load_state_dict(self, state_dict):
        saved = state_dict["param_groups"]
        if len(saved) != len(self.param_groups) or any(
                len(s["params"]) != len(g["params"]) for s, g in zip(saved, self.param_groups)):
            raise NumrError("loaded optimizer state has a different number of parameter groups "
                            "or of parameters per group than this optimizer")
        by_index = {}
        for s, g in zip(saved, self.param_groups):
            by_index.update(zip(s["params"], g["params"]))
            g.update({k: v for k, v in s.items() if k != "params"})
        self.state = collections.defaultdict(dict)
        for i, s in state_dict["state"].items():
            p = by_index[int(i)]
            self.state[p] = {k: _to_param(v, p) for k, v in s.items()}


def _runs(items, param):
    """Consecutive runs of items (of one backend) for one *_update_many call each, as long as
    the backend's update_list allows: its new values exist beside the old ones until stored."""
    most, elements = param(items[0])._backend.update_list
    out, run, n = [], [], 0
    for it in items:
        k = param(it).numel()
        if run and (len(run) >= most or n + k > elements):
            out.append(run)
            run, n = [], 0
        run.append(it)
        n += k
    return out + [run]


def _to_param(v, p):
    if not isinstance(v, Tensor):
        return v
    v = v.detach().to(p.device)
    return v.astype(p.dtype) if v.dtype.is_floating else v


def _check(what, value, ok, right):
    """torch's argument checks and messages (a ValueError there; ShapeError, a ValueError, here),
    plus what a valid value is."""
    if not ok:
        raise _core.ShapeError(f"Invalid {what}: {value!r}; expected {right}")


def _no_differentiable(differentiable):
    """torch's foreach= / fused= choose an implementation (same values): accepted and ignored.
    differentiable=True (autograd through the update) is not supported."""
    if differentiable:
        raise _core.UnsupportedError("differentiable=True (autograd through the optimizer step) "
                                     "is not supported; the step runs under no_grad")


def _check_common(lr, weight_decay):
    _check("learning rate", lr, _is_number(lr) and lr >= 0, "lr >= 0")
    _check("weight_decay value", weight_decay, _is_number(weight_decay) and weight_decay >= 0,
           "weight_decay >= 0")


def _check_adam(betas, eps):
    _check("epsilon value", eps, _is_number(eps) and eps >= 0, "eps >= 0")
    if not isinstance(betas, (list, tuple)) or len(betas) != 2:
        raise _core.ShapeError(f"Invalid betas: {betas!r}; expected a pair (beta1, beta2) in "
                               "[0, 1)")
    for i, b in enumerate(betas):
        _check(f"beta parameter at index {i}", b, _is_number(b) and 0 <= b < 1,
               "0 <= beta < 1")


def _is_number(v):
    return isinstance(v, (int, float)) and not isinstance(v, bool)


def _lerp(a, b, w):
    """torch.lerp's formula (two forms, chosen by the weight, for accuracy near each end)."""
    return a + (b - a) * w if abs(w) < 0.5 else b - (b - a) * (1 - w)


class SGD(Optimizer):
    """torch.optim.SGD: g += weight_decay * p; buf = momentum * buf + (1 - dampening) * g (buf = g
    on the first step); g = g + momentum * buf (nesterov) or buf; p -= lr * g."""

    def __init__(self, params, lr=1e-3, momentum=0.0, dampening=0.0, weight_decay=0.0,
                 nesterov=False, *, maximize=False, foreach=None, differentiable=False,
                 fused=None):
        _no_differentiable(differentiable)
        _check_common(lr, weight_decay)
        _check("momentum value", momentum, _is_number(momentum) and momentum >= 0,
               "momentum >= 0")
        if nesterov and (momentum <= 0 or dampening != 0):
            raise _core.ShapeError("Nesterov momentum requires a momentum and zero dampening; "
                                   f"got momentum={momentum}, dampening={dampening}")
        super().__init__(params, dict(lr=lr, momentum=momentum, dampening=dampening,
                                      weight_decay=weight_decay, nesterov=nesterov,
                                      maximize=bool(maximize)))

    def _step_group(self, group, params):
        """As Optimizer's, with the parameters whose backend updates a list in one pass
        (sgd_update_many: one kernel a list on cuda) updated that way."""
        for p in self._fused_many(group, params):               # tried there: composed
            self._composed(p, p.grad, self.state[p], group)

    def _fused_many(self, group, params):
        """The lists' updates; returns the parameters left to the composed form."""
        left, lists = [], {}
        for p in params:
            buf = self.state.setdefault(p, {}).get("momentum_buffer")
            if p.grad._backend is not p._backend or (buf is not None and
                                                     buf._backend is not p._backend):
                left.append(p)
            else:
                lists.setdefault(id(p._backend), []).append(p)
        for ps in (run for same in lists.values() for run in _runs(same, lambda p: p)):
            be, states = ps[0]._backend, [self.state[p] for p in ps]
            bufs = [s.get("momentum_buffer") for s in states]
            out = be.sgd_update_many(
                [(p._data, p.grad._data, None if b is None else b._data) for p, b in zip(ps, bufs)],
                group["weight_decay"], group["momentum"], group["dampening"], group["nesterov"],
                bool(group.get("maximize")), group["lr"])
            for i, p in enumerate(ps):
                if out is None or out[i] is None:
                    left.append(p)
                else:
                    self._store(p, states[i], out[i])
        return left

    @staticmethod
    def _store(p, state, out):
        _core.rebind(p, Tensor._wrap(out[0], p.dtype, p.device, p._backend))
        if out[1] is not None:
            state["momentum_buffer"] = Tensor._wrap(out[1], p.dtype, p.device, p._backend)

    def _update(self, p, g, state, group):
        if not self._fused(p, g, state, group):
            self._composed(p, g, state, group)

    def _composed(self, p, g, state, group):
        if group.get("maximize"):
            g = -g
        wd, mom = group["weight_decay"], group["momentum"]
        if wd:
            g = g + p * wd
        if mom:
            buf = state.get("momentum_buffer")
            damp = group["dampening"]
            buf = g if buf is None else buf * mom + (g * (1 - damp) if damp else g)
            state["momentum_buffer"] = buf
            g = g + buf * mom if group["nesterov"] else buf
        self._assign(p, p - g * group["lr"])

    def _fused(self, p, g, state, group):
        """The update above as one backend primitive where the backend has it (the same
        arithmetic in one pass): True when done."""
        be, buf = p._backend, state.get("momentum_buffer")
        if g._backend is not be or (buf is not None and buf._backend is not be):
            return False
        out = be.sgd_update(p._data, g._data, None if buf is None else buf._data,
                            group["weight_decay"], group["momentum"], group["dampening"],
                            group["nesterov"], bool(group.get("maximize")), group["lr"])
        if out is None:
            return False
        self._store(p, state, out)
        return True


class Adam(Optimizer):
    """torch.optim.Adam (L2 weight decay added to the gradient, or AdamW's decoupled decay with
    decoupled_weight_decay=True; amsgrad optional). capturable=True
    keeps the step count on the device, as torch's option does, so that nr.capture can record a
    step (with a Python count every step would differ)."""

    decoupled = False
    _found = None           # GradScaler's flag during _step_skipping, else None

    def __init__(self, params, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.0,
                 amsgrad=False, capturable=False, *, maximize=False, foreach=None,
                 differentiable=False, fused=None, decoupled_weight_decay=False):
        _no_differentiable(differentiable)
        _check_common(lr, weight_decay)
        _check_adam(betas, eps)
        decoupled = bool(decoupled_weight_decay) or self.decoupled      # Adam(True) is AdamW
        super().__init__(params, dict(lr=lr, betas=tuple(betas), eps=eps,
                                      weight_decay=weight_decay, amsgrad=amsgrad,
                                      capturable=bool(capturable), maximize=bool(maximize),
                                      decoupled_weight_decay=decoupled))

    def _step_group(self, group, params):
        """Every parameter's step count, then one update of the parameters whose backend
        updates a list in one pass (adam_update_many: one kernel a list on cuda), and each
        other one by itself."""
        if group["amsgrad"] or group.get("maximize"):
            return super()._step_group(group, params)
        todo = [(p, self.state.setdefault(p, {})) for p in params]
        todo = [(p, state, self._count(p, state, group)) for p, state in todo]
        for p, state, step in self._fused_many(group, todo):     # tried there: composed
            self._composed(p, p.grad, state, group, step)

    def _update(self, p, g, state, group):
        step = self._count(p, state, group)
        if not (group["amsgrad"] or group.get("maximize")) and self._fused(p, g, state, group, step):
            return
        self._composed(p, g, state, group, step)

    def _count(self, p, state, group):
        """The parameter's step count after this step: a number, or (capturable) a 0-d tensor."""
        step = state.get("step")
        if group["capturable"] and self._found is not None:
            inc = self._increment(p)          # 0 where GradScaler skips the step: the count stays
            step = state["step"] = inc + 0.0 if step is None else step + inc
        elif group["capturable"]:
            step = state["step"] = _core.full((), 1.0, dtype=p.dtype, device=p.device) \
                if step is None else step + 1
        else:
            step = state["step"] = (step or 0) + 1
        return step

    def _composed(self, p, g, state, group, step):
        lr, (b1, b2), wd = group["lr"], group["betas"], group["weight_decay"]
        if group.get("maximize"):
            g = -g
        base = p
        decoupled = group.get("decoupled_weight_decay", self.decoupled)
        if wd and decoupled:
            base = p * (1 - lr * wd)
        elif wd:
            g = g + p * wd
        m, v = state.get("exp_avg"), state.get("exp_avg_sq")
        # the moments start at zero: a Python 0.0 stands for them (no zeros tensors to make)
        m = _lerp(0.0 if m is None else m, g, 1 - b1)
        v = (g * (1 - b2)) * g if v is None else v * b2 + (g * (1 - b2)) * g
        state["exp_avg"], state["exp_avg_sq"] = m, v
        if group["amsgrad"]:
            vmax = state.get("max_exp_avg_sq")
            v = state["max_exp_avg_sq"] = v if vmax is None else _core.maximum(vmax, v)
        step_size = lr / (1 - b1 ** step)
        bc2 = 1 - b2 ** step
        denom = v.sqrt() / (bc2.sqrt() if isinstance(bc2, Tensor) else math.sqrt(bc2)) + group["eps"]
        self._assign(p, base - (m * step_size) / denom)

    def _fused(self, p, g, state, group, step):
        """The whole update as one backend primitive where the backend has it (the same
        arithmetic as the composed form below it, in one pass): True when done."""
        be = p._backend
        m, v = state.get("exp_avg"), state.get("exp_avg_sq")
        if g._backend is not be or (m is None) != (v is None):
            return False
        skip = self._skip(p)
        out = be.adam_update(p._data, g._data, None if m is None else m._data,
                             None if v is None else v._data, *self._hyper(group),
                             step._data if isinstance(step, Tensor) else step, **skip)
        if out is None:
            return False
        self._store(p, state, out, skip)
        return True

    def _fused_many(self, group, todo):
        """The lists' updates (todo: (p, state, step) each; one list per backend and step
        count, or per backend where the counts are on the device); returns what is left to
        the composed form."""
        left, lists = [], {}
        for item in todo:
            p, state, step = item
            m, v = state.get("exp_avg"), state.get("exp_avg_sq")
            if p.grad._backend is not p._backend or (m is None) != (v is None):
                left.append(item)
            else:
                key = (id(p._backend), None if isinstance(step, Tensor) else step)
                lists.setdefault(key, []).append(item)
        for items in (run for same in lists.values() for run in _runs(same, lambda it: it[0])):
            p0, _, step = items[0]
            skip = self._skip(p0)
            data = [(p._data, p.grad._data, *(None if s.get(k) is None else s[k]._data
                                              for k in ("exp_avg", "exp_avg_sq")))
                    for p, s, _ in items]
            out = p0._backend.adam_update_many(
                data, *self._hyper(group),
                [s._data for _, _, s in items] if isinstance(step, Tensor) else step,
                **skip)
            for i, item in enumerate(items):
                if out is None or out[i] is None:
                    left.append(item)
                else:
                    self._store(item[0], item[1], out[i], skip)
        return left

    def _hyper(self, group):
        """adam_update's (decay, factor, w, b2, eps, lr, b1) of a group."""
        lr, (b1, b2), wd = group["lr"], group["betas"], group["weight_decay"]
        decoupled = group.get("decoupled_weight_decay", self.decoupled)
        decay = None if not wd else "decoupled" if decoupled else "l2"
        factor = (1 - lr * wd) if decoupled else wd
        return decay, factor, 1 - b1, b2, group["eps"], lr, b1

    def _skip(self, p):
        """GradScaler's flag as the backend's update takes it ({} where it does not)."""
        if self._found is not None and p._backend.adam_takes_found:
            return {"found": self._found.to(p.device)._data}
        return {}

    def _store(self, p, state, out, skip):
        if skip:
            self._handled.add(id(p))
        po, mo, vo = (Tensor._wrap(h, p.dtype, p.device, p._backend) for h in out)
        _core.rebind(p, po)
        state["exp_avg"], state["exp_avg_sq"] = mo, vo


    def _step_skipping(self, found, *args, **kwargs):
        """As Optimizer's; where the backend's fused update takes the flag (adam_takes_found) the
        kernel itself leaves p, m and v as they were, and the step count adds 1 - flag."""
        self._found, self._handled, self._increments = found, set(), {}
        try:
            self.step(*args, **kwargs)
            return self._handled
        finally:
            self._found = self._handled = self._increments = None

    def _increment(self, p):
        key = (p.device, p.dtype)
        inc = self._increments.get(key)
        if inc is None:
            inc = self._increments[key] = (1 - self._found.to(p.device)).astype(p.dtype)
        return inc


class AdamW(Adam):
    """torch.optim.AdamW: decoupled weight decay, p *= 1 - lr * weight_decay, then Adam."""

    decoupled = True

    def __init__(self, params, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=1e-2,
                 amsgrad=False, capturable=False, *, maximize=False, foreach=None,
                 differentiable=False, fused=None):
        super().__init__(params, lr, betas, eps, weight_decay, amsgrad, capturable,
                         maximize=maximize, differentiable=differentiable)


def clip_grad_norm_(parameters, max_norm, norm_type=2.0, error_if_nonfinite=False, foreach=None):
    """Scale the gradients so that their total norm is at most max_norm (torch's formula: the
    factor is min(1, max_norm / (total + 1e-6))). Returns the total norm as a 0-d Tensor; the
    factor is computed on the device, so nothing is read back (unless error_if_nonfinite)."""
    if isinstance(parameters, Tensor):
        parameters = [parameters]
    params = [p for p in parameters if p.grad is not None]
    if not params:
        return _core.tensor(0.0)
    norm_type = float(norm_type)
    with _core.no_grad():
        first = params[0].grad
        norms = [_vector_norm(p.grad, norm_type).to(first.device).astype(first.dtype)
                 for p in params]
        total = _vector_norm(_core.stack(norms), norm_type)
        if error_if_nonfinite and not math.isfinite(total.item()):
            raise NumrError(f"the total norm of order {norm_type} of the gradients is "
                            f"{total.item()}, so they cannot be clipped")
        coef = _core.minimum(max_norm / (total + 1e-6), 1.0)
        for p in params:
            p.grad = p.grad * coef.to(p.grad.device).astype(p.grad.dtype)
    return total


def _vector_norm(x, ord):
    if ord == math.inf:
        return x.abs().max()
    if ord == -math.inf:
        return x.abs().min()
    if ord == 0:
        return (x != 0).astype(x.dtype).sum()
    if ord == 1:
        return x.abs().sum()
    if ord == 2:
        return (x * x).sum().sqrt()
    return (x.abs() ** ord).sum() ** (1.0 / ord)
