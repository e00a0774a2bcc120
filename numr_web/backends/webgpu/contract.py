"""The contract between the Python launchers and the WGSL kernels, declared once, with names.

For every kernel file of shaders/ (`KERNELS`):
  * its metadata layout: the META_WORDS u32 words of the uniform block each dispatch gets at
    binding 0, every word or array of MAXD words named (N, NDIM, SCALAR_A, OFFSET_OUT, SHAPE,
    STRIDES_A, ...). Scalars are packed from word 0 in declaration order, arrays after them;
  * its storage bindings (name, access, WGSL type), numbered after META_BINDING in declaration
    order;
  * the bindings each entry point uses: a pipeline made with layout "auto" has exactly those, so the
    dispatcher binds a small dummy buffer to a declared binding the launcher does not pass;
  * its `override` constants and the named codes they take (REDUCE_SUM, RANDOM_NORMAL, ...).

codegen.header(kernel_file) writes this as WGSL (`const W_N: u32 = 0u;`, the
`@group(0) @binding(k) var<...>` declarations, the overrides and the code constants) in front of
the kernel file; the launchers index the metadata with the same names (`words[L.N] = n`).
The elementwise op codes and activation codes come from the op vocabulary and the ACT table
(codegen.py); this module is pure Python, imports nothing of numr_web and touches no GPU.
"""
from __future__ import annotations

from .contract_base import (MAX_GROUPS, MAXD, META_BINDING, META_BYTES, META_WORDS,  # noqa: F401
                            WG, WORD_PREFIX, KernelFile, Layout, Slot, f32_word)


# -- elementwise.wgsl ---------------------------------------------------------------------------------
OPERANDS = ("out", "a", "b", "cond")     # operands of the strided elementwise kernels, in this order

ELEMENTWISE = KernelFile(
    "elementwise.wgsl",
    Layout(scalars=[
        ("N", "elements to write (vec4s in unary4 / binary4)"),
        ("NDIM", "dims of the coalesced shape (SHAPE)"),
        ("SCALAR_A", "operand a when A_SCALAR (f32 / i32 bits); fill: the value; arange: the start"),
        ("SCALAR_B", "operand b when B_SCALAR; arange: the step"),
        ("SEED_LO", "random: low 32 bits of the seed"),
        ("SEED_HI", "random: high 32 bits of the seed"),
        ("RANDOM_F16", "random: 1 when the output is float16 (uniform values then stay below 1)"),
        ("DEPTH", "one_hot: number of classes"),
        ("OFFSET_OUT", "element offset of out inside its binding (vec4s in unary4 / binary4)"),
        ("OFFSET_A", "element offset of a (one_hot: of the labels)"),
        ("OFFSET_B", "element offset of b"),
        ("OFFSET_COND", "element offset of cond (where_)"),
    ], arrays=[
        ("SHAPE", "coalesced shape of the output (one_hot: of the labels)"),
        ("STRIDES_OUT", "element strides of out"),
        ("STRIDES_A", "element strides of a (one_hot: of the labels)"),
        ("STRIDES_B", "element strides of b"),
        ("STRIDES_COND", "element strides of cond"),
    ]),
    slots=[
        ("out", "read_write", "array<S>", "the output"),
        ("a", "read", "array<S>", "operand a"),
        ("b", "read", "array<S>", "operand b"),
        ("cnd", "read", "array<u32>", "where_: the condition (bool)"),
        ("outb", "read_write", "array<u32>", "compare: the bool output"),
        ("lab", "read", "array<i32>", "one_hot: the labels"),
        ("outo", "read_write", "array<SO>", "astype: the output of dtype SO"),
        ("raw", "read", "array<u32>", "bool_unpack: the host's bytes, 4 per word"),
        ("a4", "read", "array<vec4<S>>", "vec4 view of a (unary4 / binary4)"),
        ("b4", "read", "array<vec4<S>>", "vec4 view of b"),
        ("out4", "read_write", "array<vec4<S>>", "vec4 view of out"),
    ],
    entries={
        "unary": ("out", "a"), "binary": ("out", "a", "b"), "compare": ("outb", "a", "b"),
        "where_": ("out", "a", "b", "cnd"), "astype": ("outo", "a"),
        "unary4": ("out4", "a4"), "binary4": ("out4", "a4", "b4"),
        "fill": ("out",), "arange": ("out",), "random": ("out",), "one_hot": ("out", "lab"),
        "bool_unpack": ("out", "raw"),
    },
    overrides=[
        ("OP", "u32", "0u", "the operation: UNARY_*, BINARY_*, COMPARE_* (generated); random: RANDOM_*"),
        ("ACT", "u32", "0u", "the activation of the act_* operations: ACT_* (generated)"),
        ("FLAT", "bool", "false", "every operand dense and of the output's shape: index = offset + i"),
        ("A_SCALAR", "bool", "false", "operand a is the scalar in word SCALAR_A"),
        ("B_SCALAR", "bool", "false", "operand b is the scalar in word SCALAR_B"),
    ],
    codes={"RANDOM": ("uniform", "normal")},
    vocabulary=True, includes=("elementwise_ops.wgsl",),
)

# -- fused.wgsl: one generated kernel per chain of elementwise ops (codegen_fused.py, fusion.py) ---
FUSED_BUFFERS = 8                # storage bindings of one fused kernel, inputs + outputs (WebGPU's
                                 # minimum maxStorageBuffersPerShaderStage)
FUSED_SCALARS = 3 * MAXD         # Python-scalar operands per fused kernel (SCALARS + k, k < 24)
_FUSED_VIEWS = (("", "array<S>"), ("4", "array<vec4<S>>"))
FUSED = KernelFile(
    "fused.wgsl",
    Layout(scalars=[
        ("N", "elements (every operand dense, of N elements; fused4_*: vec4s)"),
        ("NEG_ZERO", "-0.0 (0x80000000): added to every intermediate, see fused.wgsl"),
    ], arrays=[
        ("OFFSET_IN", "element offset of input k inside its binding (in<k>; in4<k>: vec4s)"),
        ("OFFSET_OUT", "element offset of output k inside its binding (out<k>; out4<k>: vec4s)"),
        ("SCALARS", "scalar operand k (f32 / i32 bits), k < 8"),
        ("SCALARS_1", "scalar operands 8..15 (word SCALARS + k continues here)"),
        ("SCALARS_2", "scalar operands 16..23"),
        ("DIV_IN", "broadcast input k: element (i / DIV_IN) % MOD_IN of its binding"),
        ("MOD_IN", "broadcast input k: see DIV_IN"),
    ]),
    slots=[(f"in{v}{k}", "read", t, f"input {k}") for v, t in _FUSED_VIEWS
           for k in range(FUSED_BUFFERS - 1)] +
          [(f"out{v}{k}", "read_write", t, f"output {k}") for v, t in _FUSED_VIEWS
           for k in range(FUSED_BUFFERS - 1)],
    # the generated entry point of a kernel with i inputs and o outputs: fused_<i>_<o>, and
    # fused4_<i>_<o> on vec4 views (4 elements per step; N, offsets in vec4s)
    entries={f"fused{v}_{i}_{o}": tuple(f"in{v}{k}" for k in range(i)) +
             tuple(f"out{v}{k}" for k in range(o))
             for v, _ in _FUSED_VIEWS for i in range(1, FUSED_BUFFERS)
             for o in range(1, FUSED_BUFFERS + 1 - i)},
    overrides=[
        ("OP", "u32", "0u", "unused here (the generated op switch reads it)"),
        ("ACT", "u32", "0u", "unused here (unary_act_* read it; fused kernels pass ACT_* codes)"),
    ],
    vocabulary=True, includes=("elementwise_ops.wgsl",),
)

# -- reduce.wgsl ----------------------------------------------------------------------------------------
REDUCE_OPS = ("sum", "mean", "max", "min", "prod")

REDUCE = KernelFile(
    "reduce.wgsl",
    Layout(scalars=[
        ("N", "reductions (outputs)"),
        ("NK", "dims of the coalesced kept shape"),
        ("NR", "dims of the coalesced reduced shape"),
        ("R", "elements per reduction"),
        ("CHUNK", "reduce_thread: elements per chunk of a reduction"),
        ("CHUNKS", "reduce_thread: chunks per reduction (> 1: chunk-major partial results)"),
        ("COUNT", "mean: the divisor (all elements of the reduction)"),
        ("OFFSET_IN", "element offset of the input inside its binding"),
        ("OFFSET_OUT", "element offset of the output"),
    ], arrays=[
        ("KEPT_SHAPE", "coalesced kept shape"),
        ("RED_SHAPE", "coalesced reduced shape"),
        ("KEPT_STRIDES_IN", "input strides of the kept dims"),
        ("RED_STRIDES_IN", "input strides of the reduced dims"),
        ("KEPT_STRIDES_OUT", "output strides of the kept dims"),
        ("RED_STRIDES_OUT", "softmax: output strides of the reduced dims"),
    ]),
    slots=[
        ("out", "read_write", "array<S>", "the output"),
        ("a", "read", "array<S>", "the input"),
        ("outi", "read_write", "array<i32>", "argmax: the indices"),
        ("a4", "read", "array<vec4<S>>", "colsum_v4: the input, 4 elements at a time"),
    ],
    entries={
        "reduce_thread": ("out", "a"), "reduce_wg": ("out", "a"), "colsum_v4": ("out", "a4"),
        "argmax_thread": ("outi", "a"), "argmax_wg": ("outi", "a"),
        "softmax_thread": ("out", "a"), "softmax_wg": ("out", "a"),
    },
    overrides=[
        ("OP", "u32", "0u", "reduce: REDUCE_*; softmax: SOFTMAX_*"),
    ],
    codes={"REDUCE": REDUCE_OPS, "SOFTMAX": ("plain", "log")},
    constants=[("BLOCK", 64, "blocked_sum's block; runs up to it are plain running sums")],
)

# -- matmul.wgsl, matmul_sg.wgsl ---------------------------------------------------------------------------
MATMUL_LAYOUT = Layout(scalars=[
    ("M", "rows of the output"),
    ("N", "columns of the output"),
    ("K", "the reduced dim"),
    ("BATCH_NDIM", "dims of the coalesced batch shape"),
    ("BATCH0", "first batch index of this dispatch (grid z + BATCH0)"),
    ("BIAS_STRIDE", "element stride of the bias"),
    ("OFFSET_OUT", "element offset of the output"),
    ("OFFSET_A", "element offset of a"),
    ("OFFSET_B", "element offset of b"),
    ("OFFSET_BIAS", "element offset of the bias"),
    ("OFFSET_Z", "element offset of z (WRITE_Z)"),
    ("A_STRIDE_M", "element stride of a along m"),
    ("A_STRIDE_K", "element stride of a along k"),
    ("B_STRIDE_K", "element stride of b along k"),
    ("B_STRIDE_N", "element stride of b along n"),
], arrays=[
    ("BATCH_SHAPE", "coalesced batch shape"),
    ("A_BATCH_STRIDES", "strides of a along the batch dims (0: broadcast)"),
    ("B_BATCH_STRIDES", "strides of b along the batch dims"),
])
MATMUL_SLOTS = [
    ("out", "read_write", "array<S>", "y = act(a @ b + bias), dense (batch, M, N)"),
    ("a", "read", "array<S>", "a (..., M, K)"),
    ("b", "read", "array<S>", "b (..., K, N)"),
    ("bias", "read", "array<S>", "the bias (N,) (HAS_BIAS)"),
    ("zout", "read_write", "array<S>", "z = a @ b + bias (WRITE_Z)"),
    ("a4", "read", "array<vec4<S>>", "gemm_v4: vec4 view of a"),
    ("b4", "read", "array<vec4<S>>", "gemm_v4: vec4 view of b"),
]
MATMUL_OVERRIDES = [
    ("ACT", "u32", "0u", "the activation of the epilogue: ACT_* (generated)"),
    ("HAS_BIAS", "bool", "false", "add the bias"),
    ("WRITE_Z", "bool", "false", "also write z (the ACT row saves z)"),
    ("A_MLANES", "bool", "false", "a is column-major (stride 1 along m): loader lanes along m"),
    ("B_KLANES", "bool", "false", "b is column-major (stride 1 along k): loader lanes along k"),
    ("CHECK", "bool", "true", "false when the tiles divide M, N and K: loads skip bounds tests"),
    ("V4_WIDE", "bool", "false", "gemm_v4: 128 x 128 tiles (8 x 8 per invocation) instead of 128 x 64"),
]
MATMUL = KernelFile(
    "matmul.wgsl", MATMUL_LAYOUT, MATMUL_SLOTS,
    entries={
        "gemm": ("out", "a", "b", "bias", "zout"),
        "gemm_big": ("out", "a", "b", "bias", "zout"),
        "gemm_v4": ("out", "a4", "b4", "bias", "zout"),
    },
    overrides=MATMUL_OVERRIDES,
)
# the subgroup GEMM: matmul.wgsl's contract, helpers (epilogue, batch offsets, vec4 loads) and text
MATMUL_SG = KernelFile(
    "matmul_sg.wgsl", MATMUL_LAYOUT, MATMUL_SLOTS,
    entries={"gemm_sg": ("out", "a4", "b4", "bias", "zout")},
    overrides=MATMUL_OVERRIDES, includes=("matmul.wgsl",), features=("subgroup",),
)

# -- index.wgsl -------------------------------------------------------------------------------------------
INDEX = KernelFile(
    "index.wgsl",
    Layout(scalars=[
        ("N", "elements of the output"),
        ("NDIM", "dims of SHAPE"),
        ("AXIS", "the indexed dim"),
        ("AXIS_LEN", "gather: x's size along AXIS; scatter_add: the output's"),
        ("I0", "scatter_add: first index position (along AXIS) of this dispatch"),
        ("I1", "scatter_add: end of the index positions of this dispatch"),
        ("ACCUM", "scatter_add: 1 to continue the sums already in out (a later chunk of positions)"),
        ("OFFSET_OUT", "element offset of the output"),
        ("OFFSET_A", "element offset of x (gather) or src (scatter_add)"),
        ("OFFSET_IDX", "element offset of the index"),
        ("SEG_I", "seg_*: index positions (the 1-D index's length)"),
        ("INNER", "seg_sum: elements after AXIS (the output is (N / (AXIS_LEN * INNER), AXIS_LEN, INNER))"),
        ("IDX_STRIDE", "seg_*: element stride of the 1-D index"),
        ("SEG_CHUNK", "seg_*: positions per chunk of the counting sort"),
        ("SEG_CHUNKS", "seg_*: chunks of the counting sort"),
    ], arrays=[
        ("SHAPE", "shape of the output (gather: the index's shape)"),
        ("STRIDES_A", "element strides of x (gather) or src (scatter_add)"),
        ("STRIDES_IDX", "element strides of the index"),
        ("IDX_SHAPE", "scatter_add: the index's (and src's) shape"),
    ]),
    slots=[
        ("out", "read_write", "array<S>", "the output, dense"),
        ("a", "read", "array<S>", "x (gather) or src (scatter_add)"),
        ("idx", "read", "array<i32>", "the index"),
        ("seg", "read_write", "array<u32>", "seg_*: per (chunk, value) counts / offsets, per value totals and segment starts"),
        ("perm", "read_write", "array<u32>", "seg_*: the index positions grouped by value, in increasing order"),
    ],
    entries={"gather": ("out", "a", "idx"), "scatter_add": ("out", "a", "idx"),
             "seg_count": ("idx", "seg"), "seg_total": ("seg",), "seg_offsets": ("seg",),
             "seg_place": ("idx", "seg", "perm"),
             "seg_sum": ("out", "a", "seg", "perm")},
    overrides=[],
)

# -- norm.wgsl ----------------------------------------------------------------------------------------------
NORM = KernelFile(
    "norm.wgsl",
    Layout(scalars=[
        ("ROWS", "rows (normalised groups)"),
        ("N", "elements per row"),
        ("EPS", "epsilon (f32 bits)"),
        ("OFFSET_X", "element offset of x"),
        ("OFFSET_Y", "element offset of y (forward) or dx (backward)"),
        ("OFFSET_W", "element offset of the weight"),
        ("OFFSET_B", "element offset of the bias"),
        ("OFFSET_MEAN", "element offset of the mean"),
        ("OFFSET_RSTD", "element offset of the rstd"),
        ("OFFSET_DY", "element offset of dy"),
        ("OFFSET_GX", "element offset of gx (dy * xhat, for the weight gradient)"),
        ("BN_NB", "batch norm: the batch"), ("BN_C", "batch norm: channels"),
        ("BN_S", "batch norm: elements per channel and sample"), ("OFFSET_SV", "offset of sv"),
        ("BN_CHUNK", "batch norm: elements per chunk"), ("BN_CHUNKS", "chunks per channel"),
        ("OFFSET_Z", "batch norm: element offset of zo"),
        ("OFFSET_LABELS", "cross-entropy: element offset of the labels"),
        ("OFFSET_STATS", "cross-entropy: element offset of the row stats (gx / coef)"),
        ("IGNORE", "cross-entropy: the ignored label (i32 bits)"),
        ("SMOOTH", "cross-entropy: label smoothing (f32 bits)"),
        ("G_STRIDE", "cross-entropy backward: dy's row stride (0: one value broadcast)"),
    ], arrays=[]),
    slots=[
        ("x", "read", "array<S>", "x, rows of N (dense)"),
        ("y", "read_write", "array<S>", "forward: y; backward: dx (dense, x's shape)"),
        ("w", "read", "array<S>", "the weight (N,) (HAS_W)"),
        ("b", "read", "array<S>", "the bias (N,) (HAS_B)"),
        ("mean", "read_write", "array<S>", "forward: the mean of each row (not RMS)"),
        ("rstd", "read_write", "array<S>", "forward: 1 / sqrt(var + eps) of each row"),
        ("mean_in", "read", "array<S>", "backward: the forward's mean (not RMS)"),
        ("rstd_in", "read", "array<S>", "backward: the forward's rstd"),
        ("dy", "read", "array<S>", "backward: the output gradient (dense)"),
        ("gx", "read_write", "array<f32>", "backward: dy * xhat (HAS_W), summed over rows after; "
                                           "batch norm: partial sums, then coefficients"),
        ("sv", "read", "array<S>", "batch norm backward: what act's backward reads (y or z)"),
        ("zo", "read_write", "array<S>", "batch norm: z = the pre-activation (WRITE_Z)"),
        ("coef", "read", "array<f32>", "batch norm backward: the forward's gx (mean, rstd); "
                                        "cross-entropy backward: the row stats"),
        ("labels", "read", "array<i32>", "cross-entropy: one label per row"),
    ],
    entries={"layer_norm": ("x", "y", "w", "b", "mean", "rstd"),
             "layer_norm_bwd": ("x", "y", "w", "mean_in", "rstd_in", "dy", "gx"),
             "bn_stats": ("x", "gx", "dy", "sv", "coef"), "bn_apply": ("x", "gx", "y", "zo"),
             "bn_finalize": ("x", "gx", "w", "b", "mean_in", "rstd_in", "coef"),
             "bn_bwd_dx": ("x", "gx", "y", "dy", "sv", "coef"),
             "xent": ("x", "y", "gx", "labels"), "xent_bwd": ("x", "y", "dy", "coef", "labels")},
    overrides=[
        ("RMS", "bool", "false", "RMSNorm: no mean"),
        ("HAS_W", "bool", "false", "a weight"),
        ("HAS_B", "bool", "false", "a bias"),
        ("LANES", "u32", "256u", "invocations per row: 1, 32 or WG (launch_norm.lanes)"),
        ("ACT", "u32", "0u", "batch norm: the activation (ACT_*)"), ("WRITE_Z", "bool", "false", ""),
        ("TRAIN", "bool", "false", "batch statistics"), ("BWD", "bool", "false", "the backward"),
        ("SMOOTHING", "bool", "false", "cross-entropy: label smoothing (its sum of x)"),
    ],
)

# -- conv.wgsl -----------------------------------------------------------------------------------------------
# the shape words conv.wgsl divides by; with SPEC they are override constants as well
CONV_SHAPE_WORDS = ("C", "H", "W", "KH", "KW", "SH", "SW", "PH", "PW", "DH", "DW", "OH", "OW")

CONV = KernelFile(
    "conv.wgsl",
    Layout(scalars=[
        ("N", "elements of the output"),
        ("C", "channels"), ("H", "input height"), ("W", "input width"),
        ("KH", "kernel height"), ("KW", "kernel width"),
        ("SH", "stride along h"), ("SW", "stride along w"),
        ("PH", "padding along h"), ("PW", "padding along w"),
        ("DH", "dilation along h"), ("DW", "dilation along w"),
        ("OH", "output height"), ("OW", "output width"),
        ("PAD", "im2col: the value read in the padding (f32 bits)"),
        ("OFFSET_IN", "element offset of the input"),
        ("OFFSET_OUT", "element offset of the output"),
        ("OFFSET_IDX", "max pooling: element offset of idx"),
    ], arrays=[]),
    slots=[
        ("out", "read_write", "array<S>", "im2col: the columns; col2im: (N, C, H, W); maxpool: y"),
        ("a", "read", "array<S>", "im2col, maxpool: x; col2im: the columns; maxpool_bwd: dy"),
        ("idx", "read_write", "array<i32>", "max pooling: the argmax (h * W + w), like y"),
    ],
    entries={"im2col": ("out", "a"), "col2im": ("out", "a"), "maxpool": ("out", "a", "idx"),
             "maxpool_bwd": ("out", "a", "idx"), "maxpool_bwd_tiles": ("out", "a", "idx")},
    overrides=[("CN", "bool", "false", "columns laid out (C*KH*KW, N*OH*OW)"),
               ("SPEC", "bool", "false", "the shape words are also the constants K_* (GPU adapters)")]
    + [(f"K_{n}", "u32", "1u", f"with SPEC: word {n}") for n in CONV_SHAPE_WORDS]
    + [("K_NB", "u32", "1u", "with SPEC: the batch size")],
)

# -- attention.wgsl --------------------------------------------------------------------------------------------
ATTN_MAX_D = 128                 # head dims the attention kernels hold (4 groups of 4 dims x NL lanes)

# the strided operands and results of the attention kernels, each described by four words
# (element offset, two batch strides, row stride; launch_attention.role_words): a head of a fused
# projection is read where it lies, results are written where the heads' merge makes them a view
ATTN_ROLES = (("Q", "q"), ("K", "k"), ("V", "v"), ("DO", "dout"), ("OUT", "out_in"),
              ("RES", "out, dq or dk in res"), ("RESV", "attn_bwd_dkv: dv in res"))

ATTENTION = KernelFile(
    "attention.wgsl",
    Layout(scalars=[
        ("B", "batches (the product of the batch dims)"),
        ("ROWS", "attn_bwd_prep: query rows (B*TQ)"),
        ("TQ", "queries per batch"),
        ("TK", "keys per batch"),
        ("D", "head dim of q and k"),
        ("DV", "head dim of v"),
        ("SCALE", "the score scale (f32 bits)"),
        ("J0", "first key (attn_bwd_dkv: query) of this dispatch's chunk (a multiple of the tile)"),
        ("J1", "end of the chunk"),
        ("FIRST", "1 for the first chunk: the running state starts empty"),
        ("LAST", "1 for the last chunk, which writes the results instead of the state"),
        ("MASK_NB", "dims of MASK_BSHAPE"),
        ("MASK_SQ", "mask stride along the queries"),
        ("MASK_SK", "mask stride along the keys"),
        ("OFFSET_MASK", "element offset of the mask"),
        ("ST2", "vec4 offset in st of attn_fwd's (max, sum) per row, attn_bwd_dkv's dv sums"),
        ("HN", "the last batch dim: matrix b of a role starts at (b / HN) L0 + (b % HN) L1"),
    ] + [(f"{role}_{w}", f"{doc}: {wdoc}") for role, doc in ATTN_ROLES for w, wdoc in (
        ("OFF", "element offset in its binding"), ("L0", "stride of b / HN"),
        ("L1", "stride of b % HN"), ("LR", "row stride"))], arrays=[
        ("MASK_BSHAPE", "the batch shape (coalesced with the mask's strides)"),
        ("MASK_BSTRIDES", "mask strides along the batch dims (0: broadcast)"),
    ]),
    slots=[
        ("q", "read", "array<vec4<S>>", "q (B, TQ, D), rows at Q_*"),
        ("k", "read", "array<vec4<S>>", "k (B, TK, D), rows at K_*"),
        ("v", "read", "array<vec4<S>>", "v (B, TK, DV), rows at V_*"),
        ("mask", "read", "array<S>", "the additive mask (HAS_MASK), strided"),
        ("dout", "read", "array<vec4<S>>", "backward: the output gradient (B, TQ, DV), rows at DO_*"),
        ("res", "read_write", "array<S>", "the result: out (B, TQ, DV); dq (B, TQ, D); dk (B, TK, D) (rows at RES_*) and dv (B, TK, DV) (rows at RESV_*)"),
        ("lse", "read_write", "array<f32>", "forward: the log-sum-exp of each score row (B, TQ)"),
        ("st", "read_write", "array<vec4<f32>>", "the running state per row between chunks (head dims padded to vec4s): out * l, then (max, sum) from ST2; dq / scale; dk / scale, then dv from ST2"),
        ("out_in", "read", "array<S>", "backward: the forward's output, rows at OUT_* (read-only: dout may share its buffer)"),
        ("lse_in", "read", "array<f32>", "backward: the forward's log-sum-exp"),
        ("ld", "read_write", "array<f32>", "backward: (lse, delta = sum(dout * out)) per query row"),
    ],
    entries={"attn_fwd": ("q", "k", "v", "mask", "dout", "res", "lse", "st"),
             "attn_bwd_prep": ("dout", "out_in", "lse_in", "ld"),
             "attn_bwd_dq": ("q", "k", "v", "mask", "dout", "ld", "st", "res"),
             "attn_bwd_dkv": ("q", "k", "v", "mask", "dout", "ld", "st", "res")},
    overrides=[
        ("HAS_MASK", "bool", "false", "add the mask (a float mask; bool masks arrive as 0 / -inf)"),
        ("CAUSAL", "bool", "false", "query i sees keys 0..i (torch's is_causal)"),
        ("VEC", "bool", "false", "q, k, v, dout read a vec4 at a time (D and DV multiples of 4)"),
        ("NRG", "u32", "8u", "row groups of 4 rows per workgroup (launch_attention.tiles)"),
        ("NL", "u32", "4u", "invocations (lanes) per row group"),
        ("SK", "u32", "4u", "columns per lane of a tile (<= 16)"),
        ("D4", "u32", "16u", "vec4s of a q / k row"),
        ("DV4", "u32", "16u", "vec4s of a v / dout row"),
        ("KP", "u32", "17u", "vec4s per row of a q / k tile (padded)"),
        ("VP", "u32", "17u", "vec4s per row of a v / dout tile (padded)"),
        ("PS", "u32", "10u", "vec4s per column of the exchanged block P (padded)"),
        ("B0", "u32", "272u", "attn_bwd_dkv: the first vec4 of tile B (q)"),
        ("P0", "u32", "544u", "the first vec4 of P"),
        ("R0", "u32", "704u", "the row-max exchange (attn_fwd), the columns' (lse, delta) (attn_bwd_dkv)"),
        ("TILE", "u32", "736u", "vec4s of workgroup memory"),
        ("PREP_LANES", "u32", "16u", "attn_bwd_prep: invocations a query row (a divisor of WG)"),
    ],
)

# -- optim.wgsl ------------------------------------------------------------------------------------------------
OPTIM = KernelFile(
    "optim.wgsl",
    Layout(scalars=[
        ("N", "elements of the parameter"),
        ("OFFSET_P", "element offset of p (and of g, m, v: dense like it)"),
        ("OFFSET_G", "element offset of g"),
        ("OFFSET_M", "element offset of m"),
        ("OFFSET_V", "element offset of v"),
        ("F", "weight decay (f32 bits): 1 - lr wd (DECAY_DECOUPLED) or wd (DECAY_L2, sgd)"),
        ("W", "the lerp weight 1 - beta1 (f32 bits)"),
        ("W1", "1 - W, the second lerp form's weight (f32 bits)"),
        ("B2", "beta2 (f32 bits)"),
        ("W2", "1 - beta2 (f32 bits)"),
        ("EPS", "epsilon (f32 bits)"),
        ("STEP_SIZE", "lr / (1 - beta1^t) (f32 bits; not DEV)"),
        ("BC2_SQRT", "sqrt(1 - beta2^t) (f32 bits; not DEV)"),
        ("LR", "DEV, sgd: the learning rate (f32 bits)"),
        ("LN_B1", "DEV: ln(beta1) (f32 bits)"),
        ("LN_B2", "DEV: ln(beta2) (f32 bits)"),
        ("OFFSET_STEP", "DEV: element offset of the step count t in dstep"),
        ("MOM", "sgd: the momentum (f32 bits)"),
        ("DAMP1", "sgd: 1 - dampening (f32 bits)"),
    ], arrays=[]),
    slots=[
        ("p", "read", "array<f32>", "the parameter (dense)"),
        ("g", "read", "array<f32>", "its gradient"),
        ("m", "read", "array<f32>", "the first moment (not FIRST); sgd: the momentum buffer"),
        ("v", "read", "array<f32>", "the second moment (not FIRST)"),
        ("po", "read_write", "array<f32>", "the updated parameter"),
        ("mo", "read_write", "array<f32>", "the updated first moment; sgd: momentum buffer"),
        ("vo", "read_write", "array<f32>", "the updated second moment"),
        ("dstep", "read", "array<f32>", "DEV: the step count t, kept on the device"),
    ],
    entries={"adam": ("p", "g", "m", "v", "po", "mo", "vo", "dstep"),
             "sgd": ("p", "g", "m", "po", "mo")},
    overrides=[
        ("DECAY", "u32", "0u", "weight decay: DECAY_NONE, DECAY_L2 (g += p F), DECAY_DECOUPLED (p F)"),
        ("FIRST", "bool", "false", "no moments yet (they stand at 0)"),
        ("DEV", "bool", "false", "t is read from dstep; the bias corrections computed here in f32"),
        ("LERP_HI", "bool", "false", "W >= 0.5: m = g - (g - m) W1 (torch.lerp's second form)"),
        ("MAXIMIZE", "bool", "false", "sgd: g = -g first"),
        ("WD", "bool", "false", "sgd: g = g + p F"),
        ("MOMENTUM", "bool", "false", "sgd: a momentum buffer (m in, mo out; FIRST: none yet)"),
        ("DAMP", "bool", "false", "sgd: the gradient's share in the buffer times DAMP1"),
        ("NESTEROV", "bool", "false", "sgd: g = g + buf MOM (else g = buf)"),
    ],
    codes={"DECAY": ("none", "l2", "decoupled")},
)

KERNELS = {k.name: k for k in (ELEMENTWISE, REDUCE, MATMUL, MATMUL_SG, INDEX, NORM, CONV, ATTENTION,
                                                OPTIM)}
# kernel files whose entry points are generated per call (codegen_fused.py), not in the file
GENERATED = {FUSED.name: FUSED}
