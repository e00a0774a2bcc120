// reduce.wgsl — reductions over any set of axes (sum mean max min, argmax) and softmax /
// log_softmax along one axis, for strided inputs.
//
// The input is seen as (kept dims) x (reduced dims), both coalesced to at most 8 dims each.
// Metadata words, bindings and overrides: contract.REDUCE (the generated header). W_N reductions
// of W_R elements each; the kept dims are W_KEPT_SHAPE (W_NK dims), the reduced ones W_RED_SHAPE
// (W_NR dims), with input and output strides for each. Reductions write a dense output of the
// kept shape at W_OFFSET_OUT; softmax writes a full tensor (W_RED_STRIDES_OUT).
// Schedules: *_thread (one invocation per output: many small reductions, optionally split into
// W_CHUNKS chunks + a second pass) and *_wg (one workgroup per output, tree reduction in
// workgroup memory: few long reductions). The launcher (launch_reduce.py) picks one.

// offsets (input, output) of the start of reduction number o
fn kept_off(o: u32) -> vec2<u32> {
    var rem = o;
    var r = vec2<u32>(mu(W_OFFSET_IN), mu(W_OFFSET_OUT));
    for (var d = mu(W_NK); d > 0u; d = d - 1u) {
        let k = d - 1u;
        let s = mu(W_KEPT_SHAPE + k);
        let c = rem % s;
        rem = rem / s;
        r = r + c * vec2<u32>(mu(W_KEPT_STRIDES_IN + k), mu(W_KEPT_STRIDES_OUT + k));
    }
    return r;
}

// offsets (input, output) of element j of a reduction, relative to its start
fn red_off(j: u32) -> vec2<u32> {
    let nr = mu(W_NR);
    if (nr == 1u) { return j * vec2<u32>(mu(W_RED_STRIDES_IN), mu(W_RED_STRIDES_OUT)); }
    var rem = j;
    var r = vec2<u32>(0u, 0u);
    for (var d = nr; d > 0u; d = d - 1u) {
        let k = d - 1u;
        let s = mu(W_RED_SHAPE + k);
        let c = rem % s;
        rem = rem / s;
        r = r + c * vec2<u32>(mu(W_RED_STRIDES_IN + k), mu(W_RED_STRIDES_OUT + k));
    }
    return r;
}

// seed + the elements first, first + step, ... < end of the reduction at base, summed in blocks
// of BLOCK elements, BLOCK blocks to a group, groups to the total: the rounding error grows with
// 2 BLOCK + n / BLOCK^2 additions rather than n (float32 sums of 10^6 elements were off by 1e-4).
// Up to BLOCK elements it is the plain running sum. (Kahan compensation is no alternative: Mesa
// reassociates it away.) One loop iteration per element, as the plain sum. (BLOCK: the header.)

fn blocked_sum(base: u32, first: u32, end: u32, step: u32, seed: C) -> C {
    var part = seed;
    var k = 0u;
    var group = C(0);
    var g = 0u;
    var total = C(0);
    var flushed = false;
    for (var j = first; j < end; j = j + step) {
        if (k == BLOCK) {
            group = group + part;
            part = C(0);
            k = 0u;
            g = g + 1u;
            flushed = true;
            if (g == BLOCK) {
                total = total + group;
                group = C(0);
                g = 0u;
            }
        }
        part = part + C(a[base + red_off(j).x]);
        k = k + 1u;
    }
    if (!flushed) { return part; }
    return (total + group) + part;
}

// The same sum of a short run (at most BLOCK elements, no blocking needed) in four interleaved
// partial sums: four independent loads in flight per invocation, where one running sum would wait
// for each load in turn (a two-pass column sum's first pass is bound by that wait on a GPU).
fn short_sum(base: u32, first: u32, end: u32, seed: C) -> C {
    var s0 = seed;
    var s1 = C(0);
    var s2 = C(0);
    var s3 = C(0);
    var j = first;
    for (; j + 3u < end; j = j + 4u) {
        s0 = s0 + C(a[base + red_off(j).x]);
        s1 = s1 + C(a[base + red_off(j + 1u).x]);
        s2 = s2 + C(a[base + red_off(j + 2u).x]);
        s3 = s3 + C(a[base + red_off(j + 3u).x]);
    }
    for (; j < end; j = j + 1u) {
        s0 = s0 + C(a[base + red_off(j).x]);
    }
    return (s0 + s1) + (s2 + s3);
}

// sum and mean accumulate; prod multiplies; max and min combine with max_c / min_c
fn summing() -> bool { return OP == REDUCE_SUM || OP == REDUCE_MEAN; }

fn combine(x: C, y: C) -> C {
    switch OP {
        case REDUCE_MAX: { return max_c(x, y); }
        case REDUCE_MIN: { return min_c(x, y); }
        case REDUCE_PROD: { return x * y; }
        default: { return x + y; }
    }
}

// the identity that lanes other than the first start from in reduce_wg (sums: 0, prod: 1)
fn identity() -> C {
    if (OP == REDUCE_PROD) { return C(1); }
    return C(0);
}

fn finish(v: C) -> S {
    if (OP == REDUCE_MEAN) {                   // mean: divide by W_COUNT (the full count)
        if (IS_INT) { return store_c(C(f32(v) / f32(mu(W_COUNT)))); }
        return store_c(v / C(mu(W_COUNT)));
    }
    return store_c(v);
}

// One invocation per (output, chunk of the reduction): W_CHUNK elements per chunk, W_CHUNKS chunks.
// With several chunks the output holds chunk-major partial results (chunks x outputs) that a
// second pass reduces; consecutive invocations take consecutive outputs, so when the kept axis is
// the dense one (a bias gradient: column sums of a row-major matrix) every load is coalesced.
@compute @workgroup_size(WG)
fn reduce_thread(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
                 @builtin(local_invocation_index) lid: u32) {
    let n = mu(W_N);
    let R = mu(W_R);
    let RC = mu(W_CHUNK);
    let total = n * mu(W_CHUNKS);
    for (var t = linear_id(wid, nwg, lid); t < total; t = t + grid_stride(nwg)) {
        let o = t % n;
        let c = t / n;
        let j0 = c * RC;
        let j1 = min(R, j0 + RC);
        let base = kept_off(o).x;
        var acc = C(a[base + red_off(j0).x]);
        if (summing() && j1 - j0 <= BLOCK) {
            acc = short_sum(base, j0 + 1u, j1, acc);
        } else if (summing()) {
            acc = blocked_sum(base, j0 + 1u, j1, 1u, acc);
        } else {
            for (var j = j0 + 1u; j < j1; j = j + 1u) {
                acc = combine(acc, C(a[base + red_off(j).x]));
            }
        }
        out[mu(W_OFFSET_OUT) + c * n + o] = finish(acc);
    }
}

// Pass 1 of a column sum (a bias gradient: the rows of a row-major matrix summed; float32, the
// launcher's `columns_v4`), four columns an invocation read as one vec4 a row: invocation t sums
// rows [c W_CHUNK, ..) (at most BLOCK) of columns 4 (t % (W_N / 4)) .. + 3, chunk c = t / (W_N /
// 4), adding in reduce_thread's order (short_sum). A scalar invocation's loads of 4 bytes each kept
// too few bytes in flight (1 TB/s of the H100's 3.35).
@compute @workgroup_size(WG)
fn colsum_v4(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
             @builtin(local_invocation_index) lid: u32) {
    let n4 = mu(W_N) / 4u;
    let R = mu(W_R);
    let RC = mu(W_CHUNK);
    let rs = mu(W_RED_STRIDES_IN) / 4u;        // the row stride in vec4s
    for (var t = linear_id(wid, nwg, lid); t < n4 * mu(W_CHUNKS); t = t + grid_stride(nwg)) {
        let o4 = t % n4;
        let c = t / n4;
        let j1 = min(R, c * RC + RC);
        let base = mu(W_OFFSET_IN) / 4u + o4;
        var s0 = vec4<C>(a4[base + c * RC * rs]);
        var s1 = vec4<C>(0);
        var s2 = vec4<C>(0);
        var s3 = vec4<C>(0);
        var j = c * RC + 1u;
        for (; j + 3u < j1; j = j + 4u) {
            s0 = s0 + vec4<C>(a4[base + j * rs]);
            s1 = s1 + vec4<C>(a4[base + (j + 1u) * rs]);
            s2 = s2 + vec4<C>(a4[base + (j + 2u) * rs]);
            s3 = s3 + vec4<C>(a4[base + (j + 3u) * rs]);
        }
        for (; j < j1; j = j + 1u) { s0 = s0 + vec4<C>(a4[base + j * rs]); }
        let x = (s0 + s1) + (s2 + s3);
        let ob = mu(W_OFFSET_OUT) + c * mu(W_N) + 4u * o4;
        out[ob] = store_c(x.x);
        out[ob + 1u] = store_c(x.y);
        out[ob + 2u] = store_c(x.z);
        out[ob + 3u] = store_c(x.w);
    }
}

var<workgroup> sh: array<C, WG>;

@compute @workgroup_size(WG)
fn reduce_wg(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
             @builtin(local_invocation_index) lid: u32) {
    let n = mu(W_N);
    let R = mu(W_R);
    for (var o = wid.y * nwg.x + wid.x; o < n; o = o + nwg.x * nwg.y) {
        let base = kept_off(o).x;
        // element 0 seeds lane 0 (and every lane of max / min, where repeating it is harmless)
        let idem = OP == REDUCE_MAX || OP == REDUCE_MIN;
        var acc = C(a[base]);
        if (!idem && lid != 0u) { acc = identity(); }
        if (summing()) {                       // each lane adds R / WG elements
            acc = blocked_sum(base, select(lid, WG, lid == 0u), R, WG, acc);
        } else {
            for (var j = lid; j < R; j = j + WG) {
                if (j != 0u || idem) { acc = combine(acc, C(a[base + red_off(j).x])); }
            }
        }
        sh[lid] = acc;
        workgroupBarrier();
        for (var s = WG / 2u; s > 0u; s = s >> 1u) {
            if (lid < s) { sh[lid] = combine(sh[lid], sh[lid + s]); }
            workgroupBarrier();
        }
        if (lid == 0u) { out[mu(W_OFFSET_OUT) + o] = finish(sh[0]); }
        workgroupBarrier();
    }
}

// argmax: first index of the maximum (a NaN counts as the maximum, as in numpy).
fn better(v: C, j: u32, bv: C, bj: u32) -> bool {
    if (isnan_c(bv)) { return isnan_c(v) && j < bj; }
    if (isnan_c(v)) { return true; }
    return v > bv || (v == bv && j < bj);
}

@compute @workgroup_size(WG)
fn argmax_thread(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
                 @builtin(local_invocation_index) lid: u32) {
    let n = mu(W_N);
    let R = mu(W_R);
    for (var o = linear_id(wid, nwg, lid); o < n; o = o + grid_stride(nwg)) {
        let base = kept_off(o).x;
        var bv = C(a[base]);
        var bj = 0u;
        for (var j = 1u; j < R; j = j + 1u) {
            let v = C(a[base + red_off(j).x]);
            if (better(v, j, bv, bj)) { bv = v; bj = j; }
        }
        outi[mu(W_OFFSET_OUT) + o] = i32(bj);
    }
}

var<workgroup> shv: array<C, WG>;
var<workgroup> shj: array<u32, WG>;

@compute @workgroup_size(WG)
fn argmax_wg(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
             @builtin(local_invocation_index) lid: u32) {
    let n = mu(W_N);
    let R = mu(W_R);
    for (var o = wid.y * nwg.x + wid.x; o < n; o = o + nwg.x * nwg.y) {
        let base = kept_off(o).x;
        var bv = C(a[base]);
        var bj = 0u;
        for (var j = lid; j < R; j = j + WG) {
            let v = C(a[base + red_off(j).x]);
            if (better(v, j, bv, bj)) { bv = v; bj = j; }
        }
        shv[lid] = bv;
        shj[lid] = bj;
        workgroupBarrier();
        for (var s = WG / 2u; s > 0u; s = s >> 1u) {
            if (lid < s && better(shv[lid + s], shj[lid + s], shv[lid], shj[lid])) {
                shv[lid] = shv[lid + s];
                shj[lid] = shj[lid + s];
            }
            workgroupBarrier();
        }
        if (lid == 0u) { outi[mu(W_OFFSET_OUT) + o] = i32(shj[0]); }
        workgroupBarrier();
    }
}

// softmax / log_softmax, numerically stable: m = max, s = sum exp(x - m) (exp of values <= 0).
fn sm_write(ob: u32, j: u32, x: f32, m: f32, s: f32) {
    let o = ob + red_off(j).y;
    if (OP == SOFTMAX_LOG) { out[o] = store_c(C((x - m) - log(s))); }
    else { out[o] = store_c(C(exp(x - m) / s)); }
}

@compute @workgroup_size(WG)
fn softmax_thread(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
                  @builtin(local_invocation_index) lid: u32) {
    let n = mu(W_N);
    let R = mu(W_R);
    for (var o = linear_id(wid, nwg, lid); o < n; o = o + grid_stride(nwg)) {
        let b = kept_off(o);
        var m = f32(C(a[b.x]));
        for (var j = 1u; j < R; j = j + 1u) { m = max_f(m, f32(C(a[b.x + red_off(j).x]))); }
        var s = 0.0;
        for (var j = 0u; j < R; j = j + 1u) { s = s + exp(f32(C(a[b.x + red_off(j).x])) - m); }
        for (var j = 0u; j < R; j = j + 1u) { sm_write(b.y, j, f32(C(a[b.x + red_off(j).x])), m, s); }
    }
}

fn max_f(x: f32, y: f32) -> f32 {
    if (x > y || isnan_f(x)) { return x; }
    return y;
}

var<workgroup> shf: array<f32, WG>;

@compute @workgroup_size(WG)
fn softmax_wg(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
              @builtin(local_invocation_index) lid: u32) {
    let n = mu(W_N);
    let R = mu(W_R);
    for (var o = wid.y * nwg.x + wid.x; o < n; o = o + nwg.x * nwg.y) {
        let b = kept_off(o);
        var m = f32(C(a[b.x]));
        for (var j = lid; j < R; j = j + WG) { m = max_f(m, f32(C(a[b.x + red_off(j).x]))); }
        shf[lid] = m;
        workgroupBarrier();
        for (var s = WG / 2u; s > 0u; s = s >> 1u) {
            if (lid < s) { shf[lid] = max_f(shf[lid], shf[lid + s]); }
            workgroupBarrier();
        }
        m = shf[0];
        workgroupBarrier();
        var t = 0.0;
        for (var j = lid; j < R; j = j + WG) { t = t + exp(f32(C(a[b.x + red_off(j).x])) - m); }
        shf[lid] = t;
        workgroupBarrier();
        for (var s = WG / 2u; s > 0u; s = s >> 1u) {
            if (lid < s) { shf[lid] = shf[lid] + shf[lid + s]; }
            workgroupBarrier();
        }
        let total = shf[0];
        for (var j = lid; j < R; j = j + WG) { sm_write(b.y, j, f32(C(a[b.x + red_off(j).x])), m, total); }
        workgroupBarrier();
    }
}
