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

META_WORDS = 64                  # u32 words of metadata per dispatch
META_BYTES = 4 * META_WORDS      # a multiple of every minUniformBufferOffsetAlignment (<= 256)
MAXD = 8                         # dims per shape / stride array in the metadata
WG = 256                         # invocations per workgroup of the 1-D kernels
MAX_GROUPS = 65535               # workgroups per dispatch dimension (WebGPU's minimum limit)
WORD_PREFIX = "W_"               # WGSL name of metadata word X: W_X
META_BINDING = 0                 # @binding of the metadata block; storage bindings follow it


class Layout:
    """Named word offsets of one kernel file's metadata block: `layout.N` is the index of word N,
    `layout.SHAPE` the first of the MAXD words of array SHAPE."""

    def __init__(self, scalars, arrays):
        self.fields = []                     # (name, first word, words, doc)
        word = 0
        for name, doc in scalars:
            self.fields.append((name, word, 1, doc))
            word += 1
        word = -(-word // 4) * 4             # arrays start on a vec4 boundary
        for name, doc in arrays:
            self.fields.append((name, word, MAXD, doc))
            word += MAXD
        if word > META_WORDS:
            raise ValueError(f"metadata layout needs {word} words, more than {META_WORDS}")
        self.words_used = word
        for name, first, _, _ in self.fields:
            if hasattr(self, name):
                raise ValueError(f"metadata word {name} declared twice")
            setattr(self, name, first)

    def new(self):
        """A zeroed metadata block (a list of META_WORDS ints) to fill by name."""
        return [0] * META_WORDS


class Slot:
    """One storage binding of a kernel file."""
    __slots__ = ("name", "index", "access", "type", "doc")

    def __init__(self, name, index, access, type_, doc):
        self.name, self.index, self.access, self.type, self.doc = name, index, access, type_, doc


class KernelFile:
    def __init__(self, name, layout, slots, entries, overrides, codes=None, vocabulary=False,
                 includes=(), features=()):
        self.name = name
        self.includes = tuple(includes)   # kernel files whose text precedes this one in the module
        self.features = tuple(features)   # adapter features the module needs ("subgroup")
        self.layout = layout
        self.slots = {}
        for i, (sname, access, type_, doc) in enumerate(slots, META_BINDING + 1):
            if access not in ("read", "read_write"):
                raise ValueError(f"{name}: binding {sname}: access must be read or read_write")
            self.slots[sname] = Slot(sname, i, access, type_, doc)
        for entry, used in entries.items():
            unknown = [s for s in used if s not in self.slots]
            if unknown:
                raise ValueError(f"{name}: entry {entry} uses undeclared bindings {unknown}")
        self.entries = {e: tuple(used) for e, used in entries.items()}
        self.overrides = {n: (t, d, doc) for n, t, d, doc in overrides}   # name -> (type, default, doc)
        self.codes = {g: tuple(names) for g, names in (codes or {}).items()}
        self.vocabulary = vocabulary   # gets the generated op dispatch (unop, binop, cmpop)

    def code(self, group, name):
        """The value of named code `name` of `group` (e.g. code("REDUCE", "mean"))."""
        return self.codes[group].index(name)

    def code_name(self, group, name):
        return f"{group}_{name.upper()}"


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
    vocabulary=True,
)

# -- reduce.wgsl ----------------------------------------------------------------------------------------
REDUCE_OPS = ("sum", "mean", "max", "min")

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
    ],
    entries={
        "reduce_thread": ("out", "a"), "reduce_wg": ("out", "a"),
        "argmax_thread": ("outi", "a"), "argmax_wg": ("outi", "a"),
        "softmax_thread": ("out", "a"), "softmax_wg": ("out", "a"),
    },
    overrides=[
        ("OP", "u32", "0u", "reduce: REDUCE_*; softmax: SOFTMAX_*"),
    ],
    codes={"REDUCE": REDUCE_OPS, "SOFTMAX": ("plain", "log")},
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

KERNELS = {k.name: k for k in (ELEMENTWISE, REDUCE, MATMUL, MATMUL_SG)}
