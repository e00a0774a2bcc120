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

// scatter_add of a 1-D index broadcast over the other dims (x[idx], embedding backward) as a
// sort-free segmented reduction: a stable counting sort of the positions by value, in parallel over
// (chunk of SEG_CHUNK positions, value) pairs and without atomics, then seg_sum sums each output's
// segment in that order: the same order as scatter_add's scan, in O(positions) per output row
// instead of O(positions) per output element.
// seg holds, for C = SEG_CHUNKS chunks and V = AXIS_LEN values: C * V counts (then offsets) at
// [c * V + v], V totals at [C * V + v], V segment starts at [(C + 1) * V + v].
fn seg_value(i: u32) -> u32 {
    return wrap_index(idx[mu(W_OFFSET_IDX) + i * mu(W_IDX_STRIDE)], mu(W_AXIS_LEN));
}

// one invocation per (chunk c, value v): the positions of chunk c holding v
@compute @workgroup_size(WG)
fn seg_count(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
             @builtin(local_invocation_index) lid: u32) {
    let nv = mu(W_AXIS_LEN);
    let cs = mu(W_SEG_CHUNK);
    for (var t = linear_id(wid, nwg, lid); t < mu(W_SEG_CHUNKS) * nv; t = t + grid_stride(nwg)) {
        let v = t % nv;
        let i0 = (t / nv) * cs;
        let i1 = min(i0 + cs, mu(W_SEG_I));
        var n = 0u;
        for (var i = i0; i < i1; i = i + 1u) {
            if (seg_value(i) == v) { n = n + 1u; }
        }
        seg[t] = n;
    }
}

// one invocation per value: its total over the chunks
@compute @workgroup_size(WG)
fn seg_total(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
             @builtin(local_invocation_index) lid: u32) {
    let nv = mu(W_AXIS_LEN);
    let nc = mu(W_SEG_CHUNKS);
    for (var v = linear_id(wid, nwg, lid); v < nv; v = v + grid_stride(nwg)) {
        var n = 0u;
        for (var c = 0u; c < nc; c = c + 1u) { n = n + seg[c * nv + v]; }
        seg[nc * nv + v] = n;
    }
}

// one invocation per value v: its segment's start (the totals of the values before it), and each
// chunk's count of v turned into the offset where that chunk's positions of v go
@compute @workgroup_size(WG)
fn seg_offsets(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
               @builtin(local_invocation_index) lid: u32) {
    let nv = mu(W_AXIS_LEN);
    let nc = mu(W_SEG_CHUNKS);
    for (var v = linear_id(wid, nwg, lid); v < nv; v = v + grid_stride(nwg)) {
        var base = 0u;
        for (var u = 0u; u < v; u = u + 1u) { base = base + seg[nc * nv + u]; }
        seg[(nc + 1u) * nv + v] = base;
        for (var c = 0u; c < nc; c = c + 1u) {
            let n = seg[c * nv + v];
            seg[c * nv + v] = base;
            base = base + n;
        }
    }
}

// one invocation per (chunk c, value v): chunk c's positions holding v, in increasing order
@compute @workgroup_size(WG)
fn seg_place(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
             @builtin(local_invocation_index) lid: u32) {
    let nv = mu(W_AXIS_LEN);
    let cs = mu(W_SEG_CHUNK);
    for (var t = linear_id(wid, nwg, lid); t < mu(W_SEG_CHUNKS) * nv; t = t + grid_stride(nwg)) {
        let v = t % nv;
        let i0 = (t / nv) * cs;
        let i1 = min(i0 + cs, mu(W_SEG_I));
        var r = seg[t];
        for (var i = i0; i < i1; i = i + 1u) {
            if (seg_value(i) == v) {
                perm[r] = i;
                r = r + 1u;
            }
        }
    }
}

// one invocation per output element (p, v, q): the sum of src[p, i, q] over the positions i of
// v's segment (the launcher takes this path only when SEG_I fits the loop budget); src dense
// (P, SEG_I, INNER) at OFFSET_A
@compute @workgroup_size(WG)
fn seg_sum(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
           @builtin(local_invocation_index) lid: u32) {
    let n = mu(W_N);
    let nv = mu(W_AXIS_LEN);
    let nc = mu(W_SEG_CHUNKS);
    let inner = mu(W_INNER);
    for (var t = linear_id(wid, nwg, lid); t < n; t = t + grid_stride(nwg)) {
        let q = t % inner;
        let v = (t / inner) % nv;
        let p = t / (inner * nv);
        let start = seg[(nc + 1u) * nv + v];
        let end = start + seg[nc * nv + v];
        let base = mu(W_OFFSET_A) + p * mu(W_SEG_I) * inner + q;
        var acc = C(0);
        for (var r = start; r < end; r = r + 1u) {
            acc = acc + C(a[base + perm[r] * inner]);
        }
        out[mu(W_OFFSET_OUT) + t] = store_c(acc);
    }
}
