"""GradScaler: dynamic loss scaling for float16 training, as torch.amp.GradScaler.

    model = nn.Linear(64, 10, device="cuda")          # float32 parameters
    opt = nn.optim.AdamW(model.parameters())
    scaler = nr.amp.GradScaler()
    for x, y in batches:
        with nr.autocast("cuda"):                        # float16 GEMMs, float32 losses
            loss = nr.cross_entropy(model(x), y)
        opt.zero_grad()
        scaler.scale(loss).backward()    # gradients of loss * scale: small ones stay above
        scaler.step(opt)                 # float16's underflow; step divides them by the scale
        scaler.update()                  # and skips the update when one is inf / NaN

The scale and the count of finite steps live on the device as 0-d float32 / int32 tensors, and update() adapts them there (halved after a step with inf / NaN gradients, doubled
after growth_interval finite steps in a row, as torch's `_amp_update_scale_`). unscale_ checks
every gradient of an optimizer with a few device ops and step() reads back ONE number (whether
any was not finite), as torch's step does — except for a capturable optimizer, whose step is
undone on the device instead (so nr.capture can record it); get_scale() and state_dict() read
the scale back.
"""
from __future__ import annotations

from ..errors import DTypeError, GradientError, ShapeError
from ..gradmode import no_grad

READY, UNSCALED, STEPPED = "ready", "unscaled", "stepped"


def _fresh():
    return {"stage": READY, "found_inf_per_device": {}}


class GradScaler:
    """torch.amp.GradScaler(device, init_scale=2.**16, growth_factor=2.0, backoff_factor=0.5,
    growth_interval=2000, enabled=True). device (optional): where the scale lives; by default the
    device of the first output given to scale()."""

    def __init__(self, device=None, init_scale=2.0 ** 16, growth_factor=2.0, backoff_factor=0.5,
                 growth_interval=2000, enabled=True):
        if not init_scale > 0 or not growth_factor > 1 or not 0 < backoff_factor < 1 or \
                int(growth_interval) < 1:
            raise ShapeError("GradScaler needs init_scale > 0, growth_factor > 1, "
                             "0 < backoff_factor < 1 and growth_interval >= 1; got "
                             f"{init_scale}, {growth_factor}, {backoff_factor}, {growth_interval}")
        self._device = device
        self._enabled = bool(enabled)
        self._init_scale = float(init_scale)
        self._growth_factor, self._backoff_factor = float(growth_factor), float(backoff_factor)
        self._growth_interval = int(growth_interval)
        self._init_growth_tracker = 0
        self._scale = self._growth_tracker = None      # device tensors, made by the first scale()
        self._per_optimizer_states = {}

    # -- the step ---------------------------------------------------------------------------------
    def scale(self, outputs):
        """outputs (a tensor, or a list / tuple of tensors, nested) multiplied by the scale."""
        if not self._enabled:
            return outputs
        from ..tensor import Tensor
        if isinstance(outputs, Tensor):
            if self._scale is None:
                self._lazy_init(self._device or outputs.device)
            return outputs * self._scale.to(outputs.device)
        if isinstance(outputs, (list, tuple)):
            return type(outputs)(self.scale(o) for o in outputs)
        raise DTypeError(f"GradScaler.scale: outputs must be a Tensor or a list / tuple of "
                         f"Tensors, got {type(outputs).__name__}")

    def _lazy_init(self, device):
        from ..creation import full
        self._scale = full((), self._init_scale, dtype="float32", device=device)
        self._growth_tracker = full((), self._init_growth_tracker, dtype="int32", device=device)

    def _check_scale(self, what):
        if self._scale is None:
            raise GradientError(f"GradScaler.{what}() was called, but no loss was scaled yet: "
                                "call scaler.scale(loss).backward() earlier in the iteration")

    def _state(self, optimizer):
        return self._per_optimizer_states.setdefault(id(optimizer), _fresh())

    def unscale_(self, optimizer):
        """Divide the optimizer's gradients by the scale (in place of .grad), and record on the
        device whether any is inf or NaN. At most once per optimizer between update() calls;
        step() calls it when it was not called (call it yourself before clipping gradients)."""
        if not self._enabled:
            return
        self._check_scale("unscale_")
        state = self._state(optimizer)
        if state["stage"] is UNSCALED:
            raise GradientError("unscale_() has already been called on this optimizer since the "
                                "last update()")
        if state["stage"] is STEPPED:
            raise GradientError("unscale_() is being called after step(); call it before step()")
        with no_grad():
            inv = self._scale.reciprocal()
            state["found_inf_per_device"] = self._unscale_grads_(optimizer, inv)
        state["stage"] = UNSCALED

    def _unscale_grads_(self, optimizer, inv_scale, allow_fp16=False):
        """Every gradient times inv_scale; per device a 0-d float32 flag, 1 where some product
        is inf or NaN: 0 * g is 0 for finite g and NaN otherwise, so one sum over the
        concatenated products of a device tells (a few device ops, no readback)."""
        from ..ops.shape_ops import concat
        by_device = {}
        for group in optimizer.param_groups:
            for p in group["params"]:
                g = p.grad
                if g is None:
                    continue
                if g.dtype.name == "float16" and not allow_fp16:
                    raise DTypeError("Attempting to unscale float16 gradients: keep the "
                                     "parameters in float32 (autocast lowers their copies) so "
                                     "that their gradients are float32")
                by_device.setdefault(g.device, []).append(p)
        found = {}
        for device, params in by_device.items():
            inv = inv_scale.to(device)
            flat = []
            for p in params:
                g = p.grad * inv
                p.grad = g
                flat.append(g.reshape(-1) if g.dtype.name == "float32" else
                            g.reshape(-1).astype("float32"))
            probe = (concat(flat) * 0.0).sum()
            found[device] = (probe != probe).astype("float32")
        return found

    def step(self, optimizer, *args, **kwargs):
        """optimizer.step(*args, **kwargs) on the unscaled gradients, unless one is inf / NaN
        (then the update is skipped and None returned). Reads back one flag."""
        if not self._enabled:
            return optimizer.step(*args, **kwargs)
        if "closure" in kwargs:
            raise GradientError("GradScaler.step: a closure is not supported while the scaler "
                                "is enabled (as in torch); run the forward and backward before")
        self._check_scale("step")
        state = self._state(optimizer)
        if state["stage"] is STEPPED:
            raise GradientError("step() has already been called since the last update()")
        if state["stage"] is READY:
            self.unscale_(optimizer)
        flags = state["found_inf_per_device"]
        if not flags:
            raise GradientError("GradScaler.step: no parameter of this optimizer has a gradient "
                                "(no inf checks were recorded); call backward() first")
        if all(g.get("capturable") for g in optimizer.param_groups):
            out = self._step_on_device(optimizer, flags, args, kwargs)
        else:
            out = None
            if not sum(f.item() for f in flags.values()):
                out = optimizer.step(*args, **kwargs)
        state["stage"] = STEPPED
        return out

    @staticmethod
    def _step_on_device(optimizer, flags, args, kwargs):
        """A capturable optimizer (capturable=True): the step always runs, then every tensor it
        changed is selected back to its old value where a gradient was inf / NaN. A select on
        the device instead of a readback, so that nr.capture can record the whole AMP step
        (torch hands found_inf to its capturable fused kernels for the same reason). A state
        tensor the step created (the first step's moments) is selected against zeros, the
        value the optimizer starts from. Returns None, as a step may have been skipped."""
        from ..creation import zeros_like
        from ..ops.elementwise import where
        from ..tensor import Tensor
        found = None
        for f in flags.values():
            f = f.to(optimizer.param_groups[0]["params"][0].device)
            found = f if found is None else found + f
        found = found > 0
        params = [p for g in optimizer.param_groups for p in g["params"] if p.grad is not None]
        before = [(p, p.detach(), dict(optimizer.state.get(p, {}))) for p in params]
        # an optimizer whose fused update takes the flag skips on the device (no select after)
        handled = set()
        if hasattr(optimizer, "_step_skipping"):
            handled = optimizer._step_skipping(found.astype("float32"), *args, **kwargs)
        else:
            optimizer.step(*args, **kwargs)
        with no_grad():
            for p, old, old_state in before:
                if id(p) in handled:
                    continue
                p.copy_(where(found.to(p.device), old, p))
                st = optimizer.state.get(p, {})
                for k, v in st.items():
                    prev = old_state.get(k)
                    if prev is v:
                        continue
                    if not isinstance(v, Tensor) or not isinstance(prev, (Tensor, type(None))):
                        raise GradientError(
                            f"GradScaler.step: {type(optimizer).__name__} keeps its state {k!r} "
                            "as a Python value, which the device cannot put back after a "
                            "skipped step; make the optimizer with capturable=False")
                    st[k] = where(found.to(v.device), zeros_like(v) if prev is None else prev, v)
        return None

    def update(self, new_scale=None):
        """Adapt the scale on the device (call once per iteration, after step()): times
        backoff_factor after a step with inf / NaN gradients, times growth_factor (when the
        result is finite) after growth_interval finite steps in a row. new_scale (a float or a
        one-element float32 tensor) sets it instead."""
        if not self._enabled:
            return
        self._check_scale("update")
        from ..ops.elementwise import where
        from ..tensor import Tensor
        with no_grad():
            if new_scale is not None:
                if isinstance(new_scale, Tensor):
                    if new_scale.size != 1 or new_scale.dtype.name != "float32" or \
                            new_scale.requires_grad:
                        raise DTypeError("GradScaler.update: new_scale must be a float or a "
                                         "one-element float32 tensor that does not require grad")
                    self._scale = new_scale.detach().reshape(()).to(self._scale.device) * 1.0
                else:
                    self._scale = self._scale * 0.0 + float(new_scale)
            else:
                flags = [f.to(self._scale.device) for s in self._per_optimizer_states.values()
                         for f in s["found_inf_per_device"].values()]
                if not flags:
                    raise GradientError("GradScaler.update: no inf checks were recorded before "
                                        "update(); call step() (or unscale_()) first")
                found = flags[0]
                for f in flags[1:]:
                    found = found + f
                found = found > 0
                succ = self._growth_tracker + 1
                grow = succ == self._growth_interval
                grown = self._scale * self._growth_factor
                grown = where(grown.isfinite(), grown, self._scale)
                self._scale = where(found, self._scale * self._backoff_factor,
                                    where(grow, grown, self._scale))
                self._growth_tracker = where(found | grow, 0, succ).astype("int32")
        self._per_optimizer_states = {}

    # -- settings and checkpoints (torch's names) ---------------------------------------------------
    def get_scale(self):
        """The scale as a Python float (a readback); 1.0 when disabled."""
        if not self._enabled:
            return 1.0
        return self._init_scale if self._scale is None else self._scale.item()

    def get_growth_factor(self):
        return self._growth_factor

    def set_growth_factor(self, new_factor):
        self._growth_factor = float(new_factor)

    def get_backoff_factor(self):
        return self._backoff_factor

    def set_backoff_factor(self, new_factor):
        self._backoff_factor = float(new_factor)

    def get_growth_interval(self):
        return self._growth_interval

    def set_growth_interval(self, new_interval):
        self._growth_interval = int(new_interval)

    def _get_growth_tracker(self):
        if self._growth_tracker is None:
            return self._init_growth_tracker
        return int(self._growth_tracker.item())

    def is_enabled(self):
        return self._enabled

    def state_dict(self):
        """{"scale", "growth_factor", "backoff_factor", "growth_interval", "_growth_tracker"}
        (torch's keys; empty when disabled)."""
        if not self._enabled:
            return {}
        return {"scale": self.get_scale(), "growth_factor": self._growth_factor,
                "backoff_factor": self._backoff_factor, "growth_interval": self._growth_interval,
                "_growth_tracker": self._get_growth_tracker()}

    def load_state_dict(self, state_dict):
        if not self._enabled:
            return
        if len(state_dict) == 0:
            raise GradientError("GradScaler.load_state_dict: the state dict is empty, probably "
                                "saved from a disabled GradScaler")
        self._init_scale = float(state_dict["scale"])
        self._growth_factor = float(state_dict["growth_factor"])
        self._backoff_factor = float(state_dict["backoff_factor"])
        self._growth_interval = int(state_dict["growth_interval"])
        self._init_growth_tracker = int(state_dict["_growth_tracker"])
        if self._scale is not None:
            self._lazy_init(self._scale.device)

    def __getstate__(self):
        state = self.__dict__.copy()
        if self._enabled:
            state["_init_scale"] = self.get_scale()
            state["_init_growth_tracker"] = self._get_growth_tracker()
            state["_device"] = self._device or (self._scale.device if self._scale is not None
                                                else None)
        state["_scale"] = state["_growth_tracker"] = None
        state["_per_optimizer_states"] = {}
        return state
