// common.wgsl — the metadata block and helpers shared by every kernel.
//
// Each dispatch gets 256 bytes of metadata in a uniform buffer (64 u32 words, written by
// numr_web/backends/webgpu/backend.py). Word layout (kernels document which words they read):
//   0..7    sizes and scalar parameters (f32/i32 scalars stored as their bit patterns)
//   8..15   element offsets of the bound tensors (views start anywhere in their buffer)
//   16..23  shape (coalesced, at most 8 dims)             -- "array 0"
//   24..31, 32..39, 40..47, 48..55, 56..63                -- "arrays 1..5": element strides etc.

@group(0) @binding(0) var<uniform> M: array<vec4<u32>, 16>;

fn mu(i: u32) -> u32 { return M[i >> 2u][i & 3u]; }
fn mf(i: u32) -> f32 { return bitcast<f32>(mu(i)); }
fn mi(i: u32) -> i32 { return bitcast<i32>(mu(i)); }

// NaN/inf bit patterns live in private variables: Chromium's WGSL compiler constant-folds
// bitcast<f32>(0x7fc00000u) and rejects the non-finite constant.
var<private> NAN_BITS: u32 = 0x7fc00000u;
var<private> INF_BITS: u32 = 0x7f800000u;
fn nan_f32() -> f32 { return bitcast<f32>(NAN_BITS); }
fn inf_f32() -> f32 { return bitcast<f32>(INF_BITS); }

// A scalar operand stored at word k, as the compute type C (i32 bits for integer dtypes).
fn scalar_c(k: u32) -> C {
    if (IS_INT) { return C(mi(k)); }
    return C(mf(k));
}

// Linear invocation index over a 2-D grid of 256-wide workgroups, and the grid-stride step.
const WG: u32 = 256u;
fn linear_id(wid: vec3<u32>, nwg: vec3<u32>, lid: u32) -> u32 {
    return (wid.y * nwg.x + wid.x) * WG + lid;
}
fn grid_stride(nwg: vec3<u32>) -> u32 { return nwg.x * nwg.y * WG; }

// Element offsets of up to four strided operands at logical (row-major) index i of the
// shape in array 0: strides of operand j are in array j+1, base offsets in words 8+j.
fn offsets4(i: u32) -> vec4<u32> {
    var rem = i;
    var o = vec4<u32>(mu(8u), mu(9u), mu(10u), mu(11u));
    let nd = mu(1u);
    for (var d = nd; d > 0u; d = d - 1u) {
        let k = d - 1u;
        let s = mu(16u + k);
        let c = rem % s;
        rem = rem / s;
        o = o + c * vec4<u32>(mu(24u + k), mu(32u + k), mu(40u + k), mu(48u + k));
    }
    return o;
}

// NaN tests on the bit pattern (`x != x` may be folded away by compilers that assume no NaNs).
fn isnan_f(x: f32) -> bool { return (bitcast<u32>(x) & 0x7fffffffu) > 0x7f800000u; }
fn isnan_c(x: C) -> bool {
    if (IS_INT) { return false; }
    return isnan_f(f32(x));
}

// NaN-propagating max/min (numpy semantics).
fn max_c(a: C, b: C) -> C {
    if (a > b || isnan_c(a)) { return a; }
    return b;
}
fn min_c(a: C, b: C) -> C {
    if (a < b || isnan_c(a)) { return a; }
    return b;
}
