// act.wgsl — THE activation library, shared by the forward, backward and GEMM-epilogue kernels.
//
// Activation codes match numr_web.ops.activations.ACT[...].code:
//   0 none   1 relu   2 sigmoid   3 tanh   4 silu   5 gelu (exact, erf)   6 gelu_tanh
// Every function is overflow-safe for any finite f32 input: builtin exp is only called with an
// argument <= 0 (it never overflows) and builtin tanh is never used (it is indeterminate for
// |x| > ~88 on some GPUs). Callers pass an `override` constant as `code`, so the driver folds the
// switch away. Conventions are PyTorch's: relu'(0) = 0.

const SQRT1_2: f32 = 0.7071067811865476;
const INV_SQRT_2PI: f32 = 0.3989422804014327;
const GELU_C: f32 = 0.7978845608028654;     // sqrt(2/pi)
const GELU_A: f32 = 0.044715;

// (sigmoid(x), 1 - sigmoid(x)), both without cancellation, from e = exp(-|x|) <= 1.
fn sig_pair(x: f32) -> vec2<f32> {
    let e = exp(-abs(x));
    let p = 1.0 / (1.0 + e);
    let q = e * p;
    if (x >= 0.0) { return vec2<f32>(p, q); }
    return vec2<f32>(q, p);
}

fn sigmoid_s(x: f32) -> f32 { return sig_pair(x).x; }

// sigmoid'(x) = s (1 - s) = e / (1 + e)^2, e = exp(-|x|): accurate where s rounds to 1.
fn sigmoid_d_s(x: f32) -> f32 {
    let e = exp(-abs(x));
    let d = 1.0 + e;
    return e / (d * d);
}

// tanh: a least-squares odd polynomial for |x| < 0.625 (rel. error < 5e-9, no cancellation),
// (1 - e) / (1 + e) with e = exp(-2|x|) elsewhere.
fn tanh_s(x: f32) -> f32 {
    let ax = abs(x);
    if (ax < 0.625) {
        let s = x * x;
        var q = -0.00569737097248435;
        q = q * s + 0.020630160346627235;
        q = q * s - 0.05373581498861313;
        q = q * s + 0.1333136409521103;
        q = q * s - 0.33333274722099304;
        return x + x * s * q;
    }
    let e = exp(-2.0 * ax);
    let r = (1.0 - e) / (1.0 + e);
    return select(r, -r, x < 0.0);
}

// tanh'(x) = 1 - tanh(x)^2 = 4 e / (1 + e)^2, e = exp(-2|x|): accurate for large |x|.
fn sech2_s(x: f32) -> f32 {
    let e = exp(-2.0 * abs(x));
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
    return w * exp(-th * th) * exp(p - (t - th) * (t + th));
}

// erf(x), accurate to f32 rounding (tests compare with math.erf):
//   |x| < 0.921875: x + x Q(x^2), Q a degree-6 least-squares fit of erf(x)/x - 1 (rel. error
//                   5e-10; max 0.9 ulp in f32 with the fma);
//   otherwise 1 - erfc(|x|) with the sign of x (1 exactly beyond |x| ~ 3.9).
fn erf_s(x: f32) -> f32 {
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

// Phi(z) = P(N(0,1) <= z) = erfc(-z / sqrt 2) / 2, without cancellation in the lower tail.
fn phi_cdf(z: f32) -> f32 {
    let t = abs(z) * SQRT1_2;
    if (t < 0.921875) { return 0.5 + 0.5 * erf_s(z * SQRT1_2); }
    let c = 0.5 * erfc_big(min(t, 10.0));
    return select(1.0 - c, c, z < 0.0);
}

fn phi_pdf(z: f32) -> f32 { return INV_SQRT_2PI * exp(-0.5 * z * z); }

// gelu'(z) = Phi(z) + z phi(z), sharing one exp(-z^2/2) between phi and the erfc tail of Phi
// (the backward pass is the hot path; relative error of the tail ~1e-6 instead of ~1 ulp).
fn gelu_dz(z: f32) -> f32 {
    let e = exp(-0.5 * z * z);
    let t = abs(z) * SQRT1_2;
    var cdf: f32;
    if (t < 0.921875) {
        cdf = 0.5 + 0.5 * erf_s(z * SQRT1_2);
    } else {
        let w = 1.0 / (1.0 + 0.5 * t);
        let c = 0.5 * w * e * exp(erfc_poly(w));                                // erfc(t) / 2
        cdf = select(1.0 - c, c, z < 0.0);
    }
    return cdf + INV_SQRT_2PI * z * e;
}

// gelu_tanh helpers: u = c (z + a z^3), u' = c (1 + 3 a z^2), u'' = 6 c a z.
fn gelu_tanh_u(z: f32) -> f32 { return GELU_C * (z + GELU_A * z * z * z); }
fn gelu_tanh_du(z: f32) -> f32 { return GELU_C * (1.0 + 3.0 * GELU_A * z * z); }

// act(z)
fn act_fwd(code: u32, z: f32) -> f32 {
    switch code {
        case 1u: { return select(z, 0.0, z < 0.0); }                 // relu (NaN propagates)
        case 2u: { return sigmoid_s(z); }
        case 3u: { return tanh_s(z); }
        case 4u: { return z * sigmoid_s(z); }                        // silu
        case 5u: { return z * phi_cdf(z); }                          // gelu = z Phi(z)
        case 6u: { return z * sigmoid_s(2.0 * gelu_tanh_u(z)); }     // 0.5 z (1 + tanh u) = z sigmoid(2u)
        default: { return z; }
    }
}

// act'(z) from the pre-activation z
fn act_dz(code: u32, z: f32) -> f32 {
    switch code {
        case 1u: { return select(0.0, 1.0, z > 0.0); }               // relu'(0) = 0
        case 2u: { return sigmoid_d_s(z); }
        case 3u: { return sech2_s(z); }
        case 4u: {                                                   // s (1 + z (1 - s))
            let sp = sig_pair(z);
            return sp.x * (1.0 + z * sp.y);
        }
        case 5u: { return gelu_dz(z); }
        case 6u: {                                                   // 0.5 (1 + t) + 0.5 z (1 - t^2) u'
            let u = gelu_tanh_u(z);
            let first = sigmoid_s(2.0 * u);                          // 0.5 (1 + t)
            var second = 0.5 * z * sech2_s(u) * gelu_tanh_du(z);
            if (abs(u) > 40.0) { second = 0.0; }                     // sech^2 underflowed: avoid 0 * inf
            return first + second;
        }
        default: { return 1.0; }
    }
}

// act''(z)
fn act_d2(code: u32, z: f32) -> f32 {
    switch code {
        case 2u: {                                                   // s (1 - s) (1 - 2 s)
            let sp = sig_pair(z);
            return sigmoid_d_s(z) * (sp.y - sp.x);
        }
        case 3u: { return -2.0 * tanh_s(z) * sech2_s(z); }           // -2 t (1 - t^2)
        case 4u: {                                                   // s (1 - s) (2 + z (1 - 2 s))
            let sp = sig_pair(z);
            return sigmoid_d_s(z) * (2.0 + z * (sp.y - sp.x));
        }
        case 5u: { return phi_pdf(z) * (2.0 - z * z); }
        case 6u: {                                                   // (1 - t^2) [u' + 0.5 z (u'' - 2 t u'^2)]
            let u = gelu_tanh_u(z);
            if (abs(u) > 40.0) { return 0.0; }
            let t = tanh_s(u);
            let du = gelu_tanh_du(z);
            let ddu = 6.0 * GELU_C * GELU_A * z;
            return sech2_s(u) * (du + 0.5 * z * (ddu - 2.0 * t * du * du));
        }
        default: { return 0.0; }                                     // none, relu
    }
}

// dz = dy * act'(.) from the tensor saved by the forward: y for codes 0-3, z for 4-6
// (ACT[...].grad_from).
fn act_d1(code: u32, dy: f32, s: f32) -> f32 {
    switch code {
        case 0u: { return dy; }
        case 1u: { return select(0.0, dy, s > 0.0); }
        case 2u: { return dy * (s * (1.0 - s)); }
        case 3u: { return dy * (1.0 - s * s); }
        default: { return dy * act_dz(code, s); }
    }
}
