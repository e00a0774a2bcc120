alias SO = u32;
fn to_out(v: f32) -> SO { return select(0u, 1u, v != 0.0); }
