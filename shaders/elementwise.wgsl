// elementwise.wgsl — one-pass kernels over the elements of the output, for any dtype S
// (dtype_*.wgsl) with strided / broadcast (stride 0) operands and scalar operands.
//
// Metadata words, bindings and overrides: contract.ELEMENTWISE (the generated header). Operands
// (out, a, b, cond) sit at element offsets W_OFFSET_* of their bindings with strides W_STRIDES_*
// over the coalesced shape W_SHAPE (W_NDIM dims). Every thread walks the output with a
// grid-stride loop (2-D grid: never more than 65,535 workgroups per dimension).

// Element offsets of the four operands (out, a, b, cond) at logical (row-major) index i.
fn offsets4(i: u32) -> vec4<u32> {
    var rem = i;
    var o = vec4<u32>(mu(W_OFFSET_OUT), mu(W_OFFSET_A), mu(W_OFFSET_B), mu(W_OFFSET_COND));
    let nd = mu(W_NDIM);
    for (var d = nd; d > 0u; d = d - 1u) {
        let k = d - 1u;
        let s = mu(W_SHAPE + k);
        let c = rem % s;
        rem = rem / s;
        o = o + c * vec4<u32>(mu(W_STRIDES_OUT + k), mu(W_STRIDES_A + k), mu(W_STRIDES_B + k),
                              mu(W_STRIDES_COND + k));
    }
    return o;
}

fn idx(i: u32) -> vec4<u32> {
    if (FLAT) {
        return vec4<u32>(mu(W_OFFSET_OUT) + i, mu(W_OFFSET_A) + i, mu(W_OFFSET_B) + i,
                         mu(W_OFFSET_COND) + i);
    }
    return offsets4(i);
}

// The op functions (unary_*, binary_*, compare_*) are in elementwise_ops.wgsl, included before
// this file.

fn load_a(o: vec4<u32>) -> C {
    if (A_SCALAR) { return scalar_c(W_SCALAR_A); }
    return C(a[o.y]);
}
fn load_b(o: vec4<u32>) -> C {
    if (B_SCALAR) { return scalar_c(W_SCALAR_B); }
    return C(b[o.z]);
}

@compute @workgroup_size(WG)
fn unary(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
         @builtin(local_invocation_index) lid: u32) {
    let n = mu(W_N);
    for (var i = linear_id(wid, nwg, lid); i < n; i = i + grid_stride(nwg)) {
        let o = idx(i);
        out[o.x] = store_c(unop(C(a[o.y])));
    }
}

@compute @workgroup_size(WG)
fn binary(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
          @builtin(local_invocation_index) lid: u32) {
    let n = mu(W_N);
    for (var i = linear_id(wid, nwg, lid); i < n; i = i + grid_stride(nwg)) {
        let o = idx(i);
        out[o.x] = store_c(binop(load_a(o), load_b(o)));
    }
}

// Dense operands, 4 elements per vec4 load/store (W_N = number of vec4s, W_OFFSET_OUT/A/B in
// vec4 units): the bandwidth-bound path of every dense unary/binary op, including
// the fused activation backward dz = dy * act'(saved).
fn unop4(x: vec4<C>) -> vec4<C> { return vec4<C>(unop(x.x), unop(x.y), unop(x.z), unop(x.w)); }

@compute @workgroup_size(WG)
fn unary4(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
          @builtin(local_invocation_index) lid: u32) {
    let n = mu(W_N);
    for (var i = linear_id(wid, nwg, lid); i < n; i = i + grid_stride(nwg)) {
        out4[mu(W_OFFSET_OUT) + i] = store4(unop4(vec4<C>(a4[mu(W_OFFSET_A) + i])));
    }
}

@compute @workgroup_size(WG)
fn binary4(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
           @builtin(local_invocation_index) lid: u32) {
    let n = mu(W_N);
    for (var i = linear_id(wid, nwg, lid); i < n; i = i + grid_stride(nwg)) {
        var x = vec4<C>(scalar_c(W_SCALAR_A));
        var y = vec4<C>(scalar_c(W_SCALAR_B));
        if (!A_SCALAR) { x = vec4<C>(a4[mu(W_OFFSET_A) + i]); }
        if (!B_SCALAR) { y = vec4<C>(b4[mu(W_OFFSET_B) + i]); }
        out4[mu(W_OFFSET_OUT) + i] = store4(vec4<C>(binop(x.x, y.x), binop(x.y, y.y),
                                                     binop(x.z, y.z), binop(x.w, y.w)));
    }
}

@compute @workgroup_size(WG)
fn compare(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
           @builtin(local_invocation_index) lid: u32) {
    let n = mu(W_N);
    for (var i = linear_id(wid, nwg, lid); i < n; i = i + grid_stride(nwg)) {
        let o = idx(i);
        outb[o.x] = select(0u, 1u, cmpop(load_a(o), load_b(o)));
    }
}

@compute @workgroup_size(WG)
fn where_(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
          @builtin(local_invocation_index) lid: u32) {
    let n = mu(W_N);
    for (var i = linear_id(wid, nwg, lid); i < n; i = i + grid_stride(nwg)) {
        let o = idx(i);
        out[o.x] = store_c(select(load_b(o), load_a(o), cnd[o.w] != 0u));
    }
}

// astype: S -> SO through f32 (exact for every supported pair; int32 -> int32 is a copy).
@compute @workgroup_size(WG)
fn astype(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
          @builtin(local_invocation_index) lid: u32) {
    let n = mu(W_N);
    for (var i = linear_id(wid, nwg, lid); i < n; i = i + grid_stride(nwg)) {
        let o = idx(i);
        outo[o.x] = to_out(f32(C(a[o.y])));
    }
}

// full: every element = the scalar in word SCALAR_A.
@compute @workgroup_size(WG)
fn fill(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
        @builtin(local_invocation_index) lid: u32) {
    let n = mu(W_N);
    let v = store_c(scalar_c(W_SCALAR_A));
    for (var i = linear_id(wid, nwg, lid); i < n; i = i + grid_stride(nwg)) {
        out[mu(W_OFFSET_OUT) + i] = v;
    }
}

// arange: start (word SCALAR_A) + i * step (word SCALAR_B).
@compute @workgroup_size(WG)
fn arange(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
          @builtin(local_invocation_index) lid: u32) {
    let n = mu(W_N);
    for (var i = linear_id(wid, nwg, lid); i < n; i = i + grid_stride(nwg)) {
        out[mu(W_OFFSET_OUT) + i] =
            store_c(scalar_c(W_SCALAR_A) + C(i) * scalar_c(W_SCALAR_B));
    }
}

// Counter-based RNG: a keyed hash of (seed, element index) — "lowbias32" (C. Wellons' integer
// hash, full avalanche) applied twice around the 64-bit seed — so values do not depend on the grid.
fn lowbias32(v: u32) -> u32 {
    var x = v;
    x = x ^ (x >> 16u);
    x = x * 0x7feb352du;
    x = x ^ (x >> 15u);
    x = x * 0x846ca68bu;
    x = x ^ (x >> 16u);
    return x;
}
fn rand_u32(i: u32, k: u32) -> u32 {
    let key = lowbias32(mu(W_SEED_LO) ^ 0x9e3779b9u);
    return lowbias32(lowbias32((2u * i + k) ^ key) + mu(W_SEED_HI));
}

// random: OP RANDOM_UNIFORM in [0, 1), RANDOM_NORMAL standard normal (Box-Muller).
@compute @workgroup_size(WG)
fn random(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
          @builtin(local_invocation_index) lid: u32) {
    let n = mu(W_N);
    for (var i = linear_id(wid, nwg, lid); i < n; i = i + grid_stride(nwg)) {
        let u2 = f32(rand_u32(i, 1u) >> 8u) * 5.9604644775390625e-08;     // [0, 1)
        var v: f32;
        if (OP == RANDOM_UNIFORM) {
            v = u2;
            if (mu(W_RANDOM_F16) != 0u) { v = min(v, 0.99951171875); }      // f16: stay below 1
        } else {
            let u1 = f32((rand_u32(i, 0u) >> 8u) + 1u) * 5.9604644775390625e-08;  // (0, 1]
            v = sqrt(-2.0 * log(u1)) * cos(6.283185307179586 * u2 - 3.141592653589793);
        }
        out[mu(W_OFFSET_OUT) + i] = store_c(C(v));
    }
}

// one_hot: out[..., k] = (labels[...] == k); W_DEPTH classes, operand a describes the labels.
@compute @workgroup_size(WG)
fn one_hot(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
           @builtin(local_invocation_index) lid: u32) {
    let n = mu(W_N);
    let depth = mu(W_DEPTH);
    for (var i = linear_id(wid, nwg, lid); i < n; i = i + grid_stride(nwg)) {
        let o = offsets4(i / depth);
        let hit = lab[o.y] == i32(i % depth);
        out[mu(W_OFFSET_OUT) + i] = store_c(select(C(0), C(1), hit));
    }
}

// bool upload: numpy bools arrive as one byte each (4 per word); out gets one u32 each.
@compute @workgroup_size(WG)
fn bool_unpack(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
               @builtin(local_invocation_index) lid: u32) {
    let n = mu(W_N);
    for (var i = linear_id(wid, nwg, lid); i < n; i = i + grid_stride(nwg)) {
        let byte = (raw[i >> 2u] >> (8u * (i & 3u))) & 0xffu;
        out[mu(W_OFFSET_OUT) + i] = store_c(select(C(0), C(1), byte != 0u));
    }
}
