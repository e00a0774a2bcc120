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

    # -- a whole layer and direction: the time loop inside one primitive each way ---------------------
    def rnn_layer(self, kind, xw, h, c, w_hh, b_hh, reverse):
        """kind "lstm" / "gru" / "tanh" / "relu" (the plain RNN's activation) over xw (T, B, G H),
        the input projections of every step, from the
        state h (and c), with the hidden weights w_hh (G H, H) and bias b_hh (or None); steps in
        reverse order for a backward direction. Returns (out (T, B, H), h_T, c_T or None,
        saved): per step the hidden state it started from and what its cell saved."""
        xp = self.xp
        T = xw.shape[0]
        wt = w_hh.T
        out = xp.empty((T,) + h.shape, dtype=h.dtype)
        h_prev = xp.empty((T,) + h.shape, dtype=h.dtype)
        c_prev = xp.empty((T,) + h.shape, dtype=h.dtype) if kind == "lstm" else None
        cell, tcs = [None] * T, [None] * T
        for t in (range(T - 1, -1, -1) if reverse else range(T)):
            h_prev[t] = h
            hw = xp.matmul(h, wt)                   # gemm_bias_act's "none" layer: z, then + b
            if b_hh is not None:
                hw += b_hh
            if kind == "lstm":
                c_prev[t] = c
                h, c, cell[t], tcs[t] = self.lstm_cell(xw[t], hw, c)
            elif kind == "gru":
                h, cell[t] = self.gru_cell(xw[t], hw, h)
            else:                                   # tanh / relu: act(xw + hw), torch's order
                h = self._asarray(ACT[kind].np.fwd(xp, self._widen(xw[t] + hw)), h.dtype)
            out[t] = h
        cells = (xp.stack(cell) if T else None) if kind in ("lstm", "gru") else out
        saved = (h_prev, c_prev, cells, xp.stack(tcs) if T and kind == "lstm" else None)
        return out, h, c, saved

    def rnn_layer_backward(self, kind, dout, dh, dc, w_hh, has_bias, saved, reverse):
        """(dxw, dh_0, dc_0 or None, dw_hh, db_hh or None) from the gradients of out, h_T and c_T
        (dh, dc may be None): the steps in reverse, then the hidden weights' gradient as one
        GEMM over every step (K = T B) instead of one small GEMM a step."""
        xp = self.xp
        h_prev, c_prev, cell, tcs = saved
        T, shape = h_prev.shape[0], h_prev.shape[1:]
        dh = xp.zeros(shape, dtype=h_prev.dtype) if dh is None else dh
        if kind == "lstm" and dc is None:
            dc = xp.zeros(shape, dtype=h_prev.dtype)
        dhw = xp.empty((T,) + shape[:-1] + (w_hh.shape[0],), dtype=h_prev.dtype)
        dxw = xp.empty_like(dhw) if kind == "gru" else dhw
        for t in (range(T) if reverse else range(T - 1, -1, -1)):
            g = dh + dout[t]
            if kind == "lstm":
                dhw[t], dc = self.lstm_cell_backward(g, dc, c_prev[t], cell[t], tcs[t])
                dh = xp.matmul(dhw[t], w_hh)
            elif kind != "gru":                     # the activation's derivative from its output
                dhw[t] = ACT[kind].np.d1(xp, self._widen(g), self._widen(cell[t]))
                dh = xp.matmul(dhw[t], w_hh)
            else:
                dxw[t], dhw[t], direct = self.gru_cell_backward(g, h_prev[t], cell[t])
                dh = xp.matmul(dhw[t], w_hh)
                dh += direct
        flat = dhw.reshape(-1, dhw.shape[-1])
        dw = xp.matmul(flat.T, h_prev.reshape(-1, shape[-1]))
        db = flat.sum(axis=0) if has_bias else None
        return dxw, dh, (dc if kind == "lstm" else None), dw, db
