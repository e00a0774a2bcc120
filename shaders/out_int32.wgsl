alias SO = i32;
fn to_out(v: f32) -> SO { return i32(v); }
