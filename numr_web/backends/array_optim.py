"""Adam / AdamW's and SGD's updates as one primitive each for the array backends (numpy; CuPy's
float32 updates are nn.cu's kernels, CudaNN.adam_update / sgd_update, first in CudaBackend's
bases): the composed updates' arithmetic (numr_web/nn/optim/optimizer.py, Adam._update,
SGD._update), operation for operation and with the same scalars, so float32 and float64 results
are the composed ones bit for bit, without a dozen ops a parameter each going through the op
layer; and, as the CUDA kernel, an Adam step GradScaler's flag skips where the flag is set
(`found`), with no select of every tensor afterwards."""
from __future__ import annotations

from .base import adam_scalars


def step_scalars(xp, lr, b1, b2, step):
    """(step size, sqrt(1 - beta2^t)): adam_scalars' doubles for a count known on the host;
    capturable, a 0-d count in p's dtype, the corrections in that dtype too."""
    if isinstance(step, (int, float)):
        return adam_scalars(lr, b1, b2, step)
    return lr / (1 - b1 ** step), xp.sqrt(1 - b2 ** step)


class ArrayOptim:
    adam_takes_found = True

    def adam_update(self, p, g, m, v, decay, factor, w, b2, eps, lr, b1, step, found=None):
        xp = self.xp
        if p.dtype not in (xp.float32, xp.float64) or g.dtype != p.dtype or \
                p.shape != g.shape or (m is not None and (m.dtype != p.dtype or v.dtype != p.dtype)):
            return None                               # float16 rounds at every composed op
        if found is not None and bool(found):
            return (p.copy(), *(xp.zeros_like(p) if a is None else a.copy() for a in (m, v)))
        ss, bc = step_scalars(xp, lr, b1, b2, step)
        base = p
        if decay == "decoupled":
            base = p * factor
        elif decay == "l2":
            g = g + p * factor
        a = 0.0 if m is None else m                         # _lerp(a, g, w), both of its forms
        m = a + (g - a) * w if abs(w) < 0.5 else g - (g - a) * (1 - w)
        gv = (g * (1 - b2)) * g
        v = gv if v is None else v * b2 + gv
        denom = xp.sqrt(v)
        denom /= bc
        denom += eps
        upd = m * ss
        upd /= denom
        return base - upd, m, v

    def sgd_update(self, p, g, buf, weight_decay, momentum, dampening, nesterov, maximize, lr):
        xp = self.xp
        if p.dtype not in (xp.float32, xp.float64) or g.dtype != p.dtype or \
                p.shape != g.shape or (buf is not None and (buf.dtype != p.dtype or
                                                            buf.shape != p.shape)):
            return None
        if maximize:
            g = -g
        if weight_decay:
            g = g + p * weight_decay
        if momentum:
            if buf is None:             # a buffer of its own (g may be the gradient's handle)
                buf = g.copy()
            else:
                buf = buf * momentum + (g * (1 - dampening) if dampening else g)
            g = g + buf * momentum if nesterov else buf
        return p - g * lr, (buf if momentum else None)
