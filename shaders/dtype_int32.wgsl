// element type S (storage) and compute type C for int32 tensors
alias S = i32;
alias C = i32;
const IS_INT: bool = true;
fn store_c(v: C) -> S { return S(v); }
fn store4(v: vec4<C>) -> vec4<S> { return vec4<S>(v); }
fn mad4(a: C, b: vec4<C>, c: vec4<C>) -> vec4<C> { return c + a * b; }
fn neg_c(x: C) -> C { return -x; }
fn round_s(v: C) -> C { return v; }
