"""Learning-rate schedules, torch.optim.lr_scheduler-shaped: construct after the optimizer (that
sets each group's lr for step 0), call step() after each optimizer.step(), get_last_lr()."""
from __future__ import annotations

import bisect
import math

from .._core import NumrError, ShapeError


class LRScheduler:
    def __init__(self, optimizer, last_epoch=-1):
        self.optimizer = optimizer
        for g in optimizer.param_groups:
            if last_epoch == -1:
                g.setdefault("initial_lr", g["lr"])
            elif "initial_lr" not in g:
                raise NumrError("resuming a schedule (last_epoch != -1) needs 'initial_lr' in "
                                "every param group")
        self.base_lrs = [g["initial_lr"] for g in optimizer.param_groups]
        self.last_epoch = last_epoch
        self.step()

    def get_lr(self):
        """The learning rates of every group at step self.last_epoch."""
        raise NotImplementedError

    def step(self, epoch=None):
        """Advance one step (epoch=k: jump to step k, torch's deprecated form)."""
        self.last_epoch = self.last_epoch + 1 if epoch is None else epoch
        self._set(self.get_lr())

    def _set(self, lrs):
        self._last_lr = list(lrs)
        for g, lr in zip(self.optimizer.param_groups, self._last_lr):
            g["lr"] = lr

    def get_last_lr(self):
        return self._last_lr

    def state_dict(self):
        return {k: v for k, v in self.__dict__.items() if k not in ("optimizer", "lr_lambdas")}

    def load_state_dict(self, state_dict):
        self.__dict__.update(state_dict)


class LambdaLR(LRScheduler):
    """lr = initial_lr * lr_lambda(step); one function, or one per param group."""

    def __init__(self, optimizer, lr_lambda, last_epoch=-1):
        n = len(optimizer.param_groups)
        self.lr_lambdas = list(lr_lambda) if isinstance(lr_lambda, (list, tuple)) \
            else [lr_lambda] * n
        if len(self.lr_lambdas) != n:
            raise NumrError(f"LambdaLR got {len(self.lr_lambdas)} functions for {n} param groups")
        super().__init__(optimizer, last_epoch)

    def get_lr(self):
        return [base * f(self.last_epoch) for base, f in zip(self.base_lrs, self.lr_lambdas)]


class CosineWithWarmup(LRScheduler):
    """Linear warm-up, then a half cosine down to min_lr at total_steps (min_lr after it):

        step s < warmup_steps:  lr = base * (s + 1) / warmup_steps
        otherwise:              lr = min_lr + (base - min_lr) * (1 + cos(pi * p)) / 2,
                                p = min(1, (s - warmup_steps) / max(1, total_steps - warmup_steps))

    Step 0 trains at base / warmup_steps (never at 0) and the warm-up ends at the full rate."""

    def __init__(self, optimizer, warmup_steps, total_steps, min_lr=0.0, last_epoch=-1):
        if warmup_steps < 0 or total_steps < warmup_steps:
            raise NumrError(f"need 0 <= warmup_steps <= total_steps, got {warmup_steps} and "
                            f"{total_steps}")
        self.warmup_steps, self.total_steps, self.min_lr = warmup_steps, total_steps, min_lr
        super().__init__(optimizer, last_epoch)

    def get_lr(self):
        s, w = self.last_epoch, self.warmup_steps
        if s < w:
            return [base * (s + 1) / w for base in self.base_lrs]
        p = min(1.0, (s - w) / max(1, self.total_steps - w))
        c = (1 + math.cos(math.pi * p)) / 2
        return [self.min_lr + (base - self.min_lr) * c for base in self.base_lrs]


def _factor(name, value, ok, right):
    if not ok:
        raise ShapeError(f"{name}: got {value!r}; expected {right}")


class StepLR(LRScheduler):
    """lr = initial_lr * gamma ** (step // step_size) (torch's closed form)."""

    def __init__(self, optimizer, step_size, gamma=0.1, last_epoch=-1):
        _factor("StepLR step_size", step_size, isinstance(step_size, int) and step_size >= 1,
                "an int >= 1")
        self.step_size, self.gamma = step_size, gamma
        super().__init__(optimizer, last_epoch)

    def get_lr(self):
        return [base * self.gamma ** (self.last_epoch // self.step_size)
                for base in self.base_lrs]


class MultiStepLR(LRScheduler):
    """lr = initial_lr * gamma ** (the number of milestones <= step)."""

    def __init__(self, optimizer, milestones, gamma=0.1, last_epoch=-1):
        self.milestones, self.gamma = sorted(milestones), gamma
        super().__init__(optimizer, last_epoch)

    def get_lr(self):
        return [base * self.gamma ** bisect.bisect_right(self.milestones, self.last_epoch)
                for base in self.base_lrs]


class ExponentialLR(LRScheduler):
    """lr = initial_lr * gamma ** step."""

    def __init__(self, optimizer, gamma, last_epoch=-1):
        self.gamma = gamma
        super().__init__(optimizer, last_epoch)

    def get_lr(self):
        return [base * self.gamma ** self.last_epoch for base in self.base_lrs]


class CosineAnnealingLR(LRScheduler):
    """lr = eta_min + (initial_lr - eta_min) (1 + cos(pi step / T_max)) / 2: the closed form of
    torch's recursion (which, like this, rises again after T_max: a cosine of period 2 T_max)."""

    def __init__(self, optimizer, T_max, eta_min=0.0, last_epoch=-1):
        _factor("CosineAnnealingLR T_max", T_max, isinstance(T_max, int) and T_max >= 1,
                "an int >= 1")
        self.T_max, self.eta_min = T_max, eta_min
        super().__init__(optimizer, last_epoch)

    def get_lr(self):
        c = (1 + math.cos(math.pi * self.last_epoch / self.T_max)) / 2
        return [self.eta_min + (base - self.eta_min) * c for base in self.base_lrs]


class LinearLR(LRScheduler):
    """lr = initial_lr * (start_factor + (end_factor - start_factor) min(step, total_iters) /
    total_iters)."""

    def __init__(self, optimizer, start_factor=1.0 / 3, end_factor=1.0, total_iters=5,
                 last_epoch=-1):
        _factor("LinearLR start_factor", start_factor, 0 < start_factor <= 1,
                "a starting multiplicative factor greater than 0 and at most 1")
        _factor("LinearLR end_factor", end_factor, 0 <= end_factor <= 1,
                "an ending multiplicative factor between 0 and 1")
        _factor("LinearLR total_iters", total_iters,
                isinstance(total_iters, int) and total_iters >= 1, "an int >= 1")
        self.start_factor, self.end_factor, self.total_iters = start_factor, end_factor, \
            total_iters
        super().__init__(optimizer, last_epoch)

    def get_lr(self):
        t = min(self.last_epoch, self.total_iters)
        f = self.start_factor + (self.end_factor - self.start_factor) * t / self.total_iters
        return [base * f for base in self.base_lrs]
