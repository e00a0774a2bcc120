"""The LSTM and GRU cells' pointwise work as one primitive each way, for the array backends (numpy,
CuPy): the gate activations, the cell update and their derivatives in a handful of array passes,
where the composed cell is a dozen ops forward and twice that backward, each with its own autograd
node (numr_web/ops/recurrent.py is the op; nn/rnn.py uses it where a backend has it). The formulas
and their order of operations are the composed cell's (torch's CPU cell), so float32 results are
the composed ones; float16 is computed in float32 and rounded once.

    LSTM  i, f, g, o = chunk(4) of hw + xw;  c' = f c + i g;  h' = o tanh(c')
    GRU   r = sigmoid(h_r + x_r), z = sigmoid(h_z + x_z), n = tanh(x_n + h_n r),
          h' = (h - n) z + n
"""
from __future__ import annotations

from ..vocab.activations import ACT


class ArrayRNN:
    fused_cells = True            # lstm_cell / gru_cell and their backward exist

    def _sigmoid(self, z):
        return ACT["sigmoid"].np.fwd(self.xp, z)

    def lstm_cell(self, xw, hw, c):
        """(h', c', gates, tanh(c')): the activated gates sigmoid(i), sigmoid(f), tanh(g),
        sigmoid(o) as one (..., 4H) array, saved with tanh(c') for the backward."""
        xp = self.xp
        s = self._widen(hw) + self._widen(xw)
        n = s.shape[-1] // 4
        g = xp.tanh(s[..., 2 * n:3 * n])
        gates = self._sigmoid(s)                  # (the formula may write into s)
        gates[..., 2 * n:3 * n] = g
        i, f, g, o = (gates[..., k * n:(k + 1) * n] for k in range(4))
        c2 = f * self._widen(c) + i * g
        tc = xp.tanh(c2)
        dt = c.dtype
        return self._asarray(o * tc, dt), self._asarray(c2, dt), gates, tc

    def lstm_cell_backward(self, gh, gc, c, gates, tc):
        """(d(hw + xw), dc) from the gradients of h' and c' (either may be None)."""
        xp = self.xp
        n = tc.shape[-1]
        i, f, g, o = (gates[..., k * n:(k + 1) * n] for k in range(4))
        d = xp.empty(gates.shape, dtype=gates.dtype)
        dc = xp.zeros(tc.shape, dtype=tc.dtype) if gc is None else self._widen(gc).copy()
        if gh is not None:
            ghw = self._widen(gh)
            dc += ghw * o * (1 - tc * tc)
            d[..., 3 * n:] = ghw * tc * (o * (1 - o))
        else:
            d[..., 3 * n:] = 0
        d[..., :n] = dc * g * (i * (1 - i))
        d[..., n:2 * n] = dc * self._widen(c) * (f * (1 - f))
        d[..., 2 * n:3 * n] = dc * i * (1 - g * g)
        dt = c.dtype
        return self._asarray(d, dt), self._asarray(dc * f, dt)

    def gru_cell(self, xw, hw, h):
        """(h', saved): saved = r, z, n and the hidden projection's n part h_n, (..., 4H)."""
        xp = self.xp
        xw, hw, hv = self._widen(xw), self._widen(hw), self._widen(h)
        m = hv.shape[-1]
        saved = xp.empty(hv.shape[:-1] + (4 * m,), dtype=hv.dtype)
        saved[..., :2 * m] = self._sigmoid(hw[..., :2 * m] + xw[..., :2 * m])
        r, z = saved[..., :m], saved[..., m:2 * m]
        hn = hw[..., 2 * m:]
        saved[..., 2 * m:3 * m] = xp.tanh(xw[..., 2 * m:] + hn * r)
        saved[..., 3 * m:] = hn
        nn = saved[..., 2 * m:3 * m]
        return self._asarray((hv - nn) * z + nn, h.dtype), saved

    def gru_cell_backward(self, g, h, saved):
        """(dxw, dhw, dh) from the gradient of h'."""
        xp = self.xp
        m = h.shape[-1]
        r, z, nn, hn = (saved[..., k * m:(k + 1) * m] for k in range(4))
        gw = self._widen(g)
        dn = gw * (1 - z) * (1 - nn * nn)
        dx = xp.empty(saved.shape[:-1] + (3 * m,), dtype=saved.dtype)
        dx[..., :m] = dn * hn * (r * (1 - r))
        dx[..., m:2 * m] = gw * (self._widen(h) - nn) * (z * (1 - z))
        dx[..., 2 * m:] = dn
        dhw = dx.copy()
        dhw[..., 2 * m:] = dn * r
        dt = h.dtype
        return self._asarray(dx, dt), self._asarray(dhw, dt), self._asarray(gw * z, dt)
