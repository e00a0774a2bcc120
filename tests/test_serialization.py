"""nr.save / nr.load against the reference safetensors library (a dev-only dependency): files are
byte-identical to the library's, load bit-exactly both ways, and bad files raise typed errors."""
import asyncio
import io
import struct

import numpy as np
import pytest

import numr_web as nr
from numr_web import nn, serialization

import safetensors.numpy as st_np


def _arrays(device):
    rng = np.random.default_rng(0)
    special = np.array([np.nan, np.inf, -np.inf, -0.0, 1e-45, 65504.0], np.float32)
    out = {
        "w.f32": np.concatenate([rng.standard_normal(10).astype(np.float32), special]),
        "b.f16": rng.standard_normal((3, 2)).astype(np.float16),
        "c.i32": np.array([[-2 ** 31, 2 ** 31 - 1, 0]], np.int32),
        "m.bool": np.array([True, False, True]),
        "scalar": np.array(1.5, np.float32),
        "empty": np.zeros((0, 3), np.float32),
        "é/unicode": np.arange(4, dtype=np.int32),
    }
    if device != "webgpu":                   # WGSL has no float64
        out["a.f64"] = rng.standard_normal((2, 3))
    return out


def _bits(a):
    return np.ascontiguousarray(a).tobytes()


def test_files_are_byte_identical_to_the_reference(device):
    arrays = _arrays(device)
    sd = {k: nr.tensor(v, device=device) for k, v in arrays.items()}
    sd["t.transposed"] = nr.tensor(np.arange(6, dtype=np.float32).reshape(2, 3), device=device).T
    # the reference writes a transposed numpy array in memory order; C order is what it means
    arrays["t.transposed"] = np.ascontiguousarray(np.arange(6, dtype=np.float32).reshape(2, 3).T)
    ours = nr.save_bytes(sd, metadata={"format": "pt"})
    assert ours == st_np.save(arrays, metadata={"format": "pt"})
    assert nr.save_bytes({}) == st_np.save({})
    assert asyncio.run(nr.save_bytes_async(sd, metadata={"format": "pt"})) == ours


def test_reference_files_load_bit_exactly(device):
    arrays = _arrays(device)
    back = nr.load(st_np.save(arrays), device=device)
    assert set(back) == set(arrays)
    for k, a in arrays.items():
        t = back[k]
        assert t.device == device and t.shape == a.shape and t.dtype.name == str(a.dtype)
        assert _bits(t.numpy()) == _bits(a), k


def test_paths_files_and_metadata(tmp_path):
    sd = {"x": nr.tensor([1.0, 2.0])}
    nr.save(sd, tmp_path / "a.safetensors", metadata={"step": "3"})
    f = io.BytesIO()
    nr.save(sd, f, metadata={"step": "3"})
    raw = (tmp_path / "a.safetensors").read_bytes()
    assert f.getvalue() == raw
    for src in (tmp_path / "a.safetensors", str(tmp_path / "a.safetensors"), raw, bytearray(raw),
                memoryview(raw), io.BytesIO(raw)):
        assert nr.load(src)["x"].tolist() == [1.0, 2.0]
    assert serialization.load_metadata(raw) == {"step": "3"}
    assert st_np.load_file(str(tmp_path / "a.safetensors"))["x"].tolist() == [1.0, 2.0]


def test_wider_and_narrower_dtypes_convert():
    import torch
    from safetensors.torch import save
    ints = {"i64": torch.tensor([-5, 2 ** 31 - 1]),
            "u8": torch.tensor([0, 255], dtype=torch.uint8),
            "i16": torch.tensor([-300], dtype=torch.int16),
            "i8": torch.tensor([-7], dtype=torch.int8)}
    back = nr.load(save(ints))
    for k, v in ints.items():
        assert back[k].dtype == nr.int32 and back[k].tolist() == v.tolist()
    bf = torch.tensor([1.5, -3.1415, 1e30, float("nan")]).to(torch.bfloat16)
    got = nr.load(save({"bf": bf}))["bf"]
    assert got.dtype == nr.float32 and _bits(got.numpy()) == _bits(bf.float().numpy())
    with pytest.raises(nr.DTypeError, match="outside int32"):
        nr.load(save({"big": torch.tensor([2 ** 40])}))
    with pytest.raises(nr.DTypeError, match="F8_E4M3"):
        nr.load(save({"f8": torch.zeros(2, dtype=torch.float8_e4m3fn)}))
    f64 = nr.load(st_np.save({"d": np.array([0.1, 1e300])}), dtype="float32")["d"]
    assert f64.dtype == nr.float32 and _bits(f64.numpy()) == _bits(np.float32([0.1, np.inf]))
    f16 = nr.load(st_np.save({"d": np.array([0.1, 1e5])}), dtype="float16")["d"]
    assert _bits(f16.numpy()) == _bits(np.float16([0.1, np.inf]))


def test_bad_files_raise_typed_errors():
    good = nr.save_bytes({"a": nr.ones(2), "b": nr.zeros(1)})
    n = struct.unpack("<Q", good[:8])[0]
    header = good[8:8 + n]
    cases = [
        (good[:5], "shorter"),
        (good[:-1], "cover"),
        (struct.pack("<Q", 10 ** 9) + good[8:], "header length"),
        (good[:8] + b"[" + header[1:] + good[8 + n:], "not JSON"),
        (good[:8] + header.replace(b"[0,8]", b"[0,4]") + good[8 + n:], "do not hold"),
        (good[:8] + header.replace(b"[8,12]", b"[9,13]").replace(b"[0,8]", b"[1,9]")
         + good[8 + n:], "hole"),
    ]
    for data, match in cases:
        with pytest.raises(nr.NumrError, match=match):
            nr.load(data)
    with pytest.raises(nr.DTypeError, match="Tensors"):
        nr.save_bytes({"a": [1.0]})
    with pytest.raises(nr.NumrError, match="str to str"):
        nr.save_bytes({"a": nr.ones(1)}, metadata={"a": 1})


def test_a_model_checkpoint_loads_into_torch(tmp_path):
    import torch
    from safetensors.torch import load_file, save_file
    ours = nn.Sequential(nn.Linear(5, 7), nn.GELU(), nn.Linear(7, 2, bias=False))
    ref = torch.nn.Sequential(torch.nn.Linear(5, 7), torch.nn.GELU(),
                              torch.nn.Linear(7, 2, bias=False))
    nr.save(ours.state_dict(), tmp_path / "m.safetensors")
    ref.load_state_dict(load_file(str(tmp_path / "m.safetensors")))
    x = np.random.default_rng(0).standard_normal((3, 5)).astype(np.float32)
    np.testing.assert_allclose(ours(nr.tensor(x)).numpy(), ref(torch.from_numpy(x)).detach(),
                               rtol=1e-5, atol=1e-6)
    save_file(torch.nn.Linear(5, 7).state_dict(), str(tmp_path / "t.safetensors"))
    ours[0].load_state_dict(nr.load(tmp_path / "t.safetensors"))
