// element type S (storage) and compute type C for float32 tensors
alias S = f32;
alias C = f32;
const IS_INT: bool = false;
fn store_c(v: C) -> S { return S(v); }
fn store4(v: vec4<C>) -> vec4<S> { return vec4<S>(v); }
// c + a * b with a guaranteed fused multiply-add (the GEMM inner loop)
fn mad4(a: C, b: vec4<C>, c: vec4<C>) -> vec4<C> { return fma(vec4<C>(a), b, c); }
// -x as a sign-bit flip: NVIDIA's compilers return a NaN operand of a negation unchanged
fn neg_c(x: C) -> C { return bitcast<f32>(bitcast<u32>(x) ^ 0x80000000u); }
fn round_s(v: C) -> C { return v; }
