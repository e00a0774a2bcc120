// output type SO of the dtype-converting kernels (astype) and its conversion from f32
alias SO = f32;
fn to_out(v: f32) -> SO { return v; }
