"""More of torch.optim.lr_scheduler: ConstantLR, MultiplicativeLR, PolynomialLR,
CosineAnnealingWarmRestarts, OneCycleLR, ReduceLROnPlateau and SequentialLR, with torch's
arguments and values (closed forms where torch's recursion has one, as lr_scheduler.py)."""
from __future__ import annotations

import bisect
import math

from .._core import NumrError, ShapeError
from .lr_scheduler import LRScheduler, _factor


class ConstantLR(LRScheduler):
    """lr = initial_lr * factor for the first total_iters steps, then initial_lr."""

    def __init__(self, optimizer, factor=1.0 / 3, total_iters=5, last_epoch=-1):
        _factor("ConstantLR factor", factor, 0 <= factor <= 1,
                "a constant multiplicative factor between 0 and 1")
        self.factor, self.total_iters = factor, total_iters
        super().__init__(optimizer, last_epoch)

    def get_lr(self):
        f = self.factor if self.last_epoch < self.total_iters else 1.0
        return [base * f for base in self.base_lrs]


class MultiplicativeLR(LRScheduler):
    """lr = previous lr * lr_lambda(step) from step 1 on (one function, or one per group)."""

    def __init__(self, optimizer, lr_lambda, last_epoch=-1):
        n = len(optimizer.param_groups)
        self.lr_lambdas = list(lr_lambda) if isinstance(lr_lambda, (list, tuple)) \
            else [lr_lambda] * n
        if len(self.lr_lambdas) != n:
            raise NumrError(f"MultiplicativeLR got {len(self.lr_lambdas)} functions for {n} "
                            "param groups")
        super().__init__(optimizer, last_epoch)

    def get_lr(self):
        groups = self.optimizer.param_groups
        if self.last_epoch > 0:
            return [g["lr"] * f(self.last_epoch) for g, f in zip(groups, self.lr_lambdas)]
        return [g["lr"] for g in groups]


class PolynomialLR(LRScheduler):
    """lr = initial_lr * (1 - min(step, total_iters) / total_iters) ** power."""

    def __init__(self, optimizer, total_iters=5, power=1.0, last_epoch=-1):
        self.total_iters, self.power = total_iters, power
        super().__init__(optimizer, last_epoch)

    def get_lr(self):
        t = min(self.total_iters, self.last_epoch)
        f = (1.0 - t / self.total_iters) ** self.power
        return [base * f for base in self.base_lrs]


class CosineAnnealingWarmRestarts(LRScheduler):
    """Cosine from initial_lr down to eta_min over T_0 steps, then again over T_0 * T_mult, ..."""

    def __init__(self, optimizer, T_0, T_mult=1, eta_min=0.0, last_epoch=-1):
        _factor("CosineAnnealingWarmRestarts T_0", T_0, isinstance(T_0, int) and T_0 > 0,
                "a positive int")
        _factor("CosineAnnealingWarmRestarts T_mult", T_mult,
                isinstance(T_mult, int) and T_mult >= 1, "an int >= 1")
        self.T_0, self.T_i, self.T_mult, self.eta_min = T_0, T_0, T_mult, eta_min
        self.T_cur = last_epoch
        super().__init__(optimizer, last_epoch)

    def get_lr(self):
        c = (1 + math.cos(math.pi * self.T_cur / self.T_i)) / 2
        return [self.eta_min + (base - self.eta_min) * c for base in self.base_lrs]

    def step(self, epoch=None):
        if epoch is None:
            epoch = self.last_epoch + 1
            self.T_cur += 1
            if self.T_cur >= self.T_i:
                self.T_cur -= self.T_i
                self.T_i *= self.T_mult
        elif epoch >= self.T_0:
            if self.T_mult == 1:
                self.T_cur = epoch % self.T_0
            else:
                n = int(math.log(epoch / self.T_0 * (self.T_mult - 1) + 1, self.T_mult))
                self.T_cur = epoch - self.T_0 * (self.T_mult ** n - 1) / (self.T_mult - 1)
                self.T_i = self.T_0 * self.T_mult ** n
        else:
            self.T_i, self.T_cur = self.T_0, epoch
        self.last_epoch = math.floor(epoch)
        self._set(self.get_lr())


class OneCycleLR(LRScheduler):
    """The 1cycle policy: lr from max_lr / div_factor up to max_lr over pct_start of the steps,
    then down to initial_lr / final_div_factor (cosine or linear); momentum (or Adam's beta1)
    cycles the other way between max_momentum and base_momentum."""

    def __init__(self, optimizer, max_lr, total_steps=None, epochs=None, steps_per_epoch=None,
                 pct_start=0.3, anneal_strategy="cos", cycle_momentum=True, base_momentum=0.85,
                 max_momentum=0.95, div_factor=25.0, final_div_factor=1e4, three_phase=False,
                 last_epoch=-1):
        if total_steps is None:
            if not (isinstance(epochs, int) and epochs > 0 and isinstance(steps_per_epoch, int)
                    and steps_per_epoch > 0):
                raise ShapeError("You must define either total_steps OR (epochs AND "
                                 "steps_per_epoch) as positive ints")
            total_steps = epochs * steps_per_epoch
        _factor("OneCycleLR total_steps", total_steps,
                isinstance(total_steps, int) and total_steps > 0, "a positive int")
        _factor("OneCycleLR pct_start", pct_start,
                isinstance(pct_start, float) and 0 <= pct_start <= 1, "a float in [0, 1]")
        _factor("OneCycleLR anneal_strategy", anneal_strategy,
                anneal_strategy in ("cos", "linear"), "'cos' or 'linear'")
        self.total_steps, self.anneal_strategy = total_steps, anneal_strategy
        up = float(pct_start * total_steps) - 1
        self._phases = [(up, "initial_lr", "max_lr", "max_momentum", "base_momentum")]
        if three_phase:
            self._phases.append((float(2 * pct_start * total_steps) - 2, "max_lr",
                                 "initial_lr", "base_momentum", "max_momentum"))
            self._phases.append((total_steps - 1, "initial_lr", "min_lr", "max_momentum",
                                 "max_momentum"))
        else:
            self._phases.append((total_steps - 1, "max_lr", "min_lr", "base_momentum",
                                 "max_momentum"))
        groups = optimizer.param_groups
        if last_epoch == -1:
            for g, m in zip(groups, _per_group("max_lr", max_lr, groups)):
                g["initial_lr"], g["max_lr"] = m / div_factor, m
                g["min_lr"] = g["initial_lr"] / final_div_factor
        self.cycle_momentum = cycle_momentum
        if cycle_momentum:
            if "momentum" not in optimizer.defaults and "betas" not in optimizer.defaults:
                raise ShapeError("optimizer must support momentum or beta1 with "
                                 "`cycle_momentum` option enabled")
            self.use_beta1 = "betas" in optimizer.defaults
            if last_epoch == -1:
                for g, hi, lo in zip(groups, _per_group("max_momentum", max_momentum, groups),
                                     _per_group("base_momentum", base_momentum, groups)):
                    if self.use_beta1:
                        g["betas"] = (hi, *g["betas"][1:])
                    else:
                        g["momentum"] = hi
                    g["max_momentum"], g["base_momentum"] = hi, lo
        super().__init__(optimizer, last_epoch)

    def _anneal(self, start, end, pct):
        if self.anneal_strategy == "cos":
            return end + (start - end) / 2.0 * (math.cos(math.pi * pct) + 1)
        return (end - start) * pct + start

    def get_lr(self):
        step = self.last_epoch
        if step > self.total_steps:
            raise ShapeError(f"Tried to step {step} times. The specified number of total steps "
                             f"is {self.total_steps}")
        lrs = []
        for g in self.optimizer.param_groups:
            start = 0.0
            for i, (end, lr0, lr1, m0, m1) in enumerate(self._phases):
                if step <= end or i == len(self._phases) - 1:
                    pct = (step - start) / (end - start)
                    lrs.append(self._anneal(g[lr0], g[lr1], pct))
                    if self.cycle_momentum:
                        m = self._anneal(g[m0], g[m1], pct)
                        if self.use_beta1:
                            g["betas"] = (m, *g["betas"][1:])
                        else:
                            g["momentum"] = m
                    break
                start = end
        return lrs


def _per_group(name, value, groups):
    if isinstance(value, (list, tuple)):
        if len(value) != len(groups):
            raise ShapeError(f"expected {len(groups)} values for {name}, got {len(value)}")
        return list(value)
    return [value] * len(groups)


class ReduceLROnPlateau:
    """Multiply the lr by `factor` once the metric passed to step(metric) has not improved for
    `patience` steps (torch's thresholds, cooldown and min_lr)."""

    def __init__(self, optimizer, mode="min", factor=0.1, patience=10, threshold=1e-4,
                 threshold_mode="rel", cooldown=0, min_lr=0, eps=1e-8):
        if factor >= 1.0:
            raise ShapeError("Factor should be < 1.0.")
        if mode not in ("min", "max") or threshold_mode not in ("rel", "abs"):
            raise ShapeError(f"mode must be 'min' or 'max' and threshold_mode 'rel' or 'abs'; "
                             f"got {mode!r}, {threshold_mode!r}")
        self.optimizer, self.factor = optimizer, factor
        self.min_lrs = _per_group("min_lr", min_lr, optimizer.param_groups)
        self.patience, self.cooldown, self.cooldown_counter = patience, cooldown, 0
        self.mode, self.threshold, self.threshold_mode, self.eps = mode, threshold, \
            threshold_mode, eps
        self.best = math.inf if mode == "min" else -math.inf
        self.num_bad_epochs, self.last_epoch = 0, 0
        self._last_lr = [g["lr"] for g in optimizer.param_groups]

    def _is_better(self, a, best):
        if self.mode == "min":
            return a < best * (1.0 - self.threshold) if self.threshold_mode == "rel" \
                else a < best - self.threshold
        return a > best * (self.threshold + 1.0) if self.threshold_mode == "rel" \
            else a > best + self.threshold

    def step(self, metrics, epoch=None):
        current = float(metrics)
        self.last_epoch = self.last_epoch + 1 if epoch is None else epoch
        if self._is_better(current, self.best):
            self.best, self.num_bad_epochs = current, 0
        else:
            self.num_bad_epochs += 1
        if self.cooldown_counter > 0:
            self.cooldown_counter -= 1
            self.num_bad_epochs = 0
        if self.num_bad_epochs > self.patience:
            for g, lo in zip(self.optimizer.param_groups, self.min_lrs):
                old = float(g["lr"])
                new = max(old * self.factor, lo)
                if old - new > self.eps:
                    g["lr"] = new
            self.cooldown_counter, self.num_bad_epochs = self.cooldown, 0
        self._last_lr = [g["lr"] for g in self.optimizer.param_groups]

    def get_last_lr(self):
        return self._last_lr

    def state_dict(self):
        return {k: v for k, v in self.__dict__.items() if k != "optimizer"}

    def load_state_dict(self, state_dict):
        self.__dict__.update(state_dict)


class SequentialLR(LRScheduler):
    """schedulers[i] runs from milestones[i - 1] on, restarted at its first step."""

    def __init__(self, optimizer, schedulers, milestones, last_epoch=-1):
        if len(schedulers) < 1 or len(milestones) != len(schedulers) - 1:
            raise ShapeError(f"SequentialLR expects one milestone fewer than schedulers, got "
                             f"{len(schedulers)} schedulers and {len(milestones)} milestones")
        if any(s.optimizer is not optimizer for s in schedulers):
            raise ShapeError("SequentialLR expects all schedulers to belong to the same "
                             "optimizer")
        self.optimizer, self._schedulers = optimizer, list(schedulers)
        self._milestones, self.last_epoch = list(milestones), last_epoch + 1
        for g in optimizer.param_groups:
            g["lr"] = g["initial_lr"]
        for s in self._schedulers:
            s.last_epoch -= 1
        self._schedulers[0].step()
        self._last_lr = self._schedulers[0].get_last_lr()

    def step(self):
        self.last_epoch += 1
        idx = bisect.bisect_right(self._milestones, self.last_epoch)
        s = self._schedulers[idx]
        if idx > 0 and self._milestones[idx - 1] == self.last_epoch:
            s.step(0)
        else:
            s.step()
        self._last_lr = s.get_last_lr()

    def state_dict(self):
        out = {k: v for k, v in self.__dict__.items() if k not in ("optimizer", "_schedulers")}
        out["_schedulers"] = [s.state_dict() for s in self._schedulers]
        return out

    def load_state_dict(self, state_dict):
        state = dict(state_dict)
        for s, sd in zip(self._schedulers, state.pop("_schedulers")):
            s.load_state_dict(sd)
        self.__dict__.update(state)
