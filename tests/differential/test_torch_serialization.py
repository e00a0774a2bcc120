"""numr_web.torch.save / load: state dicts and checkpoints round-trip with the structure torch's
round trip gives (OrderedDict, int keys, tuples, numbers), as safetensors files other tools read;
whole objects are pickled and loaded under torch's weights-only rules."""
import collections
import io
import math
import pickle

import numpy as np
import pytest
import torch
from safetensors.torch import load_file, save_file

import numr_web as nr
import numr_web.torch as ntorch


class Net(ntorch.nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = ntorch.nn.Linear(3, 2)
        self.emb = ntorch.nn.Embedding(5, 3)


def _same_structure(a, b, path="obj"):
    assert type(a).__name__ == type(b).__name__ or (isinstance(a, dict) and isinstance(b, dict)), \
        (path, type(a), type(b))
    if isinstance(a, dict):
        assert list(a) == list(b), path
        for k in a:
            _same_structure(a[k], b[k], f"{path}[{k!r}]")
    elif isinstance(a, (list, tuple)):
        assert len(a) == len(b), path
        for i, (x, y) in enumerate(zip(a, b)):
            _same_structure(x, y, f"{path}[{i}]")
    elif hasattr(a, "tolist"):
        np.testing.assert_allclose(np.asarray(a.tolist()), np.asarray(b.tolist()), rtol=1e-6,
                                   atol=1e-7, err_msg=path)      # float32 steps: ulp apart
    elif isinstance(a, float) and math.isnan(a):
        assert math.isnan(b), path
    else:
        assert a == b, path


def test_state_dict_file_is_safetensors(tmp_path):
    m = Net()
    path = tmp_path / "model.pt"
    ntorch.save(m.state_dict(), path)
    theirs = load_file(str(path))                       # the safetensors library reads it
    assert set(theirs) == set(m.state_dict())
    for k, v in m.state_dict().items():
        np.testing.assert_array_equal(theirs[k].numpy(), v.numpy())
    loaded = ntorch.load(path)
    assert isinstance(loaded, collections.OrderedDict) and list(loaded) == list(m.state_dict())
    m2 = Net()
    m2.load_state_dict(loaded)
    assert all(np.array_equal(a.numpy(), b.numpy()) for a, b in
               zip(m.state_dict().values(), m2.state_dict().values()))
    assert set(nr.load(path)) == set(m.state_dict())


def test_loads_a_file_written_by_safetensors(tmp_path):
    path = str(tmp_path / "w.safetensors")
    save_file({"w": torch.arange(6.0).reshape(2, 3), "i": torch.tensor([1, -2], dtype=torch.long)},
              path)
    d = ntorch.load(path)
    assert d["w"].tolist() == [[0.0, 1.0, 2.0], [3.0, 4.0, 5.0]]
    assert d["i"].tolist() == [1, -2] and d["i"].dtype == ntorch.long


def _checkpoint(lib, model, opt):
    return {"model": model.state_dict(), "optimizer": opt.state_dict(), "iter_num": 3,
            "best_val_loss": 1.5, "config": {"n_layer": 2, "name": "gpt", "flags": (True, None),
                                             "lrs": [0.1, math.inf, math.nan]}}


def test_checkpoint_round_trip_has_torch_structure(tmp_path):
    ours, theirs = Net(), torch.nn.Module()
    theirs.fc, theirs.emb = torch.nn.Linear(3, 2), torch.nn.Embedding(5, 3)
    theirs.load_state_dict({k: torch.tensor(v.numpy()) for k, v in ours.state_dict().items()})
    opt = ntorch.optim.AdamW(ours.parameters(), lr=0.1)
    topt = torch.optim.AdamW(theirs.parameters(), lr=0.1)
    x = np.random.default_rng(0).standard_normal((4, 3)).astype(np.float32)
    for model, o, lib in ((ours, opt, ntorch), (theirs, topt, torch)):
        for _ in range(2):
            o.zero_grad()
            model.fc(lib.tensor(x)).pow(2).sum().backward()
            o.step()
    ntorch.save(_checkpoint(ntorch, ours, opt), tmp_path / "ckpt.pt")
    torch.save(_checkpoint(torch, theirs, topt), tmp_path / "ref.pt")
    got, ref = ntorch.load(tmp_path / "ckpt.pt"), torch.load(tmp_path / "ref.pt")
    ref["optimizer"]["state"] = {k: {n: (v if n != "step" else int(v.item())) for n, v in s.items()}
                                 for k, s in ref["optimizer"]["state"].items()}
    ours_group = got["optimizer"]["param_groups"][0]      # torch has more options; ours in order
    ref["optimizer"]["param_groups"][0] = {k: ref["optimizer"]["param_groups"][0][k]
                                           for k in ours_group}
    _same_structure(got, ref)
    # training continues from the checkpoint as it would have without saving
    m2 = Net()
    m2.load_state_dict(got["model"])
    o2 = ntorch.optim.AdamW(m2.parameters(), lr=0.1)
    o2.load_state_dict(got["optimizer"])
    for model, o in ((ours, opt), (m2, o2)):
        o.zero_grad()
        model.fc(ntorch.tensor(x)).pow(2).sum().backward()
        o.step()
    assert m2.fc.weight.tolist() == ours.fc.weight.tolist()


def test_whole_objects_are_pickled_and_loaded_weights_only(tmp_path):
    m = Net()
    path = tmp_path / "whole.pt"
    ntorch.save(m, path)
    with pytest.raises(pickle.UnpicklingError, match="Net") as e:
        ntorch.load(path)
    assert isinstance(e.value, nr.NumrError) and "safe_globals" in str(e.value)
    with ntorch.serialization.safe_globals([Net, ntorch.nn.Linear, ntorch.nn.Embedding]):
        m2 = ntorch.load(path)
    assert type(m2) is Net and m2.fc.weight.tolist() == m.fc.weight.tolist()
    assert m2.fc.weight.requires_grad and isinstance(m2.fc.weight, ntorch.nn.Parameter)
    m3 = ntorch.load(path, weights_only=False)
    assert m3.emb.weight.tolist() == m.emb.weight.tolist()
    ntorch.serialization.add_safe_globals([Net, ntorch.nn.Linear, ntorch.nn.Embedding])
    try:
        assert type(ntorch.load(path)) is Net
    finally:
        ntorch.serialization.clear_safe_globals()


def test_map_location_and_file_objects(device):
    buf = io.BytesIO()
    ntorch.save({"w": ntorch.ones(2, 2), "step": 4}, buf)
    buf.seek(0)
    d = ntorch.load(buf, map_location=ntorch.device(device))
    assert d["w"].device == device and d["step"] == 4
    buf = io.BytesIO()
    ntorch.save([ntorch.ones(2), Net()], buf)            # not a tree of plain values: pickled
    buf.seek(0)
    objs = ntorch.load(buf, map_location=device, weights_only=False)
    assert objs[0].device == device and objs[1].fc.weight.device == device
    with pytest.raises(nr.UnsupportedError):
        ntorch.load(b"\x00" * 16)
    with pytest.raises(nr.UnsupportedError):
        ntorch.load(io.BytesIO(buf.getvalue()), map_location=lambda s, loc: s)


def test_pytorch_zip_checkpoints_are_refused_with_what_to_do(tmp_path):
    torch.save({"w": torch.ones(2)}, tmp_path / "torch.pt")
    with pytest.raises(nr.UnsupportedError, match="safetensors"):
        ntorch.load(tmp_path / "torch.pt")
