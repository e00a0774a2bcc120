// elementwise_ops.wgsl — the kernel of each elementwise op as a function of its operands (C: f32 or
// i32, dtype_*.wgsl), and their helpers. No bindings and no metadata: included (contract.includes)
// by elementwise.wgsl, whose one-op kernels call them through the generated `unop` / `binop` /
// `cmpop` switches, and by fused.wgsl, whose generated kernels call them one after the other
// (codegen_fused.py) for a chain of ops recorded lazily (fusion.py).

// sin and cos: Payne-Hanek argument reduction (exact integer arithmetic on 16-bit limbs, so no
// compiler can reassociate it) to r in [-pi/4, pi/4] and a quadrant n, then minimax polynomials
// on r (musl's __sindf/__cosdf coefficients). Builtin sin/cos are only specified on [-pi, pi]
// and lose everything for large arguments.
var<private> TWO_OVER_PI: array<u32, 8> = array<u32, 8>(0xa2f9836eu, 0x4e441529u, 0xfc2757d1u,
    0xf534ddc0u, 0xdb629599u, 0x3c439041u, 0xfe5163abu, 0xdebbc561u);   // 2/pi, 256 bits

// 16-bit limb i (0 = least significant) of the 128-bit window of 2/pi that starts at word w0.
fn pio2_limb(w0: u32, i: i32) -> u32 {
    if (i < 0 || i > 7) { return 0u; }
    let word = TWO_OVER_PI[w0 + 3u - u32(i / 2)];
    return select(word & 0xffffu, word >> 16u, (i & 1) == 1);
}

// 32 bits of the limb array r starting at bit pos (pos >= 0).
fn limbs32(r: ptr<function, array<u32, 14>>, pos: u32) -> u32 {
    let li = pos / 16u;
    let sh = pos % 16u;
    let v = (*r)[li] | ((*r)[li + 1u] << 16u);
    let v2 = (*r)[li + 2u] | ((*r)[li + 3u] << 16u);
    if (sh == 0u) { return v; }
    return (v >> sh) | (v2 << (32u - sh));
}

// |x| = r + n pi/2 (mod 2 pi) for finite |x| >= pi/4: returns (r, n).
fn reduce_pio2(ax: f32) -> vec2<f32> {
    let bits = bitcast<u32>(ax);
    let m = (bits & 0x7fffffu) | 0x800000u;            // |x| = m 2^e
    let e = i32(bits >> 23u) - 150;
    let p0 = (max(e - 2, 0) / 32) * 32;                 // bits of 2/pi before p0 give multiples of 4
    let w0 = u32(p0 / 32);
    let ml = m & 0xffffu;
    let mh = m >> 16u;
    var r: array<u32, 14>;
    var carry = 0u;
    for (var i = 0; i < 14; i = i + 1) {                // r = m * window (16-bit limbs)
        let a = ml * pio2_limb(w0, i);
        let b = ml * pio2_limb(w0, i - 1);
        let c = mh * pio2_limb(w0, i - 1);
        let d = mh * pio2_limb(w0, i - 2);
        let t = (a & 0xffffu) + (b >> 16u) + (c & 0xffffu) + (d >> 16u) + carry;
        r[i] = t & 0xffffu;
        carry = t >> 16u;
    }
    let f = u32(128 - (e - p0));                        // the binary point's bit position in r
    let hi = limbs32(&r, f - 30u);                      // 2 integer bits, 30 fraction bits
    let lo = limbs32(&r, f - 62u);                      // the next 32 fraction bits
    var n = hi >> 30u;
    let a = (hi << 2u) | (lo >> 30u);
    if (a >= 0x80000000u) { n = n + 1u; }               // round to the nearest quadrant
    let frac = f32(bitcast<i32>(a)) * 2.3283064365386963e-10 + f32((lo << 2u) >> 8u)
               * 1.3877787807814457e-17;
    let rr = frac * 1.5707963705062866 + frac * -4.371139000186243e-08;
    return vec2<f32>(rr, f32(n & 3u));
}

fn sin_poly(x: f32) -> f32 {
    let z = x * x;
    let w = z * z;
    let r = -0.000198393348360966317347 + z * 0.0000027183114939898219064;
    let s = z * x;
    return (x + s * (-0.166666666416265235595 + z * 0.0083333293858894631756)) + s * w * r;
}

fn cos_poly(x: f32) -> f32 {
    let z = x * x;
    let w = z * z;
    let r = -0.00138867637746099294692 + z * 0.0000243904487962774090654;
    return ((1.0 + z * -0.499999997251031003120) + w * 0.0416666233237390631894) + (w * z) * r;
}

// sin (want_cos false) or cos of x.
fn sincos_s(x: f32, want_cos: bool) -> f32 {
    if (isnan_f(x) || isinf_f(x)) { return nan_f32(); }
    let ax = abs(x);
    var q = vec2<f32>(ax, 0.0);
    if (ax >= 0.7853981633974483) { q = reduce_pio2(ax); }
    let n = u32(q.y) + select(0u, 1u, want_cos);         // cos x = sin(x + pi/2)
    var v = select(sin_poly(q.x), cos_poly(q.x), (n & 1u) == 1u);
    if ((n & 2u) == 2u) { v = -v; }
    if (!want_cos && x < 0.0) { v = -v; }
    return v;
}

// x**n for an integer |n| <= 2**24 by squaring (each step rounds once: a few ulp at most, where
// exp2(n log2 x) loses |n log2 x| ulp).
fn pow_int(x: f32, n: f32) -> f32 {
    var e = u32(abs(n));
    var base = x;
    var r = 1.0;
    loop {
        if (e == 0u) { break; }
        if ((e & 1u) == 1u) { r = r * base; }
        e = e >> 1u;
        if (e != 0u) { base = base * base; }
    }
    if (n < 0.0) { return 1.0 / r; }
    return r;
}

// pow with C99's (and torch's) special cases, tested on bit patterns (compilers may assume no NaN):
// x**0 = 1 and 1**y = 1 even for NaN; NaN otherwise propagates; (-1)**(+-inf) = 1; |x| < 1 or > 1
// to +-inf gives 0 or inf; signed zeros and infinities keep the sign for odd integer y.
fn pow_f(x: f32, y: f32) -> f32 {
    if (y == 0.0 || bitcast<u32>(x) == 0x3f800000u) { return 1.0; }
    if (isnan_f(x) || isnan_f(y)) { return nan_f32(); }
    let ay = abs(y);
    let ax = abs(x);
    if (isinf_f(y)) {
        if (ax == 1.0) { return 1.0; }
        if ((ax > 1.0) == (y > 0.0)) { return inf_f32(); }
        return 0.0;
    }
    let yint = floor(ay) == ay;
    let odd = yint && ay < 16777216.0 && (u32(ay) & 1u) == 1u;
    let neg = bitcast<u32>(x) >= 0x80000000u;            // sign bit: -0.0 and -inf included
    if (ax == 0.0 || isinf_f(x)) {
        let big = (ax == 0.0) == (y < 0.0);               // 0**neg and inf**pos: inf
        var r = 0.0;
        if (big) { r = inf_f32(); }
        return select(r, -r, neg && odd);
    }
    if (neg && !yint) { return nan_f32(); }
    var r: f32;
    if (yint && ay <= 64.0) {
        r = pow_int(ax, y);
    } else {
        r = pow_pos(ax, y);
    }
    return select(r, -r, neg && odd);
}

// x**y for finite x > 0 as 2^(y log2 x) with log2 x = e + log2 m (m in [sqrt 1/2, sqrt 2)):
// y e is split into exact products (y = yh + yl, yh of 12 bits), and each of y e and y log2 m into
// an integer and an exact fraction, so that only the fractions are added in floating point. The
// error is then ~ (1 + |y log2 m|) ulp, where exp2(y log2 x) loses |y log2 x| ulp.
fn pow_pos(x: f32, y: f32) -> f32 {
    var xs = x;
    var e0 = 0.0;
    if (xs < 1.1754943508222875e-38) { xs = xs * 16777216.0; e0 = -24.0; }   // subnormal x
    let bits = bitcast<u32>(xs);
    var e = f32(i32(bits >> 23u) - 127) + e0;
    var m = bitcast<f32>((bits & 0x7fffffu) | 0x3f800000u);                 // [1, 2)
    if (m > 1.4142135623730951) { m = 0.5 * m; e = e + 1.0; }
    let lm = log1p_s(m - 1.0) * 1.4426950408889634;                         // log2 m
    let yh = bitcast<f32>(bitcast<u32>(y) & 0xfffff000u);
    let a = yh * e;                                                          // exact
    let b = (y - yh) * e;                                                    // exact
    let c = y * lm;
    let na = round(a);
    let nb = round(b);
    let nc = round(c);
    let n = na + nb + nc;
    let f = ((a - na) + (b - nb)) + (c - nc);
    if (n > 300.0) { return inf_f32(); }
    if (n < -300.0) { return 0.0; }
    let q = exp_parts(f * 0.6931471805599453);
    return scale2(q.x, q.y + n);
}

fn pow_c(x: C, y: C) -> C {
    if (IS_INT) {
        var r = C(1);
        var base = x;
        var e = i32(y);
        if (e < 0) { return C(0); }
        loop {
            if (e == 0) { break; }
            if ((e & 1) == 1) { r = r * base; }
            base = base * base;
            e = e >> 1u;
        }
        return r;
    }
    return C(pow_f(f32(x), f32(y)));
}

// -- the kernel of each vocabulary row (numr_web/ops/elementwise.py); the `switch` on OP that
// picks one (unop, binop, cmpop, with named codes UNARY_EXP, ...) is generated by codegen.py.
// Every function compiles for every dtype (C is f32 or i32): integer-only ops go through bitcast,
// float-only ones through f32, and the ops layer never sends a dtype an op does not take.
fn unary_neg(x: C) -> C { return neg_c(x); }
fn unary_abs(x: C) -> C { return abs(x); }
fn unary_exp(x: C) -> C { return C(exp_s(f32(x))); }
fn log_f(f: f32) -> f32 {
    if (f < 0.0) { return nan_f32(); }
    if (f == 0.0) { return -inf_f32(); }
    if (f < 1.1754943508222875e-38) { return log_s(f * 16777216.0) - 16.635532333438686; }
    return log_s(f);
}
fn unary_log(x: C) -> C { return C(log_f(f32(x))); }
fn unary_sqrt(x: C) -> C { let f = f32(x); return C(select(sqrt(f), nan_f32(), f < 0.0)); }
fn unary_sin(x: C) -> C { return C(sincos_s(f32(x), false)); }
fn unary_cos(x: C) -> C { return C(sincos_s(f32(x), true)); }
// (x > 0) - (x < 0): 0, -0 and NaN give +0 (as torch)
fn unary_sign(x: C) -> C { return C(select(0, 1, x > C(0)) - select(0, 1, x < C(0))); }
fn unary_erf(x: C) -> C { return C(erf_s(f32(x))); }
fn unary_log1p(x: C) -> C {
    let f = f32(x);
    if (f < -1.0) { return C(nan_f32()); }
    if (f == -1.0) { return C(-inf_f32()); }
    return C(log1p_s(f));
}
fn unary_expm1(x: C) -> C { return C(expm1_s(f32(x))); }
fn unary_rsqrt(x: C) -> C {
    let f = f32(x);
    if (f < 0.0) { return C(nan_f32()); }
    if (f == 0.0) { return C(1.0 / f); }           // -0 -> -inf, +0 -> +inf (IEEE rsqrt, torch)
    return C(1.0 / sqrt(f));
}
fn unary_bitwise_not(x: C) -> C { return bitcast<C>(~bitcast<i32>(x)); }
// rounding and the rest of torch's float math (numr_web/ops/math_ops.py); integers never come here
fn unary_floor(x: C) -> C { return C(floor(f32(x))); }
fn unary_ceil(x: C) -> C { return C(ceil(f32(x))); }
fn unary_round(x: C) -> C { return C(round(f32(x))); }            // half to even, as torch
fn unary_trunc(x: C) -> C { return C(trunc(f32(x))); }
fn unary_reciprocal(x: C) -> C { return C(div_f(1.0, f32(x))); }
// 2^x = 2^(x - k) 2^k, k = round(x): x - k is exact, so only exp of |r| <= 0.35 rounds
fn unary_exp2(x: C) -> C {
    let f = f32(x);
    if (f >= 128.0) { return C(inf_f32()); }
    if (f < -160.0) { return C(0.0); }
    let k = round(f);
    return C(scale2(exp_s((f - k) * 0.6931471805599453), k));
}
// log2 and log10 from x = m 2^e with m in [sqrt(1/2), sqrt(2)): powers of two are exact
fn log_base(f: f32, inv_ln_base: f32, log_base_2: f32) -> f32 {
    if (f < 0.0) { return nan_f32(); }
    if (f == 0.0) { return -inf_f32(); }
    if ((bitcast<u32>(f) & 0x7fffffffu) >= 0x7f800000u) { return f; }     // inf, NaN
    var g = f;
    var e = 0.0;
    if (g < 1.1754943508222875e-38) { g = g * 16777216.0; e = -24.0; }    // subnormal: scale up
    let p = frexp(g);
    var m = p.fract;
    e = e + f32(p.exp);
    if (m < 0.7071067811865476) { m = m * 2.0; e = e - 1.0; }
    return e * log_base_2 + log1p_s(m - 1.0) * inv_ln_base;
}
fn unary_log2(x: C) -> C { return C(log_base(f32(x), 1.4426950408889634, 1.0)); }
fn unary_log10(x: C) -> C { return C(log_base(f32(x), 0.4342944819032518, 0.3010299956639812)); }
fn unary_tan(x: C) -> C {
    let f = f32(x);
    if (f == 0.0) { return x; }                          // +-0 keep their sign
    return C(div_f(sincos_s(f, false), sincos_s(f, true)));
}
// |r| with the sign bit of v: the odd functions keep the sign of a zero (asin(-0) = -0)
fn with_sign_of(r: f32, v: f32) -> f32 {
    return bitcast<f32>((bitcast<u32>(r) & 0x7fffffffu) | (bitcast<u32>(v) & 0x80000000u));
}
// sinh and cosh from expm1 / exp of |x| (musl's forms: no cancellation near 0, no overflow of
// exp(|x|) below the float32 range of the result: e^|x| = (e^(|x|/2))^2)
fn unary_sinh(x: C) -> C {
    let f = f32(x);
    let a = abs(f);
    if (a < 9.0) {
        let t = expm1_s(a);
        if (a < 1.0) { return C(with_sign_of(0.5 * (2.0 * t - t * t / (t + 1.0)), f)); }
        return C(with_sign_of(0.5 * (t + t / (t + 1.0)), f));
    }
    let e = exp_s(0.5 * a);
    return C(with_sign_of((0.5 * e) * e, f));
}
fn unary_cosh(x: C) -> C {
    let a = abs(f32(x));
    if (a < 9.0) { let e = exp_s(a); return C(0.5 * e + 0.5 / e); }
    let e = exp_s(0.5 * a);
    return C((0.5 * e) * e);
}
// atan, asin, acos: Cephes' single-precision reductions and polynomials (within ~2 ulp); the
// builtins may be far less accurate (WGSL allows 4096 ulp for atan) and lavapipe's atan(NaN) is 0
const PI_F: f32 = 3.141592653589793;
const PI_2_F: f32 = 1.5707963267948966;
const PI_4_F: f32 = 0.7853981633974483;
fn atan_s(v: f32) -> f32 {
    var x = abs(v);
    var y = 0.0;
    if (x > 2.414213562373095) { y = PI_2_F; x = -1.0 / x; }
    else if (x > 0.4142135623730950) { y = PI_4_F; x = (x - 1.0) / (x + 1.0); }
    let z = x * x;
    y = y + ((((8.05374449538e-2 * z - 1.38776856032e-1) * z + 1.99777106478e-1) * z
              - 3.33329491539e-1) * z * x + x);
    if (isnan_f(v)) { return v; }
    return with_sign_of(y, v);
}
fn asin_s(v: f32) -> f32 {
    let a = abs(v);
    if (a > 1.0 || isnan_f(v)) { return nan_f32(); }
    var x = a;
    var z = a * a;
    let big = a > 0.5;
    if (big) { z = 0.5 * (1.0 - a); x = sqrt(z); }
    var p = ((((4.2163199048e-2 * z + 2.4181311049e-2) * z + 4.5470025998e-2) * z
              + 7.4953002686e-2) * z + 1.6666752422e-1) * z * x + x;
    if (big) { p = PI_2_F - (p + p); }
    return with_sign_of(p, v);
}
fn acos_s(x: f32) -> f32 {
    if (x < -0.5) { return PI_F - 2.0 * asin_s(sqrt(0.5 * (1.0 + x))); }
    if (x > 0.5) { return 2.0 * asin_s(sqrt(0.5 * (1.0 - x))); }
    return PI_2_F - asin_s(x);
}
// atan2(y, x) from atan_s of a ratio <= 1, then the quadrant; the sign bits of zeros count
fn atan2_s(y: f32, x: f32) -> f32 {
    if (isnan_f(x) || isnan_f(y)) { return nan_f32(); }
    let ax = abs(x);
    let ay = abs(y);
    var r = PI_4_F;                                       // both infinite
    if (!(ax == inf_f32() && ay == inf_f32())) {
        if (ay <= ax) { r = select(atan_s(div_f(ay, ax)), 0.0, ay == 0.0); }
        else { r = PI_2_F - atan_s(div_f(ax, ay)); }
    }
    if ((bitcast<u32>(x) & 0x80000000u) != 0u) { r = PI_F - r; }
    return bitcast<f32>(bitcast<u32>(r) | (bitcast<u32>(y) & 0x80000000u));
}
fn unary_asin(x: C) -> C { return C(asin_s(f32(x))); }
fn unary_acos(x: C) -> C { return C(acos_s(f32(x))); }
fn unary_atan(x: C) -> C { return C(atan_s(f32(x))); }
// cbrt: exp2(log2 |x| / 3) and one Newton step; +-0, +-inf and NaN pass; subnormals scaled
fn unary_cbrt(x: C) -> C {
    let f = f32(x);
    var a = abs(f);
    if (a == 0.0 || a > 3.4028234663852886e38 || isnan_f(f)) { return x; }
    var s = 1.0;
    if (a < 1.1754943508222875e-38) { a = a * 16777216.0; s = 0.00390625; }   // 2^24 = (2^8)^3
    var y = exp2(log2(a) / 3.0);
    y = y + (div_f(a, y * y) - y) / 3.0;
    return C(with_sign_of(y * s, f));
}
// logit(x) = log(x / (1 - x)) (torch.logit, eps=None): NaN outside [0, 1]
fn unary_logit(x: C) -> C { let f = f32(x); return C(log_f(div_f(f, 1.0 - f))); }
// sinc(x) = sin(pi x) / (pi x), 1 at 0 (torch.sinc)
fn unary_sinc(x: C) -> C {
    let f = f32(x);
    if (f == 0.0) { return C(1.0); }
    let p = 3.141592653589793 * f;
    return C(div_f(sincos_s(p, false), p));
}
// the backend's own: copy, and an activation (chosen by the ACT override) or its derivatives
fn unary_copy(x: C) -> C { return x; }
// (the act_*_c functions take the activation code: the fused kernels pass a constant ACT_*)
fn act_fwd_c(code: u32, x: C) -> C { return C(act_fwd(code, f32(x))); }
fn act_dz_c(code: u32, x: C) -> C { return C(act_dz(code, f32(x))); }
fn act_d2_c(code: u32, x: C) -> C { return C(act_d2(code, f32(x))); }
fn act_ds_c(code: u32, x: C) -> C { return C(act_ds(code, f32(x))); }
fn act_d1_c(code: u32, x: C, y: C) -> C { return C(act_d1(code, f32(x), f32(y))); }
fn unary_act_fwd(x: C) -> C { return act_fwd_c(ACT, x); }
fn unary_act_dz(x: C) -> C { return act_dz_c(ACT, x); }
fn unary_act_d2(x: C) -> C { return act_d2_c(ACT, x); }
fn unary_act_ds(x: C) -> C { return act_ds_c(ACT, x); }

fn binary_add(x: C, y: C) -> C { return x + y; }
fn binary_sub(x: C, y: C) -> C { return x - y; }
fn binary_mul(x: C, y: C) -> C { return x * y; }
// x / y rounded correctly (to nearest, ties to even), as IEEE's and torch's division. The `/`
// of WGSL may be 2.5 ulp off, and is on NVIDIA's Vulkan compiler (x times an approximate 1 / y,
// which is also flushed to 0 for |y| > 2^126); float corrections of it proved fragile under the
// compiler's freedoms. So: the quotient of the 24-bit significands by integer long division (as
// fmod_f), 25 bits and a sticky bit, rounded once. Subnormal operands and results are exact.
fn div_norm(u: u32) -> vec2<i32> {                       // (significand with its leading 1, exponent)
    var e = i32(u >> 23u);
    var m = u & 0x7fffffu;
    if (e == 0) {
        e = 1;
        loop { if ((m & 0x800000u) != 0u) { break; } m = m << 1u; e = e - 1; }
    } else {
        m = m | 0x800000u;
    }
    return vec2<i32>(i32(m), e);
}
fn div_f(x: f32, y: f32) -> f32 {
    let ux = bitcast<u32>(x);
    let uy = bitcast<u32>(y);
    let sign = (ux ^ uy) & 0x80000000u;
    let ax = ux & 0x7fffffffu;
    let ay = uy & 0x7fffffffu;
    if (ax > 0x7f800000u || ay > 0x7f800000u || (ax == 0u && ay == 0u)
        || (ax == 0x7f800000u && ay == 0x7f800000u)) { return nan_f32(); }
    if (ax == 0x7f800000u || ay == 0u) { return bitcast<f32>(sign | 0x7f800000u); }
    if (ax == 0u || ay == 0x7f800000u) { return bitcast<f32>(sign); }
    let nx = div_norm(ax);
    let ny = div_norm(ay);
    var r = u32(nx.x);
    let d = u32(ny.x);
    var e = nx.y - ny.y + 127;
    if (r < d) { r = r << 1u; e = e - 1; }                // quotient in [1, 2)
    var q = 0u;
    for (var i = 0; i < 25; i = i + 1) {                  // 24 bits and the rounding bit
        q = q << 1u;
        if (r >= d) { q = q | 1u; r = r - d; }
        r = r << 1u;
    }
    let sticky = r != 0u;
    var k = 1u;                                           // low bits of q below the result's last
    if (e <= 0) {
        if (e < -23) { return bitcast<f32>(sign); }       // below half the smallest subnormal
        k = u32(1 - e) + 1u;
        e = 0;
    }
    let lost = q & ((1u << k) - 1u);
    let half = 1u << (k - 1u);
    var m = q >> k;
    if (lost > half || (lost == half && (sticky || (m & 1u) != 0u))) { m = m + 1u; }
    if (e >= 255) { return bitcast<f32>(sign | 0x7f800000u); }
    // a normal result: exponent e and the 23 stored bits (m = 2^24 after rounding carries into
    // the exponent); a subnormal one (e = 0): m itself, which may round up into the smallest normal
    let bits = select(u32(e) << 23u, 0u, e == 0) + select(m - 0x800000u, m, e == 0);
    if (bits >= 0x7f800000u) { return bitcast<f32>(sign | 0x7f800000u); }
    return bitcast<f32>(sign | bits);
}
fn binary_div(x: C, y: C) -> C {
    if (IS_INT) {
        if (y == C(0)) { return C(0); }
        return x / y;
    }
    return C(div_f(f32(x), f32(y)));
}
fn binary_pow(x: C, y: C) -> C { return pow_c(x, y); }
fn binary_maximum(x: C, y: C) -> C { return max_c(x, y); }
fn binary_minimum(x: C, y: C) -> C { return min_c(x, y); }
// fmod(x, y), exact (as C's): long division on the integer mantissas (musl's fmodf), so no
// rounding of x / y or of q y; y = +-inf gives x, y = 0 or x = +-inf gives NaN.
fn fmod_f(x: f32, y: f32) -> f32 {
    var ux = bitcast<u32>(x);
    var uy = bitcast<u32>(y);
    let sx = ux & 0x80000000u;
    ux = ux & 0x7fffffffu;
    uy = uy & 0x7fffffffu;
    var ex = i32(ux >> 23u);
    var ey = i32(uy >> 23u);
    if (uy == 0u || uy > 0x7f800000u || ex == 0xff) { return nan_f32(); }
    if (ux <= uy) {
        if (ux == uy) { return bitcast<f32>(sx); }         // +-0 with x's sign
        return x;
    }
    if (ex == 0) {                                          // subnormal x: normalise
        var i = ux << 9u;
        loop { if ((i >> 31u) != 0u) { break; } ex = ex - 1; i = i << 1u; }
        ux = ux << u32(-ex + 1);
    } else {
        ux = (ux & 0x7fffffu) | 0x800000u;
    }
    if (ey == 0) {
        var i = uy << 9u;
        loop { if ((i >> 31u) != 0u) { break; } ey = ey - 1; i = i << 1u; }
        uy = uy << u32(-ey + 1);
    } else {
        uy = (uy & 0x7fffffu) | 0x800000u;
    }
    loop {
        if (ex <= ey) { break; }
        if (ux >= uy) {
            if (ux == uy) { return bitcast<f32>(sx); }
            ux = ux - uy;
        }
        ux = ux << 1u;
        ex = ex - 1;
    }
    if (ux >= uy) {
        if (ux == uy) { return bitcast<f32>(sx); }
        ux = ux - uy;
    }
    loop { if ((ux >> 23u) != 0u) { break; } ux = ux << 1u; ex = ex - 1; }
    if (ex > 0) {
        ux = (ux - 0x800000u) | (u32(ex) << 23u);
    } else {
        ux = ux >> u32(-ex + 1);
    }
    return bitcast<f32>(ux | sx);
}

// floor division and the remainder with the divisor's sign (Python's and torch's semantics; the
// float floor division is torch's div_floor: from the exact fmod, rounded to the nearest integer)
fn binary_floor_divide(x: C, y: C) -> C {
    if (IS_INT) {
        if (y == C(0)) { return C(0); }
        let q = x / y;                           // truncated; the remainder without `%`, which
        let r = x - q * y;                       // NVIDIA's Vulkan driver got wrong for -3 % 3
        if (r != C(0) && ((r < C(0)) != (y < C(0)))) { return q - C(1); }
        return q;
    }
    let a = f32(x);
    let b = f32(y);
    if (b == 0.0) { return C(a / b); }
    let m = fmod_f(a, b);
    var d = div_f(a - m, b);
    if (m != 0.0 && ((b < 0.0) != (m < 0.0))) { d = d - 1.0; }
    if (d == 0.0) {                                         // a zero with the sign of a / b
        return C(bitcast<f32>((bitcast<u32>(a) ^ bitcast<u32>(b)) & 0x80000000u));
    }
    var f = floor(d);
    if (d - f > 0.5) { f = f + 1.0; }
    return C(f);
}
fn binary_remainder(x: C, y: C) -> C {
    if (IS_INT) {
        if (y == C(0)) { return C(0); }
        var r = x - (x / y) * y;                 // not `%` (see binary_floor_divide)
        if (r != C(0) && ((r < C(0)) != (y < C(0)))) { r = r + y; }
        return r;
    }
    var r = fmod_f(f32(x), f32(y));
    if (r != 0.0 && ((r < 0.0) != (f32(y) < 0.0))) { r = r + f32(y); }
    return C(r);
}
// torch.fmod: the remainder with the dividend's sign (integers: by 0 gives 0, as remainder)
fn binary_fmod(x: C, y: C) -> C {
    if (IS_INT) {
        if (y == C(0)) { return C(0); }
        return x - (x / y) * y;
    }
    return C(fmod_f(f32(x), f32(y)));
}
fn binary_atan2(x: C, y: C) -> C { return C(atan2_s(f32(x), f32(y))); }
// xlogy(a, b) = a log(b), 0 where a == 0 unless b is NaN (torch.xlogy)
fn binary_xlogy(x: C, y: C) -> C {
    let a = f32(x);
    let b = f32(y);
    if (isnan_f(b)) { return y; }
    if (a == 0.0) { return C(0.0); }
    return C(a * log_f(b));
}
fn binary_bitwise_and(x: C, y: C) -> C { return bitcast<C>(bitcast<i32>(x) & bitcast<i32>(y)); }
fn binary_bitwise_or(x: C, y: C) -> C { return bitcast<C>(bitcast<i32>(x) | bitcast<i32>(y)); }
fn binary_bitwise_xor(x: C, y: C) -> C { return bitcast<C>(bitcast<i32>(x) ^ bitcast<i32>(y)); }
// the backend's own: the fused activation backward dy * act'(saved), saved = y or z (ACT table)
fn binary_act_d1(x: C, y: C) -> C { return act_d1_c(ACT, x, y); }

fn compare_eq(x: C, y: C) -> bool { return x == y; }
// NaN != anything is true: tested on the bits, as lavapipe compiles `!=` as an ordered compare
fn compare_ne(x: C, y: C) -> bool { return isnan_c(x) || isnan_c(y) || x != y; }
fn compare_lt(x: C, y: C) -> bool { return x < y; }
fn compare_le(x: C, y: C) -> bool { return x <= y; }
fn compare_gt(x: C, y: C) -> bool { return x > y; }
fn compare_ge(x: C, y: C) -> bool { return x >= y; }
