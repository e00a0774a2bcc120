"""Mixed precision: dynamic loss scaling for float16 training (torch.amp.GradScaler's rules).

The recipe (float16 GEMMs and activations, float32 master weights in the optimizer):

    import numr_web as nr
    from numr_web.amp import GradScaler
    w = nr.randn((k, n), device="webgpu", requires_grad=True)       # float32 master weights
    b = nr.zeros(n, device="webgpu", requires_grad=True)
    opt = nr.nn.optim.AdamW([w, b])
    scaler = GradScaler()
    for x, target in batches:
        h = nr.matmul_bias_activation(x.astype("float16"), w.astype("float16"),
                                      b.astype("float16"), "gelu")  # float16 GEMM, f32 accumulation
        loss = loss_fn(h.astype("float32"), target)
        scaler.scale(loss).backward()     # float16 gradients, scaled away from underflow
        scaler.step(opt)                  # unscales the float32 master gradients; skips the step
        scaler.update()                   # when one is inf / NaN, and adapts the scale

`astype` is differentiable: the float16 copies' gradients arrive at the float32 leaves as float32,
so the optimizer and its state stay in float32. `step` reads back one number per step (whether
some gradient is not finite).
"""
from __future__ import annotations

import math

from .errors import NumrError


class GradScaler:
    """Multiplies the loss by `scale` before backward; `step` divides the gradients by it and
    skips the optimizer step when any is inf or NaN; `update` then halves the scale
    (backoff_factor), or doubles it (growth_factor) after growth_interval finite steps in a row."""

    def __init__(self, init_scale=2.0 ** 16, growth_factor=2.0, backoff_factor=0.5,
                 growth_interval=2000, enabled=True):
        if not init_scale > 0 or not growth_factor > 1 or not 0 < backoff_factor < 1 or \
                int(growth_interval) < 1:
            raise NumrError("GradScaler needs init_scale > 0, growth_factor > 1, "
                            "0 < backoff_factor < 1 and growth_interval >= 1; got "
                            f"{init_scale}, {growth_factor}, {backoff_factor}, {growth_interval}")
        self._scale = float(init_scale)
        self.growth_factor, self.backoff_factor = float(growth_factor), float(backoff_factor)
        self.growth_interval = int(growth_interval)
        self.enabled = bool(enabled)
        self._growth = 0
        self._found_inf = {}         # id(optimizer) -> whether its gradients had inf / NaN

    def get_scale(self):
        return self._scale if self.enabled else 1.0

    def scale(self, loss):
        return loss * self._scale if self.enabled else loss

    def unscale_(self, optimizer):
        """Divide the gradients of the optimizer's parameters by the scale (once per step)."""
        if not self.enabled or id(optimizer) in self._found_inf:
            return
        inv = 1.0 / self._scale
        probe = None
        for group in optimizer.param_groups:
            for p in group["params"]:
                if p.grad is None:
                    continue
                p.grad = p.grad * inv
                z = (p.grad * 0.0).astype("float32").sum()     # NaN when any is inf / NaN
                probe = z if probe is None else probe + z.to(probe.device)
        self._found_inf[id(optimizer)] = probe is not None and not math.isfinite(probe.item())

    def step(self, optimizer, closure=None):
        """optimizer.step() on the unscaled gradients, unless some is inf / NaN (then None)."""
        if not self.enabled:
            return optimizer.step(closure)
        self.unscale_(optimizer)
        if self._found_inf[id(optimizer)]:
            return None
        return optimizer.step(closure)

    def update(self):
        """Adapt the scale to this step's gradients (call once per step, after `step`)."""
        if not self.enabled:
            return
        if any(self._found_inf.values()):
            self._scale *= self.backoff_factor
            self._growth = 0
        else:
            self._growth += 1
            if self._growth == self.growth_interval:
                self._scale *= self.growth_factor
                self._growth = 0
        self._found_inf.clear()
