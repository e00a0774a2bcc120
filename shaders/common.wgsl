// common.wgsl — helpers shared by every kernel.
//
// Each dispatch gets META_WORDS u32 words of metadata in a uniform buffer at binding 0 (`META`).
// Their names (W_N, W_SHAPE, ...), the storage bindings and the override constants of each kernel
// file are declared in numr_web/backends/webgpu/contract.py; codegen.py writes them as the header
// of the module (`numr-web shaders --dump` prints it). Kernels read word W_X with mu(W_X).

fn mu(i: u32) -> u32 { return META[i >> 2u][i & 3u]; }
fn mf(i: u32) -> f32 { return bitcast<f32>(mu(i)); }
fn mi(i: u32) -> i32 { return bitcast<i32>(mu(i)); }

// NaN/inf bit patterns live in private variables: Chromium's WGSL compiler constant-folds
// bitcast<f32>(0x7fc00000u) and rejects the non-finite constant.
var<private> NAN_BITS: u32 = 0x7fc00000u;
var<private> INF_BITS: u32 = 0x7f800000u;
fn nan_f32() -> f32 { return bitcast<f32>(NAN_BITS); }
fn inf_f32() -> f32 { return bitcast<f32>(INF_BITS); }

// A scalar stored at word k, as the compute type C (i32 bits for integer dtypes).
fn scalar_c(k: u32) -> C {
    if (IS_INT) { return C(mi(k)); }
    return C(mf(k));
}

// Linear invocation index over a 2-D grid of WG-wide workgroups (WG: generated), and the
// grid-stride step.
fn linear_id(wid: vec3<u32>, nwg: vec3<u32>, lid: u32) -> u32 {
    return (wid.y * nwg.x + wid.x) * WG + lid;
}
fn grid_stride(nwg: vec3<u32>) -> u32 { return nwg.x * nwg.y * WG; }

// NaN tests on the bit pattern (`x != x` may be folded away by compilers that assume no NaNs).
fn isnan_f(x: f32) -> bool { return (bitcast<u32>(x) & 0x7fffffffu) > 0x7f800000u; }
fn isinf_f(x: f32) -> bool { return (bitcast<u32>(x) & 0x7fffffffu) == 0x7f800000u; }
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
