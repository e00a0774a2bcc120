// element type S (storage) and compute type C for bool tensors: one u32 (0 or 1) per element
alias S = u32;
alias C = i32;
const IS_INT: bool = true;
// bool results are normalised to 0/1 (numpy: True + True is True)
fn store_c(v: C) -> S { return select(0u, 1u, v != 0); }
fn store4(v: vec4<C>) -> vec4<S> { return select(vec4<u32>(0u), vec4<u32>(1u), v != vec4<C>(0)); }
fn mad4(a: C, b: vec4<C>, c: vec4<C>) -> vec4<C> { return c + a * b; }
fn neg_c(x: C) -> C { return -x; }
fn round_s(v: C) -> C { return C(store_c(v)); }
