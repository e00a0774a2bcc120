"""How a kernel file's contract is declared (contract.py holds the declarations): the metadata block
of every dispatch (`Layout`: named u32 words and arrays of MAXD words), the storage bindings
(`Slot`), and a kernel file's entries, overrides and named codes (`KernelFile`). Pure Python."""
from __future__ import annotations

import struct

META_WORDS = 64                  # u32 words of metadata per dispatch
META_BYTES = 4 * META_WORDS      # a multiple of every minUniformBufferOffsetAlignment (<= 256)
MAXD = 8                         # dims per shape / stride array in the metadata
WG = 256                         # invocations per workgroup of the 1-D kernels
MAX_GROUPS = 65535               # workgroups per dispatch dimension (WebGPU's minimum limit)
WORD_PREFIX = "W_"               # WGSL name of metadata word X: W_X
META_BINDING = 0                 # @binding of the metadata block; storage bindings follow it


def f32_word(x):
    """A Python number as the metadata word a kernel reads with mf(): its float32 bits."""
    return struct.unpack("<I", struct.pack("<f", float(x)))[0]


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
                 includes=(), features=(), constants=()):
        self.name = name
        # u32 constants the shader and its launcher share: name -> (value, doc)
        self.constants = {n: (int(v), doc) for n, v, doc in constants}
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
