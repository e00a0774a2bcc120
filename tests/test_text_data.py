"""The GPT demo's character corpus (CPython's stdlib sources): vocabulary, splits, batches."""
import os
import random
import sysconfig

import pytest

import numr_web as nr
from numr_web.data import text as td


def test_vocab_round_trip_and_unknowns():
    v = td.CharVocab()
    assert len(v) == v.size == 96 and v.chars[0] == "\n" and v.chars[1:] == "".join(
        map(chr, range(32, 127)))
    s = "def f(x):\n    return x ** 2  # ok ~{}|\n"
    ids = v.encode(s)
    assert ids.typecode == "i" and v.decode(ids) == s and max(ids) < 96
    assert v.decode(v.encode("a\tb é")) == "a b ?"
    custom = td.CharVocab("ab?")
    assert list(custom.encode("abcé")) == [0, 1, 2, 2]
    assert custom.decode(nr.tensor([1, 0])) == "ba"


def test_stdlib_sources_are_the_installed_files():
    texts = td.stdlib_texts(("argparse", "heapq"))
    lib = sysconfig.get_paths()["stdlib"]
    for name, src in texts:
        with open(os.path.join(lib, name + ".py"), encoding="utf-8") as f:
            assert src == f.read()
    with pytest.raises(nr.NumrError, match="not installed"):
        td.stdlib_texts(("numr_no_such_module",))


def test_split_takes_the_tail_of_every_text():
    a, b = "x = 1\n" * 50, "y = 22\n" * 40
    train, val = td.split_texts([a, b], val_fraction=0.1)
    assert train + val != a + b and len(train) + len(val) == len(a) + len(b)
    assert train == a[:270] + b[:252] and val == a[270:] + b[252:]


def test_corpus_tensors_and_batches(device):
    text = "".join(f"line {i}\n" for i in range(400))
    c = td.char_corpus(device=device, text=text)
    assert c.train.dtype == nr.int32 and c.train.device == device
    assert c.train.shape == (len(c.train_ids),) and c.val.shape == (len(c.val_ids),)
    assert c.vocab.decode(c.train[:12]) == text[:12] and c.vocab.decode(c.val_ids) + "" in text
    x, y = c.batch("train", 3, 16, random.Random(5))
    assert x.shape == y.shape == (3, 16) and x.dtype == nr.int32 and x.device == device
    xs, ys = x.tolist(), y.tolist()
    host = list(c.train_ids)
    for row, nxt in zip(xs, ys):
        assert row[1:] == nxt[:-1]
        o = next(i for i in range(len(host)) if host[i:i + 16] == row)
        assert host[o + 1:o + 17] == nxt
    assert c.batch("train", 3, 16, random.Random(5))[0].tolist() == xs
    with pytest.raises(nr.NumrError, match="too few"):
        c.batch("val", 1, 10_000, random.Random(0))


def test_default_corpus_size():
    c = td.char_corpus()
    n = len(c.train_ids) + len(c.val_ids)
    assert 700_000 < n < 1_500_000 and 0.08 < len(c.val_ids) / n < 0.12
