// elementwise.wgsl — one-pass kernels over the elements of the output, for any dtype S
// (dtype_*.wgsl) with strided / broadcast (stride 0) operands and scalar operands.
//
// Metadata words (common.wgsl): 0 = number of output elements n, 1 = ndim of the coalesced
// shape, 2/3 = scalar operands or parameters, 8..11 = element offsets of (out, a, b, cond),
// 16.. = shape, 24.. = out strides, 32.. = a strides, 40.. = b strides, 48.. = cond strides.
// Every thread walks the output with a grid-stride loop (2-D grid: never more than 65,535
// workgroups per dimension).

override OP: u32 = 0u;           // which operation (see unop / binop / cmpop)
override ACT: u32 = 0u;          // activation code (act.wgsl) for the activation ops
override FLAT: bool = false;     // all operands dense and of the output's shape: index = offset + i
override A_SCALAR: bool = false; // operand a is the scalar in word 2
override B_SCALAR: bool = false; // operand b is the scalar in word 3

@group(0) @binding(1) var<storage, read_write> out: array<S>;
@group(0) @binding(2) var<storage, read> a: array<S>;
@group(0) @binding(3) var<storage, read> b: array<S>;
@group(0) @binding(4) var<storage, read> cnd: array<u32>;
@group(0) @binding(5) var<storage, read_write> outb: array<u32>;
@group(0) @binding(6) var<storage, read> lab: array<i32>;
@group(0) @binding(7) var<storage, read_write> outo: array<SO>;
@group(0) @binding(8) var<storage, read> raw: array<u32>;
@group(0) @binding(9) var<storage, read> a4: array<vec4<S>>;        // vec4 views of a, b, out
@group(0) @binding(10) var<storage, read> b4: array<vec4<S>>;       // for the dense (FLAT) case
@group(0) @binding(11) var<storage, read_write> out4: array<vec4<S>>;

fn idx(i: u32) -> vec4<u32> {
    if (FLAT) { return vec4<u32>(mu(8u) + i, mu(9u) + i, mu(10u) + i, mu(11u) + i); }
    return offsets4(i);
}

// sin/cos argument reduction to [-pi, pi] (Cody-Waite, two constants): builtin sin/cos are only
// specified on [-pi, pi].
fn reduce_angle(x: f32) -> f32 {
    let k = round(x * 0.15915494309189535);
    return (x - k * 6.28125) - k * 0.0019353071795864769;
}

fn pow_f(x: f32, y: f32) -> f32 {
    if (y == 0.0) { return 1.0; }
    if (y == 1.0) { return x; }
    if (y == 2.0) { return x * x; }
    let yi = round(y);
    let odd = yi == y && abs(yi % 2.0) == 1.0;
    if (x == 0.0) {
        if (y > 0.0) { return select(0.0, x, odd); }
        return select(inf_f32(), select(inf_f32(), -inf_f32(), bitcast<u32>(x) != 0u), odd);
    }
    let r = pow(abs(x), y);
    if (x < 0.0) {
        if (yi != y) { return nan_f32(); }
        return select(r, -r, odd);
    }
    return r;
}

fn pow_c(x: C, y: C) -> C {
    if (IS_INT) {
        var r = C(1);
        var base = x;
        var e = i32(y);
        if (e < 0) { return C(0); }
        loop {
            if (e == 0) { break; }
            if ((e & 1) == 1) { r = r * base; }
            base = base * base;
            e = e >> 1u;
        }
        return r;
    }
    return C(pow_f(f32(x), f32(y)));
}

// UNARY codes: 0 neg 1 abs 2 exp 3 log 4 sqrt 5 sin 6 cos 7 sign 8 copy
//              9 act(z) 10 act'(z) 11 act''(z)  (activation chosen by ACT)  12 erf
fn unop(x: C) -> C {
    switch OP {
        case 0u: { return -x; }
        case 1u: { return abs(x); }
        case 2u: { let f = f32(x); return C(select(exp(f), inf_f32(), f > 88.72283)); }
        case 3u: {
            let f = f32(x);
            if (f < 0.0) { return C(nan_f32()); }
            if (f == 0.0) { return C(-inf_f32()); }
            return C(log(f));
        }
        case 4u: { let f = f32(x); return C(select(sqrt(f), nan_f32(), f < 0.0)); }
        case 5u: { return C(sin(reduce_angle(f32(x)))); }
        case 6u: { return C(cos(reduce_angle(f32(x)))); }
        case 7u: {
            if (x > C(0)) { return C(1); }
            if (x < C(0)) { return C(-1); }
            return x;
        }
        case 9u: { return C(act_fwd(ACT, f32(x))); }
        case 10u: { return C(act_dz(ACT, f32(x))); }
        case 11u: { return C(act_d2(ACT, f32(x))); }
        case 12u: { return C(erf_s(f32(x))); }
        default: { return x; }
    }
}

// BINARY codes: 0 add 1 sub 2 mul 3 div 4 pow 5 maximum 6 minimum
//               7 act_d1: dy * act'(saved) (a = dy, b = saved y or z, activation ACT)
fn binop(x: C, y: C) -> C {
    switch OP {
        case 0u: { return x + y; }
        case 1u: { return x - y; }
        case 2u: { return x * y; }
        case 3u: {
            if (IS_INT && y == C(0)) { return C(0); }
            return x / y;
        }
        case 4u: { return pow_c(x, y); }
        case 5u: { return max_c(x, y); }
        case 6u: { return min_c(x, y); }
        case 7u: { return C(act_d1(ACT, f32(x), f32(y))); }
        default: { return x; }
    }
}

// COMPARE codes: 0 eq 1 ne 2 lt 3 le 4 gt 5 ge
fn cmpop(x: C, y: C) -> bool {
    switch OP {
        case 0u: { return x == y; }
        case 1u: { return x != y; }
        case 2u: { return x < y; }
        case 3u: { return x <= y; }
        case 4u: { return x > y; }
        default: { return x >= y; }
    }
}

fn load_a(o: vec4<u32>) -> C {
    if (A_SCALAR) { return scalar_c(2u); }
    return C(a[o.y]);
}
fn load_b(o: vec4<u32>) -> C {
    if (B_SCALAR) { return scalar_c(3u); }
    return C(b[o.z]);
}

@compute @workgroup_size(256)
fn unary(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
         @builtin(local_invocation_index) lid: u32) {
    let n = mu(0u);
    for (var i = linear_id(wid, nwg, lid); i < n; i = i + grid_stride(nwg)) {
        let o = idx(i);
        out[o.x] = store_c(unop(C(a[o.y])));
    }
}

@compute @workgroup_size(256)
fn binary(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
          @builtin(local_invocation_index) lid: u32) {
    let n = mu(0u);
    for (var i = linear_id(wid, nwg, lid); i < n; i = i + grid_stride(nwg)) {
        let o = idx(i);
        out[o.x] = store_c(binop(load_a(o), load_b(o)));
    }
}

// Dense operands, 4 elements per vec4 load/store (words 0 = number of vec4s, 8/9/10 = offsets
// of out/a/b in vec4 units): the bandwidth-bound path of every dense unary/binary op, including
// the fused activation backward dz = dy * act'(saved).
fn unop4(x: vec4<C>) -> vec4<C> { return vec4<C>(unop(x.x), unop(x.y), unop(x.z), unop(x.w)); }

@compute @workgroup_size(256)
fn unary4(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
          @builtin(local_invocation_index) lid: u32) {
    let n = mu(0u);
    for (var i = linear_id(wid, nwg, lid); i < n; i = i + grid_stride(nwg)) {
        out4[mu(8u) + i] = store4(unop4(vec4<C>(a4[mu(9u) + i])));
    }
}

@compute @workgroup_size(256)
fn binary4(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
           @builtin(local_invocation_index) lid: u32) {
    let n = mu(0u);
    for (var i = linear_id(wid, nwg, lid); i < n; i = i + grid_stride(nwg)) {
        var x = vec4<C>(scalar_c(2u));
        var y = vec4<C>(scalar_c(3u));
        if (!A_SCALAR) { x = vec4<C>(a4[mu(9u) + i]); }
        if (!B_SCALAR) { y = vec4<C>(b4[mu(10u) + i]); }
        out4[mu(8u) + i] = store4(vec4<C>(binop(x.x, y.x), binop(x.y, y.y), binop(x.z, y.z),
                                           binop(x.w, y.w)));
    }
}

@compute @workgroup_size(256)
fn compare(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
           @builtin(local_invocation_index) lid: u32) {
    let n = mu(0u);
    for (var i = linear_id(wid, nwg, lid); i < n; i = i + grid_stride(nwg)) {
        let o = idx(i);
        outb[o.x] = select(0u, 1u, cmpop(load_a(o), load_b(o)));
    }
}

@compute @workgroup_size(256)
fn where_(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
          @builtin(local_invocation_index) lid: u32) {
    let n = mu(0u);
    for (var i = linear_id(wid, nwg, lid); i < n; i = i + grid_stride(nwg)) {
        let o = idx(i);
        out[o.x] = store_c(select(load_b(o), load_a(o), cnd[o.w] != 0u));
    }
}

// astype: S -> SO through f32 (exact for every supported pair; int32 -> int32 is a copy).
@compute @workgroup_size(256)
fn astype(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
          @builtin(local_invocation_index) lid: u32) {
    let n = mu(0u);
    for (var i = linear_id(wid, nwg, lid); i < n; i = i + grid_stride(nwg)) {
        let o = idx(i);
        outo[o.x] = to_out(f32(C(a[o.y])));
    }
}

// full: every element = the scalar in word 2.
@compute @workgroup_size(256)
fn fill(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
        @builtin(local_invocation_index) lid: u32) {
    let n = mu(0u);
    let v = store_c(scalar_c(2u));
    for (var i = linear_id(wid, nwg, lid); i < n; i = i + grid_stride(nwg)) {
        out[mu(8u) + i] = v;
    }
}

// arange: start (word 2) + i * step (word 3).
@compute @workgroup_size(256)
fn arange(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
          @builtin(local_invocation_index) lid: u32) {
    let n = mu(0u);
    for (var i = linear_id(wid, nwg, lid); i < n; i = i + grid_stride(nwg)) {
        out[mu(8u) + i] = store_c(scalar_c(2u) + C(i) * scalar_c(3u));
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
    let key = lowbias32(mu(2u) ^ 0x9e3779b9u);
    return lowbias32(lowbias32((2u * i + k) ^ key) + mu(3u));
}

// random: OP 0 uniform in [0, 1), OP 1 standard normal (Box-Muller).
@compute @workgroup_size(256)
fn random(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
          @builtin(local_invocation_index) lid: u32) {
    let n = mu(0u);
    for (var i = linear_id(wid, nwg, lid); i < n; i = i + grid_stride(nwg)) {
        let u2 = f32(rand_u32(i, 1u) >> 8u) * 5.9604644775390625e-08;     // [0, 1)
        var v: f32;
        if (OP == 0u) {
            v = u2;
            if (mu(4u) != 0u) { v = min(v, 0.99951171875); }               // f16: stay below 1
        } else {
            let u1 = f32((rand_u32(i, 0u) >> 8u) + 1u) * 5.9604644775390625e-08;  // (0, 1]
            v = sqrt(-2.0 * log(u1)) * cos(6.283185307179586 * u2 - 3.141592653589793);
        }
        out[mu(8u) + i] = store_c(C(v));
    }
}

// one_hot: out[..., k] = (labels[...] == k); word 2 = depth, shape/strides describe the labels.
@compute @workgroup_size(256)
fn one_hot(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
           @builtin(local_invocation_index) lid: u32) {
    let n = mu(0u);
    let depth = mu(2u);
    for (var i = linear_id(wid, nwg, lid); i < n; i = i + grid_stride(nwg)) {
        let o = offsets4(i / depth);
        let hit = lab[o.y] == i32(i % depth);
        out[mu(8u) + i] = store_c(select(C(0), C(1), hit));
    }
}

// bool upload: numpy bools arrive as one byte each (4 per word); out gets one u32 each.
@compute @workgroup_size(256)
fn bool_unpack(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
               @builtin(local_invocation_index) lid: u32) {
    let n = mu(0u);
    for (var i = linear_id(wid, nwg, lid); i < n; i = i + grid_stride(nwg)) {
        let byte = (raw[i >> 2u] >> (8u * (i & 3u))) & 0xffu;
        out[mu(8u) + i] = store_c(select(C(0), C(1), byte != 0u));
    }
}
