// act.wgsl — the math the activations are written in, shared by the forward, backward and
// GEMM-epilogue kernels. The per-activation functions and their dispatch (act_fwd, act_dz, act_d2,
// act_d1, act_ds) are generated from the ACT table (numr_web/ops/activations.py) by
// numr_web/backends/webgpu/codegen.py; `numr-web shaders --dump` prints them.
// Every function is overflow-safe for any finite f32 input: builtin exp is only called with an
// argument <= 0 (it never overflows) unless clamped, and builtin tanh is never used (it is
// indeterminate for |x| > ~88 on some GPUs).

const SQRT1_2: f32 = 0.7071067811865476;
const INV_SQRT_2PI: f32 = 0.3989422804014327;
const GELU_C: f32 = 0.7978845608028654;     // sqrt(2/pi)
const GELU_A: f32 = 0.044715;

// exp(x) = q 2^k: k = round(x / ln 2), r = x - k ln 2 (Cody-Waite: LN2_HI has 16 significant bits,
// so k LN2_HI is exact for |k| < 2^8), q = 1 + r + r^2/2! + ... + r^8/8! for |r| <= 0.35 (truncation
// < 2^-30). Builtin exp (exp2(x log2 e) on many GPUs) loses up to |x| ulp; this stays within ~1.
// Returns (q, k) so callers can multiply into q before the scaling (results near the bottom of the
// normal range keep their precision even where exp(x) alone would be subnormal).
fn exp_parts(x: f32) -> vec2<f32> {
    let k = round(x * 1.4426950408889634);
    let r = (x - k * 0.693145751953125) - k * 1.4286068203094172e-06;
    let p = r * (0.5 + r * (0.16666666666666666 + r * (0.041666666666666664 + r * (
            0.008333333333333333 + r * (0.001388888888888889 + r * (0.0001984126984126984 + r
            * 2.48015873015873e-05))))));
    return vec2<f32>(1.0 + (r + r * p), k);
}

// q 2^k for k in [-300, 300], through two exact power-of-two factors (no overflow in between).
fn scale2(q: f32, k: f32) -> f32 {
    let k1 = clamp(k, -126.0, 127.0);
    let k2 = clamp(k - k1, -126.0, 127.0);
    return q * bitcast<f32>(u32(i32(k1) + 127) << 23u) * bitcast<f32>(u32(i32(k2) + 127) << 23u);
}

// exp within ~1 ulp; inf above the float32 range, 0 far below it; NaN stays NaN.
fn exp_s(x: f32) -> f32 {
    if (x > 88.72283905206835) { return inf_f32(); }
    if (x < -104.0) { return 0.0; }
    let e = exp_parts(x);
    return scale2(e.x, e.y);
}

// z exp(x) computed as (z q) 2^k: a normal result keeps its precision where exp(x) is subnormal.
fn mul_exp(z: f32, x: f32) -> f32 {
    if (x < -200.0) { return 0.0 * z; }
    let e = exp_parts(x);
    return scale2(z * e.x, e.y);
}

// (sigmoid(x), 1 - sigmoid(x)), both without cancellation, from e = exp(-|x|) <= 1.
fn sig_pair(x: f32) -> vec2<f32> {
    let e = exp_s(-abs(x));
    let p = 1.0 / (1.0 + e);
    let q = e * p;
    if (x >= 0.0) { return vec2<f32>(p, q); }
    return vec2<f32>(q, p);
}

fn sigmoid_s(x: f32) -> f32 { return sig_pair(x).x; }

// sigmoid'(x) = s (1 - s) = e / (1 + e)^2, e = exp(-|x|): accurate where s rounds to 1.
fn sigmoid_d_s(x: f32) -> f32 {
    let e = exp_s(-abs(x));
    let d = 1.0 + e;
    return e / (d * d);
}

// tanh: a least-squares odd polynomial for |x| < 0.625 (rel. error < 5e-9, no cancellation),
// (1 - e) / (1 + e) with e = exp(-2|x|) elsewhere.
fn tanh_s(x: f32) -> f32 {
    let ax = abs(x);
    if (ax < 0.625) {
        if (x == 0.0) { return x; }            // tanh(-0) = -0 (x + x s q gives +0)
        let s = x * x;
        var q = -0.00569737097248435;
        q = q * s + 0.020630160346627235;
        q = q * s - 0.05373581498861313;
        q = q * s + 0.1333136409521103;
        q = q * s - 0.33333274722099304;
        return x + x * s * q;
    }
    let e = exp_s(-2.0 * ax);
    let r = (1.0 - e) / (1.0 + e);
    return select(r, -r, x < 0.0);
}

// tanhshrink(x) = x - tanh(x) without its cancellation near 0: x^3 times the Taylor series of
// (x - tanh x) / x^3 (18 terms: relative error < 3e-9) for |x| < 0.9; (|x| - 1) + 2e / (1 + e),
// e = exp(-2|x|), above (both terms >= 0 from |x| = 1 on; below, at most a 2x cancellation).
fn tanhshrink_s(x: f32) -> f32 {
    let ax = abs(x);
    if (ax < 0.9) {
        let s = x * x;
        var q = -7.0546369464009683e-8;
        q = q * s + 1.7406618963571648e-7;
        q = q * s - 4.2949110782738059e-7;
        q = q * s + 1.0597268320104654e-6;
        q = q * s - 2.6147711512907546e-6;
        q = q * s + 6.4516892156554308e-6;
        q = q * s - 1.5918905069328965e-5;
        q = q * s + 3.9278323883316834e-5;
        q = q * s - 9.6915379569294503e-5;
        q = q * s + 0.00023912911424355248;
        q = q * s - 0.00059002744094558598;
        q = q * s + 0.0014558343870513183;
        q = q * s - 0.003592128036572481;
        q = q * s + 0.0088632355299021966;
        q = q * s - 0.021869488536155203;
        q = q * s + 0.053968253968253968;
        q = q * s - 0.13333333333333333;
        q = q * s + 0.33333333333333333;
        return x * s * q;
    }
    let e = exp_s(-2.0 * ax);
    let r = (ax - 1.0) + 2.0 * e / (1.0 + e);
    return select(r, -r, x < 0.0);
}

// tanh'(x) = 1 - tanh(x)^2 = 4 e / (1 + e)^2, e = exp(-2|x|): accurate for large |x|.
fn sech2_s(x: f32) -> f32 {
    let e = exp_s(-2.0 * abs(x));
    let d = 1.0 + e;
    return 4.0 * e / (d * d);
}

// erfc(t) for t >= 0.921875 as w exp(-t^2 + P(w)), w = 1 / (1 + t/2); P is a degree-8 least-squares
// fit of log(erfc(t) e^(t^2) / w) on [0.921875, 10] (abs. error 6e-9). exp(-t^2) is split as
// exp(-th^2) exp(-(t - th)(t + th)) with th = t rounded to 12 bits, so that th^2 is exact.
fn erfc_poly(w: f32) -> f32 {
    var p = -0.23392149806022644;
    p = p * w + 0.6255157589912415;
    p = p * w - 0.4271628260612488;
    p = p * w - 0.08103004097938538;
    p = p * w - 0.06698717176914215;
    p = p * w + 0.07030355930328369;
    p = p * w + 0.37799882888793945;
    p = p * w + 0.9996729493141174;
    return p * w - 1.2654980421066284;
}

fn erfc_big(t: f32) -> f32 {
    let w = 1.0 / (1.0 + 0.5 * t);
    let p = erfc_poly(w);
    let th = bitcast<f32>(bitcast<u32>(t) & 0xfffff000u);
    return w * exp_s(-th * th) * exp_s(p - (t - th) * (t + th));
}

// erf(x) within 2 ulp of the f32-rounded truth (tests/test_activations.py compares with math.erf):
//   |x| < 0.921875: x + x Q(x^2), Q a degree-6 least-squares fit of erf(x)/x - 1 (rel. error
//                   5e-10; max 0.9 ulp in f32 with the fma);
//   otherwise 1 - erfc(|x|) with the sign of x (1 exactly beyond |x| ~ 3.9).
fn erf_s(x: f32) -> f32 {
    if (isnan_f(x)) { return x; }                     // (min(NaN, 10) below may give 10)
    let ax = abs(x);
    if (ax < 0.921875) {
        let s = x * x;
        var p = 8.410933514824137e-05;
        p = p * s - 0.0008153758244588971;
        p = p * s + 0.005202173721045256;
        p = p * s - 0.026859955862164497;
        p = p * s + 0.11283708363771439;
        p = p * s - 0.37612634897232056;
        p = p * s + 0.128379166900057;                   // (2/sqrt(pi) - 1): x + x q keeps x exact
        return fma(x, p, x);
    }
    let r = 1.0 - erfc_big(min(ax, 10.0));
    return select(r, -r, x < 0.0);
}

// erfc(-z / sqrt 2) / 2 = Phi(z) for z <= -1.3 (t = -z / sqrt 2 >= 0.921875), as (c, x) with
// Phi(z) = c exp(x): exp(-t^2) = exp(-z^2 / 2) with z = zh + zl, zh of 12 bits so that zh^2 / 2 is
// exact (rounding t first would cost 2 t^2 half-ulps).
fn phi_lower_parts(z: f32) -> vec2<f32> {
    let t = -z * SQRT1_2;
    let w = 1.0 / (1.0 + 0.5 * t);
    let zh = bitcast<f32>(bitcast<u32>(z) & 0xfffff000u);
    let zl = z - zh;
    return vec2<f32>(0.5 * w * exp_s(erfc_poly(w) - (zh * zl + 0.5 * zl * zl)), -0.5 * zh * zh);
}

// gelu(z) = z Phi(z). Both tails share one code path (a warp whose lanes fall in both tails runs
// it once): s = z Phi(-|z|) is formed as (z c) 2^k, so that a normal result keeps its precision
// where Phi(z) alone is subnormal, and gelu(z) = z - s above zero.
fn gelu_s(z: f32) -> f32 {
    let t = abs(z) * SQRT1_2;
    if (t < 0.921875) { return z * (0.5 + 0.5 * erf_s(z * SQRT1_2)); }
    if (!(t < 10.0)) { return z * select(1.0, 0.0, z < 0.0); }     // erfc(10) / 2 < 2^-149; NaN
    let p = phi_lower_parts(-abs(z));
    let s = mul_exp(z * p.x, p.y);
    return select(z - s, s, z < 0.0);
}

// silu(z) = z sigmoid(z) = z e / (1 + e), e = exp(z): below -80, 1 + e rounds to 1 and z e is
// formed as (z q) 2^k (a normal result where sigmoid(z) is subnormal).
fn silu_s(z: f32) -> f32 {
    // -inf * 0 = NaN, as torch; -abs: an underflow is -0 (z < 0), as torch (mul_exp lost the sign)
    if (z < -80.0) { return select(-abs(mul_exp(z, z)), nan_f32(), isinf_f(z)); }
    return z * sigmoid_s(z);
}

// gelu_tanh(z) = z sigmoid(2u), the same way in the lower tail.
fn gelu_tanh_s(z: f32) -> f32 {
    let v = 2.0 * GELU_C * (z + GELU_A * z * z * z);
    if (v < -80.0) { return select(-abs(mul_exp(z, v)), nan_f32(), isinf_f(z)); }   // as silu_s
    return z * sigmoid_s(v);
}

fn phi_pdf(z: f32) -> f32 { return INV_SQRT_2PI * exp_s(-0.5 * z * z); }

// gelu'(z) = Phi(z) + z phi(z), sharing one exp(-z^2/2) between phi and the erfc tail of Phi
// (the backward pass is the hot path; relative error of the tail ~1e-6 instead of ~1 ulp).
fn gelu_dz(z: f32) -> f32 {
    let e = exp_s(-0.5 * z * z);
    let t = abs(z) * SQRT1_2;
    var cdf: f32;
    if (t < 0.921875) {
        cdf = 0.5 + 0.5 * erf_s(z * SQRT1_2);
    } else {
        let w = 1.0 / (1.0 + 0.5 * t);
        let c = 0.5 * w * e * exp_s(erfc_poly(w));                                // erfc(t) / 2
        cdf = select(1.0 - c, c, z < 0.0);
    }
    return cdf + INV_SQRT_2PI * z * e;
}

// gelu_tanh helpers: u = c (z + a z^3), u' = c (1 + 3 a z^2), u'' = 6 c a z.
fn gelu_tanh_u(z: f32) -> f32 { return GELU_C * (z + GELU_A * z * z * z); }
fn gelu_tanh_du(z: f32) -> f32 { return GELU_C * (1.0 + 3.0 * GELU_A * z * z); }

// log(x) for normal x > 0, within 1 ulp (musl's logf): x = 2^k (1 + f), f in [sqrt(2)/2 - 1,
// sqrt(2) - 1], log(1 + f) = f - f^2/2 + s (f^2/2 + R(s^2)), s = f / (2 + f). The builtin may be far
// less accurate (WGSL allows an absolute error of 2^-21 on [0.5, 2]: 16 ulp at log(1.5)).
// +inf and NaN return themselves; 0, negatives and subnormals are the caller's.
fn log_s(x: f32) -> f32 {
    if ((bitcast<u32>(x) & 0x7fffffffu) >= 0x7f800000u) { return x; }
    var ix = bitcast<u32>(x) + (0x3f800000u - 0x3f3504f3u);
    let k = f32(i32(ix >> 23u) - 0x7f);
    ix = (ix & 0x007fffffu) + 0x3f3504f3u;
    let f = bitcast<f32>(ix) - 1.0;
    let s = f / (2.0 + f);                       // its rounding is scaled down by f^2 below
    let z = s * s;
    let w = z * z;
    let r = z * (0.66666662693 + w * 0.28498786688) + w * (0.40000972152 + w * 0.24279078841);
    let hfsq = 0.5 * f * f;
    return s * (hfsq + r) + k * 9.0580006145e-06 - hfsq + f + k * 6.9313812256e-01;
}

// log(1 + x) for x > -1: near 0 as 2 atanh(s), s = x / (2 + x) (no cancellation; a series in s^2
// good to f32 rounding for |s| <= 0.172); elsewhere log(1 + x), whose rounding is harmless there.
// (No (1 + x) - 1 trick: compilers may fold it to x.)
fn log1p_s(x: f32) -> f32 {
    if (abs(x) < 0.4142) {
        let s = x / (2.0 + x);
        let s2 = s * s;
        let p = 1.0 + s2 * (0.3333333333 + s2 * (0.2 + s2 * (0.1428571429 + s2 * (0.1111111111
                + s2 * 0.0909090909))));
        return 2.0 * s * p;
    }
    return log_s(1.0 + x);
}

// exp(x) - 1: a Taylor polynomial for |x| < 0.35 (no cancellation); elsewhere from exp_parts,
// q 2^k - 1 = (q - 1) 2^k + (2^k - 1) with both terms exact or nearly so; -1 below -88 and inf above
// the float32 range.
fn expm1_s(x: f32) -> f32 {
    if (abs(x) < 0.35) {
        return x * (1.0 + x * (0.5 + x * (0.1666666667 + x * (0.0416666667 + x * (0.0083333333
               + x * (0.0013888889 + x * (0.0001984127 + x * 0.0000248016)))))));
    }
    if (x < -88.0) { return -1.0; }
    if (x > 88.72283905206835) { return inf_f32(); }
    let e = exp_parts(x);
    let k = e.y;
    let r = (x - k * 0.693145751953125) - k * 1.4286068203094172e-06;
    let qm1 = r * (1.0 + r * (0.5 + r * (0.16666666666666666 + r * (0.041666666666666664 + r * (
              0.008333333333333333 + r * (0.001388888888888889 + r * (0.0001984126984126984 + r
              * 2.48015873015873e-05)))))));
    let two_k = scale2(1.0, k);
    return qm1 * two_k + (two_k - 1.0);
}

// softplus(z) = log(1 + exp(z)) with torch's threshold 20 (z beyond it: softplus(z) = z).
fn softplus_s(z: f32) -> f32 {
    if (z > 20.0) { return z; }
    return log1p_s(exp_s(z));
}
