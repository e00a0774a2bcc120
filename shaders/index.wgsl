// index.wgsl — gather along one axis (torch.gather) and its adjoint, scatter_add.
//
// Metadata words, bindings: contract.INDEX (the generated header). Shapes of at most 8 dims;
// x / src and the index are strided views (stride 0 where broadcast), the output is dense.
// Index values are checked by the ops layer and reported at the next readback; here a value is
// wrapped once if negative and clamped into [0, AXIS_LEN), so that no load leaves the tensor.

fn wrap_index(v: i32, n: u32) -> u32 {
    var i = v;
    if (i < 0) { i = i + i32(n); }
    return u32(clamp(i, 0, i32(n) - 1));
}

// gather: one invocation per output element (the index's shape).
@compute @workgroup_size(WG)
fn gather(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
          @builtin(local_invocation_index) lid: u32) {
    let n = mu(W_N);
    let axis = mu(W_AXIS);
    for (var t = linear_id(wid, nwg, lid); t < n; t = t + grid_stride(nwg)) {
        var rem = t;
        var xo = mu(W_OFFSET_A);
        var io = mu(W_OFFSET_IDX);
        for (var d = mu(W_NDIM); d > 0u; d = d - 1u) {
            let k = d - 1u;
            let s = mu(W_SHAPE + k);
            let c = rem % s;
            rem = rem / s;
            io = io + c * mu(W_STRIDES_IDX + k);
            if (k != axis) { xo = xo + c * mu(W_STRIDES_A + k); }
        }
        xo = xo + wrap_index(idx[io], mu(W_AXIS_LEN)) * mu(W_STRIDES_A + axis);
        out[mu(W_OFFSET_OUT) + t] = a[xo];
    }
}

// scatter_add: one invocation per output element, which scans the index positions [I0, I1)
// along AXIS in increasing order and adds the src values whose index names it: a fixed summation
// order (the sequential one), no atomics. Positions beyond the loop budget come in later
// dispatches (ACCUM = 1), which continue from the partial sums in out.
@compute @workgroup_size(WG)
fn scatter_add(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
               @builtin(local_invocation_index) lid: u32) {
    let n = mu(W_N);
    let axis = mu(W_AXIS);
    let alen = mu(W_AXIS_LEN);
    for (var t = linear_id(wid, nwg, lid); t < n; t = t + grid_stride(nwg)) {
        var rem = t;
        var so = mu(W_OFFSET_A);
        var io = mu(W_OFFSET_IDX);
        var v = 0u;
        var inside = true;                     // within the index's extent in the other dims
        for (var d = mu(W_NDIM); d > 0u; d = d - 1u) {
            let k = d - 1u;
            let s = mu(W_SHAPE + k);
            let c = rem % s;
            rem = rem / s;
            if (k == axis) {
                v = c;
            } else {
                inside = inside && c < mu(W_IDX_SHAPE + k);
                io = io + c * mu(W_STRIDES_IDX + k);
                so = so + c * mu(W_STRIDES_A + k);
            }
        }
        let o = mu(W_OFFSET_OUT) + t;
        var acc = C(0);
        if (mu(W_ACCUM) != 0u) { acc = C(out[o]); }
        if (inside) {
            let si = mu(W_STRIDES_IDX + axis);
            let ss = mu(W_STRIDES_A + axis);
            for (var i = mu(W_I0); i < mu(W_I1); i = i + 1u) {
                if (wrap_index(idx[io + i * si], alen) == v) { acc = acc + C(a[so + i * ss]); }
            }
        }
        out[o] = store_c(acc);
    }
}
