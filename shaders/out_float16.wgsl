alias SO = f16;
fn to_out(v: f32) -> SO { return f16(v); }
