// element type S (storage) and compute type C for float16 tensors (needs `enable f16;`, prepended
// by kernels.py when the adapter has shader-f16): computed in f32, rounded once on store.
alias S = f16;
alias C = f32;
const IS_INT: bool = false;
fn store_c(v: C) -> S { return S(v); }
fn store4(v: vec4<C>) -> vec4<S> { return vec4<S>(v); }
// c + a * b with a guaranteed fused multiply-add (the GEMM inner loop)
fn mad4(a: C, b: vec4<C>, c: vec4<C>) -> vec4<C> { return fma(vec4<C>(a), b, c); }
// -x as a sign-bit flip: NVIDIA's compilers return a NaN operand of a negation unchanged
fn neg_c(x: C) -> C { return bitcast<f32>(bitcast<u32>(x) ^ 0x80000000u); }
// v rounded to f16 and back (to nearest, ties to even; f16 subnormals kept), in integer and
// exact float steps: f32(f16(v)) in registers is not rounded as a store to f16 memory is on
// NVIDIA's Vulkan driver (a conversion's rounding mode is the implementation's unless declared)
fn round_s(v: C) -> C {
    let a = abs(v);
    if (isnan_f(v)) { return v; }
    if (a >= 65520.0) { return bitcast<f32>((bitcast<u32>(v) & 0x80000000u) | 0x7f800000u); }
    if (a < 6.103515625e-05) { return round(v * 16777216.0) * 5.9604644775390625e-08; }
    let u = bitcast<u32>(v);
    return bitcast<f32>((u + 0x0fffu + ((u >> 13u) & 1u)) & 0xffffe000u);
}
