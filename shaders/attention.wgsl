// attention.wgsl — fused softmax attention, FlashAttention-2 style: out = softmax(q k^T * SCALE +
// mask) v with an online softmax (a running max and sum per query row) over tiles of keys held in
// workgroup memory; the forward keeps the log-sum-exp of each row for the backward, which
// recomputes the probabilities from it. Nothing of size TQ x TK is stored anywhere.
//
// Metadata words, bindings, overrides: contract.ATTENTION (the generated header). q, k, v, dout
// and out_in are B matrices (T, d) of contiguous rows, each role placed by four words (`mat_at`, `rows_at`):
// a head of a fused qkv projection is read where it lies, and out, dq, dk, dv are written where
// the heads' merge (B, H, T, d) -> (B, T, H d) is a view. Operands are read as vec4s (VEC: d and
// every offset and stride a multiple of 4) or element by element; the mask is a strided view of
// (B..., TQ, TK). Tile shapes are override constants (launch_attention.tiles):
//   a workgroup of NRG x NL invocations owns a block of BR = 4 NRG rows (queries; keys in
//   attn_bwd_dkv): invocation li = rg NL + lane holds rows 4 rg .. 4 rg + 3 of it, and of each
//   tile of BC = NL SK columns (keys; queries in attn_bwd_dkv) the columns j NL + lane, j < SK.
//   Its scores are SK vec4s, one per column, a component per row (`Blk`); its outputs are up to
//   4 groups of 4 dims (h NL + lane, h < ceil(D4 / NL)) for its 4 rows, one vec4 per row and group.
// Every register block is indexed with constants only (hand-unrolled, `SK > j` / `ng > h`
// folded by the driver): a dynamically indexed array is placed in local memory.
// Workgroup memory `tile` (TILE vec4s): tile A at 0 (rows of KP or VP vec4s), tile B at B0
// (attn_bwd_dkv), the exchanged probabilities / score gradients P at P0 ([column][row group],
// vec4 over the 4 rows, PS per column) and at R0 the row maxima of each lane (attn_fwd) or the
// tile's columns' (lse, delta) (attn_bwd_dkv). KP, VP and PS are padded so that the lanes of a
// quarter warp hit different banks (launch_attention.layout).
// Keys (queries in attn_bwd_dkv) come in chunks [J0, J1), one dispatch each, so that no
// invocation loops past the adapter's loop budget; the running state is kept in the f32 buffer
// st between them (FIRST: start empty; LAST: write the results).

alias Blk = array<vec4<f32>, 16>;       // SK <= 16 score vec4s, or 4 x 4 output vec4s
const SRC_Q: u32 = 0u;
const SRC_K: u32 = 1u;
const SRC_V: u32 = 2u;
const SRC_DO: u32 = 3u;

var<workgroup> tile: array<vec4<f32>, TILE>;

fn b_c() -> u32 { return NL * SK; }      // columns per tile
fn b_r() -> u32 { return 4u * NRG; }     // rows per workgroup block

// word of the first of a role's four placement words (OFF, L0, L1, LR)
fn role_word(src: u32) -> u32 {
    switch src {
        case SRC_Q: { return W_Q_OFF; }
        case SRC_K: { return W_K_OFF; }
        case SRC_V: { return W_V_OFF; }
        default: { return W_DO_OFF; }
    }
}

// element offset of matrix b of the role whose placement words start at w (once per block of
// rows: the division stays out of the tile loops)
fn mat_at(w: u32, b: u32) -> u32 {
    let hn = mu(W_HN);
    return mu(w) + (b / hn) * mu(w + 1u) + (b % hn) * mu(w + 2u);
}

// element offsets of rows r of that role's matrix at mb
fn rows_at(w: u32, mb: u32, r: vec4<u32>) -> vec4<u32> { return vec4<u32>(mb) + r * mu(w + 3u); }

// element p of operand src
fn el(src: u32, p: u32) -> f32 {
    let i = p >> 2u;
    let c = p & 3u;
    switch src {
        case SRC_Q: { return f32(q[i][c]); }
        case SRC_K: { return f32(k[i][c]); }
        case SRC_V: { return f32(v[i][c]); }
        default: { return f32(dout[i][c]); }
    }
}

// elements p..p+3 of operand src, those from element `end` on as 0 (VEC: p a multiple of 4, no end)
fn ld4(src: u32, p: u32, end: u32) -> vec4<f32> {
    if (VEC) {
        let i = p >> 2u;
        switch src {
            case SRC_Q: { return vec4<f32>(q[i]); }
            case SRC_K: { return vec4<f32>(k[i]); }
            case SRC_V: { return vec4<f32>(v[i]); }
            default: { return vec4<f32>(dout[i]); }
        }
    }
    var x = vec4<f32>(0.0);
    if (p < end) { x.x = el(src, p); }
    if (p + 1u < end) { x.y = el(src, p + 1u); }
    if (p + 2u < end) { x.z = el(src, p + 2u); }
    if (p + 3u < end) { x.w = el(src, p + 3u); }
    return x;
}

// exp, exactly 0 far below (and at -inf: builtin exp is only specified on a finite range)
fn exp0(x: vec4<f32>) -> vec4<f32> { return select(exp(x), vec4<f32>(0.0), x < vec4<f32>(-103.0)); }

fn mask_base(b: u32) -> u32 {
    var rem = b;
    var o = mu(W_OFFSET_MASK);
    for (var d = mu(W_MASK_NB); d > 0u; d = d - 1u) {
        let s = mu(W_MASK_BSHAPE + d - 1u);
        o = o + (rem % s) * mu(W_MASK_BSTRIDES + d - 1u);
        rem = rem / s;
    }
    return o;
}

// vec4 x of a tile (row x / nv, vec4 x % nv of it): the value load_tile stores and its slot
fn tile_at(src: u32, mb: u32, r0: u32, rend: u32, n: u32, nv: u32, x: u32) -> vec4<f32> {
    let t = x / nv;
    if (r0 + t >= rend || x >= b_c() * nv) { return vec4<f32>(0.0); }
    let rb = mb + (r0 + t) * mu(role_word(src) + 3u);
    return ld4(src, rb + 4u * (x - t * nv), rb + n);
}
fn tile_slot(nv: u32, base: u32, ts: u32, x: u32) -> u32 { return base + (x / nv) * ts + x % nv; }

// Tile rows t < BC at `base` (row stride ts vec4s): row r0 + t of operand src's matrix at mb (n
// elements = nv vec4s per row), zeros from row `rend` on. Cooperative: every invocation,
// four loads in flight before their stores (the driver does not unroll the loop).
fn load_tile(src: u32, mb: u32, r0: u32, rend: u32, n: u32, nv: u32, base: u32, ts: u32,
             li: u32) {
    let nt = NRG * NL;
    let end = b_c() * nv;
    for (var x = li; x < end; x = x + 4u * nt) {
        let v0 = tile_at(src, mb, r0, rend, n, nv, x);
        let v1 = tile_at(src, mb, r0, rend, n, nv, x + nt);
        let v2 = tile_at(src, mb, r0, rend, n, nv, x + 2u * nt);
        let v3 = tile_at(src, mb, r0, rend, n, nv, x + 3u * nt);
        tile[tile_slot(nv, base, ts, x)] = v0;
        if (x + nt < end) { tile[tile_slot(nv, base, ts, x + nt)] = v1; }
        if (x + 2u * nt < end) { tile[tile_slot(nv, base, ts, x + 2u * nt)] = v2; }
        if (x + 3u * nt < end) { tile[tile_slot(nv, base, ts, x + 3u * nt)] = v3; }
    }
}

// s[j] += the 4 rows' dot products with tile column j NL + lane, over one vec4 of the rows
// (ax: the 4 rows' first elements, ... aw: their fourth) and b, the column's vec4
fn sdot(s: ptr<function, Blk>, j: u32, ax: vec4<f32>, ay: vec4<f32>, az: vec4<f32>,
        aw: vec4<f32>, b: vec4<f32>) {
    (*s)[j] = fma(aw, vec4<f32>(b.w), fma(az, vec4<f32>(b.z), fma(ay, vec4<f32>(b.y),
              fma(ax, vec4<f32>(b.x), (*s)[j]))));
}

// s[j] (j < SK), component r: row r of operand src (element offsets rb, n elements, nv vec4s)
// dot tile column j NL + lane of the tile at `base` (row stride ts)
fn score(s: ptr<function, Blk>, src: u32, rb: vec4<u32>, n: u32, nv: u32, base: u32, ts: u32,
         lane: u32) {
    *s = Blk();
    let tj = NL * ts;
    for (var e = 0u; e < nv; e = e + 1u) {
        let a0 = ld4(src, rb.x + 4u * e, rb.x + n);
        let a1 = ld4(src, rb.y + 4u * e, rb.y + n);
        let a2 = ld4(src, rb.z + 4u * e, rb.z + n);
        let a3 = ld4(src, rb.w + 4u * e, rb.w + n);
        let ax = vec4<f32>(a0.x, a1.x, a2.x, a3.x);
        let ay = vec4<f32>(a0.y, a1.y, a2.y, a3.y);
        let az = vec4<f32>(a0.z, a1.z, a2.z, a3.z);
        let aw = vec4<f32>(a0.w, a1.w, a2.w, a3.w);
        let t = base + lane * ts + e;
        sdot(s, 0u, ax, ay, az, aw, tile[t]);
        if (SK > 1u) { sdot(s, 1u, ax, ay, az, aw, tile[t + tj]); }
        if (SK > 2u) { sdot(s, 2u, ax, ay, az, aw, tile[t + 2u * tj]); }
        if (SK > 3u) { sdot(s, 3u, ax, ay, az, aw, tile[t + 3u * tj]); }
        if (SK > 4u) { sdot(s, 4u, ax, ay, az, aw, tile[t + 4u * tj]); }
        if (SK > 5u) { sdot(s, 5u, ax, ay, az, aw, tile[t + 5u * tj]); }
        if (SK > 6u) { sdot(s, 6u, ax, ay, az, aw, tile[t + 6u * tj]); }
        if (SK > 7u) { sdot(s, 7u, ax, ay, az, aw, tile[t + 7u * tj]); }
        if (SK > 8u) { sdot(s, 8u, ax, ay, az, aw, tile[t + 8u * tj]); }
        if (SK > 9u) { sdot(s, 9u, ax, ay, az, aw, tile[t + 9u * tj]); }
        if (SK > 10u) { sdot(s, 10u, ax, ay, az, aw, tile[t + 10u * tj]); }
        if (SK > 11u) { sdot(s, 11u, ax, ay, az, aw, tile[t + 11u * tj]); }
        if (SK > 12u) { sdot(s, 12u, ax, ay, az, aw, tile[t + 12u * tj]); }
        if (SK > 13u) { sdot(s, 13u, ax, ay, az, aw, tile[t + 13u * tj]); }
        if (SK > 14u) { sdot(s, 14u, ax, ay, az, aw, tile[t + 14u * tj]); }
        if (SK > 15u) { sdot(s, 15u, ax, ay, az, aw, tile[t + 15u * tj]); }
    }
}

// What the column operations need: rows (the tile's 4 rows of this invocation, rc: clamped to
// the matrix, within the batch), the batch's mask offset mb, the tile's first column c0 and the
// end of the columns cend, whether rows are queries (else keys); mx: the running max (fwd), l:
// the partial row sums (fwd), lse / delta of the rows (dq)
struct Col {
    rows: vec4<u32>, rc: vec4<u32>, mb: u32, c0: u32, cend: u32, qrows: bool,
    mx: vec4<f32>, l: vec4<f32>, lse: vec4<f32>, delta: vec4<f32>, lane: u32, rg: u32,
}

const OP_FIX: u32 = 0u;   // scaled, masked; -inf past cend and (CAUSAL) where the key follows the query
const OP_MAX: u32 = 1u;   // mx = max(mx, s)
const OP_FWD: u32 = 2u;   // p = exp(s - mx) (mx: the new max, 0 where -inf) into P, its sum into l
const OP_DQ: u32 = 3u;    // ds = p (dp - delta) into P, p = exp(s - lse) (the rows' lse, delta)
const OP_DKV: u32 = 4u;   // p = exp(s - lse) into P, ds = p (dp - delta) kept in s (the columns'
                          // lse, delta: from R0)
const OP_PUT: u32 = 5u;   // s into P

// operation `op` on score column j (tile column c0 + j NL + lane) of this invocation
fn col_op(op: u32, s: ptr<function, Blk>, dp: ptr<function, Blk>, j: u32, c: ptr<function, Col>) {
    let col = (*c).c0 + j * NL + (*c).lane;
    let slot = P0 + (j * NL + (*c).lane) * PS + (*c).rg;
    switch op {
        case OP_FIX: {
            var x = (*s)[j] * mf(W_SCALE);
            if (HAS_MASK) {
                var sr = mu(W_MASK_SQ);            // mask strides along the rows / the columns
                var sc = mu(W_MASK_SK);
                var cc = min(col, mu(W_TK) - 1u);
                if (!(*c).qrows) {
                    sr = mu(W_MASK_SK);
                    sc = mu(W_MASK_SQ);
                    cc = min(col, mu(W_TQ) - 1u);
                }
                let p = vec4<u32>((*c).mb + cc * sc) + (*c).rc * sr;
                x = x + vec4<f32>(f32(mask[p.x]), f32(mask[p.y]), f32(mask[p.z]), f32(mask[p.w]));
            }
            var dead = vec4<bool>(col >= (*c).cend);
            if (CAUSAL) {                          // torch's is_causal: query i sees keys 0..i
                if ((*c).qrows) { dead = dead | (vec4<u32>(col) > (*c).rows); }
                else { dead = dead | ((*c).rows > vec4<u32>(col)); }
            }
            (*s)[j] = select(x, vec4<f32>(-inf_f32()), dead);
        }
        case OP_MAX: { (*c).mx = max((*c).mx, (*s)[j]); }
        case OP_FWD: {
            let p = exp0((*s)[j] - (*c).mx);
            (*c).l = (*c).l + p;
            tile[slot] = p;
        }
        case OP_DQ: { tile[slot] = exp0((*s)[j] - (*c).lse) * ((*dp)[j] - (*c).delta); }
        case OP_DKV: {
            let x = tile[R0 + j * NL + (*c).lane];
            let p = exp0((*s)[j] - vec4<f32>(x.x));
            tile[slot] = p;
            (*s)[j] = p * ((*dp)[j] - vec4<f32>(x.y));
        }
        default: { tile[slot] = (*s)[j]; }
    }
}

// col_op on every score column of this invocation (unrolled: constant indices)
fn each(op: u32, s: ptr<function, Blk>, dp: ptr<function, Blk>, c: ptr<function, Col>) {
    col_op(op, s, dp, 0u, c);
    if (SK > 1u) { col_op(op, s, dp, 1u, c); }
    if (SK > 2u) { col_op(op, s, dp, 2u, c); }
    if (SK > 3u) { col_op(op, s, dp, 3u, c); }
    if (SK > 4u) { col_op(op, s, dp, 4u, c); }
    if (SK > 5u) { col_op(op, s, dp, 5u, c); }
    if (SK > 6u) { col_op(op, s, dp, 6u, c); }
    if (SK > 7u) { col_op(op, s, dp, 7u, c); }
    if (SK > 8u) { col_op(op, s, dp, 8u, c); }
    if (SK > 9u) { col_op(op, s, dp, 9u, c); }
    if (SK > 10u) { col_op(op, s, dp, 10u, c); }
    if (SK > 11u) { col_op(op, s, dp, 11u, c); }
    if (SK > 12u) { col_op(op, s, dp, 12u, c); }
    if (SK > 13u) { col_op(op, s, dp, 13u, c); }
    if (SK > 14u) { col_op(op, s, dp, 14u, c); }
    if (SK > 15u) { col_op(op, s, dp, 15u, c); }
}

// o[4 h + r] += x.r * y: row r of output group h
fn oacc(o: ptr<function, Blk>, h: u32, x: vec4<f32>, y: vec4<f32>) {
    let i = 4u * h;
    (*o)[i] = fma(vec4<f32>(x.x), y, (*o)[i]);
    (*o)[i + 1u] = fma(vec4<f32>(x.y), y, (*o)[i + 1u]);
    (*o)[i + 2u] = fma(vec4<f32>(x.z), y, (*o)[i + 2u]);
    (*o)[i + 3u] = fma(vec4<f32>(x.w), y, (*o)[i + 3u]);
}

// o[4 h + r] (h < ng) += sum over the tile's columns c of P[c].r * Y[c][h NL + lane]: P the
// exchanged block at xb (this row group's slot), Y the tile at yb (row stride ys)
fn accum(o: ptr<function, Blk>, ng: u32, xb: u32, yb: u32, ys: u32, lane: u32) {
    for (var c = 0u; c < b_c(); c = c + 1u) {
        let x = tile[xb + c * PS];
        let y = yb + c * ys + lane;
        oacc(o, 0u, x, tile[y]);
        if (ng > 1u) { oacc(o, 1u, x, tile[y + NL]); }
        if (ng > 2u) { oacc(o, 2u, x, tile[y + 2u * NL]); }
        if (ng > 3u) { oacc(o, 3u, x, tile[y + 3u * NL]); }
    }
}

// An output block's rows: rows (< nrows are written), their first element (G_PUT: of res, n
// elements a row; G_SAVE / G_LOAD: vec4 of st), nv vec4s a row, f: a factor per row
struct Out { rows: vec4<u32>, nrows: u32, base: vec4<u32>, n: u32, nv: u32, f: vec4<f32>, lane: u32 }
const G_SCALE: u32 = 0u;  // o *= f
const G_PUT: u32 = 1u;    // res = S(o * f)
const G_SAVE: u32 = 2u;   // st = o (the running sums between chunks)
const G_LOAD: u32 = 3u;   // o = st

// operation `op` on output group h (dims 4 (h NL + lane) ..) of this invocation's 4 rows
fn grp_op(op: u32, o: ptr<function, Blk>, h: u32, u: Out) {
    let i = 4u * h;
    let d4 = h * NL + u.lane;
    if (op == G_SCALE) {
        (*o)[i] = (*o)[i] * u.f.x;
        (*o)[i + 1u] = (*o)[i + 1u] * u.f.y;
        (*o)[i + 2u] = (*o)[i + 2u] * u.f.z;
        (*o)[i + 3u] = (*o)[i + 3u] * u.f.w;
    } else if (d4 >= u.nv) {
    } else if (op == G_LOAD) {
        (*o)[i] = st[u.base.x + d4];
        (*o)[i + 1u] = st[u.base.y + d4];
        (*o)[i + 2u] = st[u.base.z + d4];
        (*o)[i + 3u] = st[u.base.w + d4];
    } else if (op == G_SAVE) {
        if (u.rows.x < u.nrows) { st[u.base.x + d4] = (*o)[i]; }
        if (u.rows.y < u.nrows) { st[u.base.y + d4] = (*o)[i + 1u]; }
        if (u.rows.z < u.nrows) { st[u.base.z + d4] = (*o)[i + 2u]; }
        if (u.rows.w < u.nrows) { st[u.base.w + d4] = (*o)[i + 3u]; }
    } else {
        let x0 = (*o)[i] * u.f.x;                  // values first: a dynamic index into the
        let x1 = (*o)[i + 1u] * u.f.y;             // array itself would move it to memory
        let x2 = (*o)[i + 2u] * u.f.z;
        let x3 = (*o)[i + 3u] * u.f.w;
        let d = 4u * d4;
        for (var e = 0u; e < min(4u, u.n - d); e = e + 1u) {
            if (u.rows.x < u.nrows) { res[u.base.x + d + e] = S(x0[e]); }
            if (u.rows.y < u.nrows) { res[u.base.y + d + e] = S(x1[e]); }
            if (u.rows.z < u.nrows) { res[u.base.z + d + e] = S(x2[e]); }
            if (u.rows.w < u.nrows) { res[u.base.w + d + e] = S(x3[e]); }
        }
    }
}

fn groups(op: u32, o: ptr<function, Blk>, ng: u32, u: Out) {
    grp_op(op, o, 0u, u);
    if (ng > 1u) { grp_op(op, o, 1u, u); }
    if (ng > 2u) { grp_op(op, o, 2u, u); }
    if (ng > 3u) { grp_op(op, o, 3u, u); }
}

// the workgroup's block of rows for item `it`: (batch, first row); reversed (the blocks with the
// most causal columns first) when `rev`
fn block(it: u32, nrows: u32, rev: bool) -> vec2<u32> {
    let nb = (nrows + b_r() - 1u) / b_r();
    var blk = it % nb;
    if (rev) { blk = nb - 1u - blk; }
    return vec2<u32>(it / nb, blk * b_r());
}

fn n_items(nrows: u32) -> u32 { return mu(W_B) * ((nrows + b_r() - 1u) / b_r()); }

fn col_state(bi: vec2<u32>, nrows: u32, cend: u32, rg: u32, lane: u32) -> Col {
    let rows = vec4<u32>(bi.y + 4u * rg) + vec4<u32>(0u, 1u, 2u, 3u);
    let z = vec4<f32>(0.0);
    return Col(rows, min(rows, vec4<u32>(nrows - 1u)), mask_base(bi.x), 0u, cend, true,
               vec4<f32>(-inf_f32()), z, z, z, lane, rg);
}

@compute @workgroup_size(NRG * NL)
fn attn_fwd(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
            @builtin(local_invocation_index) li: u32) {
    let TQ = mu(W_TQ);
    let TK = mu(W_TK);
    let D = mu(W_D);
    let DV = mu(W_DV);
    let lane = li % NL;
    let rg = li / NL;
    let ng = (DV4 + NL - 1u) / NL;
    for (var it = wid.y * nwg.x + wid.x; it < n_items(TQ); it = it + nwg.x * nwg.y) {
        let bi = block(it, TQ, CAUSAL);
        var c = col_state(bi, TQ, TK, rg, lane);
        let grow = vec4<u32>(bi.x * TQ) + c.rc;
        var u = Out(c.rows, TQ, grow * DV4, DV, DV4, vec4<f32>(1.0), lane);
        var o = Blk();
        var m = vec4<f32>(-inf_f32());             // the running max (the same in every lane)
        var l = vec4<f32>(0.0);                    // this lane's part of the row sums
        let sml = vec4<u32>(mu(W_ST2)) + grow;     // (max, sum) of the rows between chunks
        if (mu(W_FIRST) == 0u) {
            groups(G_LOAD, &o, ng, u);
            let x = st[sml.x];
            let y = st[sml.y];
            let z = st[sml.z];
            let t = st[sml.w];
            m = vec4<f32>(x.x, y.x, z.x, t.x);
            if (lane == 0u) { l = vec4<f32>(x.y, y.y, z.y, t.y); }
        }
        let mk = mat_at(W_K_OFF, bi.x);
        let mv = mat_at(W_V_OFF, bi.x);
        let rq = rows_at(W_Q_OFF, mat_at(W_Q_OFF, bi.x), c.rc);
        var jend = mu(W_J1);
        if (CAUSAL) { jend = min(jend, bi.y + b_r()); }
        for (var j0 = mu(W_J0); j0 < jend; j0 = j0 + b_c()) {
            workgroupBarrier();
            load_tile(SRC_K, mk, j0, TK, D, D4, 0u, KP, li);
            workgroupBarrier();
            var s: Blk;
            var none: Blk;
            score(&s, SRC_Q, rq, D, D4, 0u, KP, lane);
            c.c0 = j0;
            each(OP_FIX, &s, &none, &c);
            c.mx = m;
            each(OP_MAX, &s, &none, &c);
            tile[R0 + li] = c.mx;                  // the lanes' maxima of each row, exchanged
            workgroupBarrier();
            var mx = m;
            for (var r = 0u; r < NL; r = r + 1u) { mx = max(mx, tile[R0 + rg * NL + r]); }
            c.mx = select(mx, vec4<f32>(0.0), mx == vec4<f32>(-inf_f32()));
            u.f = exp0(m - c.mx);
            m = mx;
            groups(G_SCALE, &o, ng, u);
            c.l = l * u.f;
            each(OP_FWD, &s, &none, &c);
            l = c.l;
            load_tile(SRC_V, mv, j0, TK, DV, DV4, 0u, VP, li);   // over K: all scored
            workgroupBarrier();
            accum(&o, ng, P0 + rg, 0u, VP, lane);
        }
        workgroupBarrier();                        // the row sums: the lanes' parts added
        tile[R0 + li] = l;
        workgroupBarrier();
        var lt = vec4<f32>(0.0);
        for (var r = 0u; r < NL; r = r + 1u) { lt = lt + tile[R0 + rg * NL + r]; }
        if (mu(W_LAST) != 0u) {                    // out = o / l, lse = m + log(l); a row that
            u.f = select(1.0 / lt, vec4<f32>(0.0), lt == vec4<f32>(0.0));  // sees no key: 0, -inf
            u.base = rows_at(W_RES_OFF, mat_at(W_RES_OFF, bi.x), c.rc);
            groups(G_PUT, &o, ng, u);
            if (lane == 0u) {
                let x = m + log(lt);
                if (c.rows.x < TQ) { lse[grow.x] = x.x; }
                if (c.rows.y < TQ) { lse[grow.y] = x.y; }
                if (c.rows.z < TQ) { lse[grow.z] = x.z; }
                if (c.rows.w < TQ) { lse[grow.w] = x.w; }
            }
        } else {
            groups(G_SAVE, &o, ng, u);
            if (lane == 0u) {
                if (c.rows.x < TQ) { st[sml.x] = vec4<f32>(m.x, lt.x, 0.0, 0.0); }
                if (c.rows.y < TQ) { st[sml.y] = vec4<f32>(m.y, lt.y, 0.0, 0.0); }
                if (c.rows.z < TQ) { st[sml.z] = vec4<f32>(m.z, lt.z, 0.0, 0.0); }
                if (c.rows.w < TQ) { st[sml.w] = vec4<f32>(m.w, lt.w, 0.0, 0.0); }
            }
        }
    }
}

// ld4 of dout alone (ld4 names every operand: an entry calling it binds them all)
fn dout4(p: u32, end: u32) -> vec4<f32> {
    if (VEC) { return vec4<f32>(dout[p >> 2u]); }
    var x = vec4<f32>(0.0);
    for (var c = 0u; c < 4u; c = c + 1u) {
        if (p + c < end) { x[c] = f32(dout[(p + c) >> 2u][(p + c) & 3u]); }
    }
    return x;
}

// (lse, delta = sum(dout * out)) per query row, PREP_LANES lanes a row reading consecutive vec4s
// (one lane a row read it element by element, a warp's loads in as many rows: 0.6 TB/s)
var<workgroup> prep: array<f32, WG>;

@compute @workgroup_size(WG)
fn attn_bwd_prep(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
                 @builtin(local_invocation_index) lid: u32) {
    let DV = mu(W_DV);
    let TQ = mu(W_TQ);
    let per_wg = WG / PREP_LANES;
    let lane = lid % PREP_LANES;
    for (var g = wid.y * nwg.x + wid.x; g * per_wg < mu(W_ROWS); g = g + nwg.x * nwg.y) {
        let r = g * per_wg + lid / PREP_LANES;
        var s = 0.0;
        if (r < mu(W_ROWS)) {
            let pd = mat_at(W_DO_OFF, r / TQ) + (r % TQ) * mu(W_DO_LR);
            let po = mat_at(W_OUT_OFF, r / TQ) + (r % TQ) * mu(W_OUT_LR);
            for (var j = 4u * lane; j < DV; j = j + 4u * PREP_LANES) {
                var o = vec4<f32>(0.0);
                for (var c = 0u; c < 4u; c = c + 1u) {
                    if (j + c < DV) { o[c] = f32(out_in[po + j + c]); }
                }
                s = s + dot(dout4(pd + j, pd + DV), o);
            }
        }
        workgroupBarrier();
        prep[lid] = s;
        workgroupBarrier();
        if (lane == 0u && r < mu(W_ROWS)) {
            var t = 0.0;
            for (var i = 0u; i < PREP_LANES; i = i + 1u) { t = t + prep[lid + i]; }
            ld[2u * r] = lse_in[r];
            ld[2u * r + 1u] = t;
        }
    }
}

// dq / SCALE = sum over keys of ds k, per block of query rows, over the key tiles of this chunk
@compute @workgroup_size(NRG * NL)
fn attn_bwd_dq(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
               @builtin(local_invocation_index) li: u32) {
    let TQ = mu(W_TQ);
    let TK = mu(W_TK);
    let D = mu(W_D);
    let DV = mu(W_DV);
    let lane = li % NL;
    let rg = li / NL;
    let ng = (D4 + NL - 1u) / NL;
    for (var it = wid.y * nwg.x + wid.x; it < n_items(TQ); it = it + nwg.x * nwg.y) {
        let bi = block(it, TQ, CAUSAL);
        var c = col_state(bi, TQ, TK, rg, lane);
        let grow = vec4<u32>(bi.x * TQ) + c.rc;
        var u = Out(c.rows, TQ, grow * D4, D, D4, vec4<f32>(mf(W_SCALE)), lane);
        var o = Blk();
        if (mu(W_FIRST) == 0u) { groups(G_LOAD, &o, ng, u); }
        let lse_r = vec4<f32>(ld[2u * grow.x], ld[2u * grow.y], ld[2u * grow.z], ld[2u * grow.w]);
        c.lse = select(lse_r, vec4<f32>(0.0), lse_r == vec4<f32>(-inf_f32()));  // no key: p = 0
        c.delta = vec4<f32>(ld[2u * grow.x + 1u], ld[2u * grow.y + 1u], ld[2u * grow.z + 1u],
                            ld[2u * grow.w + 1u]);
        let mk = mat_at(W_K_OFF, bi.x);
        let mv = mat_at(W_V_OFF, bi.x);
        let rq = rows_at(W_Q_OFF, mat_at(W_Q_OFF, bi.x), c.rc);
        let rdo = rows_at(W_DO_OFF, mat_at(W_DO_OFF, bi.x), c.rc);
        var jend = mu(W_J1);
        if (CAUSAL) { jend = min(jend, bi.y + b_r()); }
        for (var j0 = mu(W_J0); j0 < jend; j0 = j0 + b_c()) {
            workgroupBarrier();
            load_tile(SRC_V, mv, j0, TK, DV, DV4, 0u, VP, li);
            workgroupBarrier();
            var dp: Blk;
            score(&dp, SRC_DO, rdo, DV, DV4, 0u, VP, lane);
            workgroupBarrier();
            load_tile(SRC_K, mk, j0, TK, D, D4, 0u, KP, li);
            workgroupBarrier();
            var s: Blk;
            score(&s, SRC_Q, rq, D, D4, 0u, KP, lane);
            c.c0 = j0;
            each(OP_FIX, &s, &dp, &c);
            each(OP_DQ, &s, &dp, &c);
            workgroupBarrier();
            accum(&o, ng, P0 + rg, 0u, KP, lane);
        }
        if (mu(W_LAST) != 0u) {
            u.base = rows_at(W_RES_OFF, mat_at(W_RES_OFF, bi.x), c.rc);
            groups(G_PUT, &o, ng, u);
        } else {
            groups(G_SAVE, &o, ng, u);
        }
    }
}

// per block of key rows, over the query tiles of this chunk: dv += p^T dout, dk / SCALE += ds^T q
@compute @workgroup_size(NRG * NL)
fn attn_bwd_dkv(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
                @builtin(local_invocation_index) li: u32) {
    let TQ = mu(W_TQ);
    let TK = mu(W_TK);
    let D = mu(W_D);
    let DV = mu(W_DV);
    let J1 = mu(W_J1);
    let lane = li % NL;
    let rg = li / NL;
    let ngk = (D4 + NL - 1u) / NL;
    let ngv = (DV4 + NL - 1u) / NL;
    for (var it = wid.y * nwg.x + wid.x; it < n_items(TK); it = it + nwg.x * nwg.y) {
        let bi = block(it, TK, false);             // the first key blocks see the most queries
        var c = col_state(bi, TK, J1, rg, lane);
        c.qrows = false;
        let grow = vec4<u32>(bi.x * TK) + c.rc;
        var uk = Out(c.rows, TK, grow * D4, D, D4, vec4<f32>(mf(W_SCALE)), lane);
        var uv = Out(c.rows, TK, vec4<u32>(mu(W_ST2)) + grow * DV4, DV, DV4, vec4<f32>(1.0), lane);
        var ok = Blk();
        var ov = Blk();
        if (mu(W_FIRST) == 0u) {
            groups(G_LOAD, &ok, ngk, uk);
            groups(G_LOAD, &ov, ngv, uv);
        }
        let mdo = mat_at(W_DO_OFF, bi.x);
        let mq = mat_at(W_Q_OFF, bi.x);
        let rv = rows_at(W_V_OFF, mat_at(W_V_OFF, bi.x), c.rc);
        let rk = rows_at(W_K_OFF, mat_at(W_K_OFF, bi.x), c.rc);
        var i0 = mu(W_J0);
        if (CAUSAL) { i0 = max(i0, bi.y); }        // queries before the block see none of it
        for (var c0 = i0; c0 < J1; c0 = c0 + b_c()) {
            workgroupBarrier();
            load_tile(SRC_DO, mdo, c0, J1, DV, DV4, 0u, VP, li);
            load_tile(SRC_Q, mq, c0, J1, D, D4, B0, KP, li);
            for (var x = li; x < b_c(); x = x + NRG * NL) {   // the columns' lse, delta
                let gq = bi.x * TQ + min(c0 + x, TQ - 1u);
                let lse_c = ld[2u * gq];
                tile[R0 + x] = vec4<f32>(select(lse_c, 0.0, lse_c == -inf_f32()), ld[2u * gq + 1u],
                                         0.0, 0.0);
            }
            workgroupBarrier();
            var dp: Blk;
            score(&dp, SRC_V, rv, DV, DV4, 0u, VP, lane);
            var s: Blk;
            score(&s, SRC_K, rk, D, D4, B0, KP, lane);
            c.c0 = c0;
            each(OP_FIX, &s, &dp, &c);
            each(OP_DKV, &s, &dp, &c);
            workgroupBarrier();
            accum(&ov, ngv, P0 + rg, 0u, VP, lane);
            workgroupBarrier();
            each(OP_PUT, &s, &dp, &c);
            workgroupBarrier();
            accum(&ok, ngk, P0 + rg, B0, KP, lane);
        }
        if (mu(W_LAST) != 0u) {
            uk.base = rows_at(W_RES_OFF, mat_at(W_RES_OFF, bi.x), c.rc);
            uv.base = rows_at(W_RESV_OFF, mat_at(W_RESV_OFF, bi.x), c.rc);
            groups(G_PUT, &ok, ngk, uk);
            groups(G_PUT, &ov, ngv, uv);
        } else {
            groups(G_SAVE, &ok, ngk, uk);
            groups(G_SAVE, &ov, ngv, uv);
        }
    }
}
