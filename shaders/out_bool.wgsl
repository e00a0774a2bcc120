alias SO = u32;
// true unless +-0 (NaN is true, as in torch): on the bits, as `v != 0.0` is false for NaN on
// compilers that compare ordered
fn to_out(v: f32) -> SO { return select(0u, 1u, (bitcast<u32>(v) & 0x7fffffffu) != 0u); }
