"""Learning-rate schedules, torch.optim.lr_scheduler-shaped: construct after the optimizer (that
sets each group's lr for step 0), call step() after each optimizer.step(), get_last_lr()."""
from __future__ import annotations

import math

from .._core import NumrError


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

    def step(self):
        self.last_epoch += 1
        self._last_lr = list(self.get_lr())
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
