"""A character-level text corpus for the GPT demo: CPython's own standard-library sources.

Why this corpus: it is on every machine that runs Python, the browser's Pyodide included (its
stdlib ships as .py sources), so nothing is downloaded or bundled (the wheel stays small, and the
PSF-licensed text is read where the user already has it, not redistributed). Source code is also a
friendly target for a small model: a GPT that fits the CPU time budget learns it to a low loss.

The modules below exist, with similar contents, from CPython 3.10 to 3.14 (Pyodide's too), so
losses are comparable across runtimes though not identical (the files change between versions).
The vocabulary is fixed (newline + printable ASCII, 96 symbols), so a checkpoint trained on one
Python samples on another; the rare other characters become '?' (tabs become spaces).
Pass your own text instead with char_corpus(text=...). No numpy: token ids are array.array('i').
"""
from __future__ import annotations

import array
import importlib.util

from .. import tensor   # the public function (numr_web/__init__ does not import this module)
from ..errors import NumrError

STDLIB_MODULES = (
    "argparse", "difflib", "enum", "ipaddress", "pickle", "optparse", "dataclasses", "threading",
    "shutil", "configparser", "functools", "socket", "random", "tempfile", "contextlib",
    "calendar", "pprint", "heapq", "gettext", "base64", "textwrap", "csv", "shlex")
VOCAB = "\n" + "".join(chr(c) for c in range(32, 127))


class CharVocab:
    """Characters <-> token ids (ids are positions in `chars`; fewer than 256 symbols)."""

    def __init__(self, chars=VOCAB):
        if len(set(chars)) != len(chars) or len(chars) > 256:
            raise NumrError("a vocabulary is at most 256 distinct characters")
        self.chars = chars
        self._ids = {c: i for i, c in enumerate(chars)}
        unknown = self._ids.get("?", 0)
        table = [self._ids.get(chr(b), unknown) for b in range(256)]
        if "\t" not in self._ids and " " in self._ids:
            table[9] = self._ids[" "]
        self._table = bytes(table)

    def __len__(self):
        return len(self.chars)

    size = property(__len__)

    def encode(self, text):
        """str -> array('i') of ids (characters outside the vocabulary become '?')."""
        if all(ord(c) < 128 for c in self.chars):      # the fast path: bytes.translate
            raw = text.encode("ascii", "replace").translate(self._table)
            return array.array("i", array.array("B", raw))
        unknown = self._ids.get("?", 0)
        return array.array("i", [self._ids.get(c, unknown) for c in text])

    def decode(self, ids):
        """ids (ints, array, or an int Tensor) -> str."""
        if hasattr(ids, "tolist"):
            ids = ids.tolist()
        return "".join(self.chars[i] for i in ids)


def stdlib_texts(modules=STDLIB_MODULES):
    """[(module name, source text)] read from this Python's standard library (not imported)."""
    out = []
    for name in modules:
        spec = importlib.util.find_spec(name)
        source = None
        if spec is not None and spec.loader is not None and hasattr(spec.loader, "get_source"):
            try:
                source = spec.loader.get_source(name)
            except (ImportError, OSError):
                source = None
        if not source:
            raise NumrError(f"the source of the standard-library module {name!r} is not installed "
                            "here (some Python builds ship compiled .pyc files only); pass your "
                            "own text: char_corpus(text=...)")
        out.append((name, source))
    return out


def split_texts(texts, val_fraction=0.1):
    """(train, val) strings: each text's first part goes to train and its last `val_fraction`
    (from a line start) to val, so both splits sample every module."""
    train, val = [], []
    for text in texts:
        cut = int(len(text) * (1 - val_fraction))
        nl = text.find("\n", max(cut - 1, 0))       # move the cut to the next line start
        cut = nl + 1 if 0 <= nl < len(text) - 1 else cut
        train.append(text[:cut])
        val.append(text[cut:])
    return "".join(train), "".join(val)


class CharCorpus:
    """Token ids of a train and a val split: `train`/`val` int32 tensors on `device`, host copies
    `train_ids`/`val_ids` (array('i')), the `vocab`, and batch() for random windows."""

    def __init__(self, train_text, val_text, vocab=None, device=None):
        self.vocab = vocab or CharVocab()
        self.train_ids = self.vocab.encode(train_text)
        self.val_ids = self.vocab.encode(val_text)
        self.device = device
        self.train = tensor(self.train_ids, device=device)
        self.val = tensor(self.val_ids, device=device)

    def batch(self, split, batch_size, block_size, rng):
        """(x, y) int32 tensors of shape (batch_size, block_size): random windows of the split
        and the same windows shifted by one character. rng: a random.Random (reproducible)."""
        ids = self.train_ids if split == "train" else self.val_ids
        if len(ids) <= block_size + 1:
            raise NumrError(f"the {split} split has {len(ids)} tokens, too few for windows of "
                            f"{block_size} + 1")
        x, y = array.array("i"), array.array("i")
        for _ in range(batch_size):
            o = rng.randrange(len(ids) - block_size)
            x.extend(ids[o:o + block_size])
            y.extend(ids[o + 1:o + block_size + 1])
        shape = (batch_size, block_size)
        return (tensor(memoryview(x).cast("B").cast("i", shape), device=self.device),
                tensor(memoryview(y).cast("B").cast("i", shape), device=self.device))


def char_corpus(device=None, text=None, val_fraction=0.1):
    """The GPT demo's data: the standard-library corpus (or `text`), split and tokenised."""
    texts = [text] if text is not None else [src for _, src in stdlib_texts()]
    train, val = split_texts(texts, val_fraction)
    return CharCorpus(train, val, device=device)
