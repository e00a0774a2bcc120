"""nr.profile(): rows count the calls made, times nest and add up, bytes are the new memory, the
table is sorted, and a profile records only its own context."""
import asyncio
import math

import numpy as np
import pytest

import numr_web as nr
from numr_web import nn


def _rows(p):
    return {(r.name, r.kind): r for r in p.rows()}


def test_calls_and_bytes_of_known_ops(device):
    a = nr.tensor(np.arange(1000, dtype=np.float32), device=device)
    b = nr.tensor(np.ones(1000, np.float32), device=device)
    with nr.profile() as p:
        c = a + b
        d = c * b
        e = d + a
        e.reshape(10, 100)
        e.tolist()
    rows = _rows(p)
    assert rows[("add", "op")].calls == 2
    assert rows[("mul", "op")].calls == 1
    assert rows[("reshape", "op")].calls == 1
    assert rows[("readback", "scope")].calls == 1
    # two new float32 arrays of 1000 elements (a GPU pool hands out blocks of its size classes)
    if device == "cpu":
        assert rows[("add", "op")].bytes == 2 * 4000 and rows[("mul", "op")].bytes == 4000
    else:
        assert 2 * 4000 <= rows[("add", "op")].bytes <= 2 * 8192
        assert 4000 <= rows[("mul", "op")].bytes <= 8192
    assert rows[("reshape", "op")].bytes == 0          # a view of its input


def test_times_nest_and_add_up(device):
    x = nr.randn((32, 16), seed=0, device=device, requires_grad=True)
    w = nr.randn((16, 8), seed=1, device=device, requires_grad=True)
    opt = nn.optim.SGD([w], lr=0.1, momentum=0.9)
    with nr.profile() as p:
        with nr.record_function("forward"):
            y = nr.matmul_bias_activation(x, w, None, activation="tanh")
            loss = (y * y).sum()
        loss.backward()
        opt.step()
        loss.item()
    rows = _rows(p)
    t = p.totals()
    # self times are the totals less the children: over all rows they add up to the top level
    self_host = sum(r.self_host_ms for r in rows.values())
    assert math.isclose(self_host, t["host_ms"], rel_tol=1e-9, abs_tol=1e-9)
    assert t["host_ms"] <= t["wall_ms"]
    fwd = rows[("forward", "scope")]
    inside = rows[("matmul_bias_activation", "op")].host_ms      # called in the scope only
    assert fwd.host_ms - fwd.self_host_ms >= inside > 0
    assert rows[("SGD.step", "scope")].calls == 1
    back = rows[("MatmulBiasActivationBackward", "backward")]
    assert back.calls == 1 and back.host_ms >= back.self_host_ms
    for r in rows.values():
        assert r.self_host_ms <= r.host_ms + 1e-9
        if r.device_ms is not None:
            assert 0 <= r.self_device_ms <= r.device_ms + 1e-9
    devs = [r.self_device_ms for r in rows.values() if r.self_device_ms is not None]
    assert math.isclose(sum(devs), t["device_ms"], rel_tol=1e-9, abs_tol=1e-9)
    assert rows[("matmul_bias_activation", "op")].device_ms is not None


def test_table_is_sorted_by_total_time_and_checks_its_argument():
    x = nr.randn((64, 64), seed=0)
    with nr.profile() as p:
        for _ in range(3):
            x = x @ x * 0.01
        (x + 1).sum().item()
    lines = p.table().splitlines()
    assert lines[0].split()[:2] == ["name", "calls"]
    cols = [line.split() for line in lines[2:-2]]
    totals = [float(c[3] if c[3] != "-" else c[5]) for c in cols]   # device total, else host
    assert totals == sorted(totals, reverse=True)
    assert "matmul" in p.table(sort_by="calls")
    with pytest.raises(ValueError, match="sort_by must be one of"):
        p.table(sort_by="speed")


def test_a_profile_is_read_after_its_block_and_used_once():
    p = nr.profile()
    with p:
        nr.ones(3) + 1
        with pytest.raises(RuntimeError, match="still recording"):
            p.rows()
    with pytest.raises(RuntimeError, match="one with-block"):
        with p:
            pass


def test_host_only_profile_records_no_device_time():
    with nr.profile(device_time=False) as p:
        nr.ones(10) * 2
    assert all(r.device_ms is None for r in p.rows())
    assert p.totals()["device_ms"] is None


def test_each_async_task_sees_its_own_profile():
    async def work(record):
        x = nr.ones(8)
        if record:
            with nr.profile() as p:
                await asyncio.sleep(0)
                x = x * 2
                await asyncio.sleep(0)
            return p
        for _ in range(5):
            x = x + 1
            await asyncio.sleep(0)
        return None

    async def main():
        return await asyncio.gather(work(True), work(False))

    p, _ = asyncio.run(main())
    rows = _rows(p)
    assert rows[("mul", "op")].calls == 1
    assert ("add", "op") not in rows         # the other task's ops are not this profile's


def test_no_profile_no_recording():
    assert nr.profiler.current() is None
    with nr.record_function("nothing"):       # outside a profile: a no-op
        nr.ones(2) + 1


def test_webgpu_fused_chain_is_its_own_row():
    if "webgpu" not in nr.available_devices():
        pytest.skip("no webgpu adapter")
    be = nr.get_backend("webgpu")
    if not be.fuse or "timestamp-query" not in be.adapter.features:
        pytest.skip("fusion off or no timestamp queries on this adapter")
    a = nr.tensor(np.arange(4096, dtype=np.float32), device="webgpu")
    (a * 2 + 1).tolist()                          # compile the chain first
    with nr.profile() as p:
        y = (a * 2 + 1).exp()
        y.tolist()
    rows = _rows(p)
    fused = [r for (n, k), r in rows.items() if k == "kernel"]
    assert [r.name for r in fused] == ["fused: mul+add+exp"]
    assert fused[0].device_ms > 0 and fused[0].calls == 1
    assert rows[("mul", "op")].device_ms == 0      # its work ran in the fused kernel
