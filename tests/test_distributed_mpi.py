"""numr_web.distributed over real processes: `mpirun -n 2` (Open MPI or MPICH; scripts/test-all.sh
installs Open MPI and mpi4py) and the torchrun-style launcher. Each run has a subprocess timeout, so
a regression to a hang fails instead of stalling CI."""
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parent.parent
WORKER = str(ROOT / "tests" / "dist_worker.py")


def _mpirun():
    exe = shutil.which("mpirun") or shutil.which("mpiexec")
    if exe is None:
        return None, "no mpirun/mpiexec on PATH (apt-get install openmpi-bin libopenmpi-dev)"
    try:
        import mpi4py  # noqa: F401
    except ImportError:
        return None, "mpi4py is not installed (pip install mpi4py)"
    version = subprocess.run([exe, "--version"], capture_output=True, text=True).stdout
    cmd = [exe, "-n", "2"]
    if "Open MPI" in version or "OpenRTE" in version:
        cmd.append("--oversubscribe")
        if os.geteuid() == 0:
            cmd.append("--allow-run-as-root")
    return cmd, version


MPIRUN, WHY = _mpirun()
OPEN_MPI = MPIRUN is not None and "--oversubscribe" in MPIRUN
needs_mpi = pytest.mark.skipif(MPIRUN is None, reason=str(WHY))


def _env(**extra):
    e = dict(os.environ)
    e["PYTHONPATH"] = str(ROOT) + os.pathsep + e.get("PYTHONPATH", "")
    e.setdefault("OMPI_MCA_rmaps_base_oversubscribe", "1")
    e.update(extra)
    return e


def _run(args, timeout=120, mpi_args=(), env=None):
    t0 = time.monotonic()
    p = subprocess.run(MPIRUN + list(mpi_args) + [sys.executable, WORKER] + args,
                       capture_output=True, text=True, timeout=timeout, env=env or _env())
    return p.returncode, p.stdout + p.stderr, time.monotonic() - t0


@needs_mpi
def test_collectives_under_mpirun():
    rc, out, _ = _run(["collectives"])
    assert rc == 0, out
    assert "rank 0 collectives OK" in out and "rank 1 collectives OK" in out
    assert out.count("ShapeError: all_reduce: tensor shapes differ across ranks") == 2, out


def _single_process_reference(epochs):
    from numr_web.apps.demo_distributed import run_digits
    return run_digits(epochs=epochs, hidden=32, log=None)


@needs_mpi
def test_demo_two_ranks_match_one_process(tmp_path):
    epochs = 2
    out = tmp_path / "r.json"
    rc, log, secs = _run(["demo", str(epochs), str(out)],
                         env=_env())
    assert rc == 0, log
    res = json.loads(out.read_text())
    assert res["world_size"] == 2 and res["identical"]
    ref = _single_process_reference(epochs)
    assert len(res["losses"]) == len(ref["losses"])
    np.testing.assert_allclose(res["losses"], ref["losses"], rtol=2e-5, atol=2e-6)
    assert abs(res["accuracy"] - ref["accuracy"]) < 0.01


@needs_mpi
def test_dead_rank_ends_the_job_within_the_timeout():
    # Open MPI's mpirun aborts the whole job itself as soon as a rank exits non-zero
    rc, out, secs = _run(["die"], timeout=60)
    assert rc != 0 and secs < 30, out


@needs_mpi
@pytest.mark.skipif(not OPEN_MPI, reason="needs Open MPI's orte_abort_on_non_zero_status")
def test_dead_rank_gives_a_typed_error_on_the_survivor():
    # with the launcher told not to abort, rank 0's collective deadline (3 s) must fire
    rc, out, secs = _run(["die"], timeout=60, mpi_args=["--mca", "orte_abort_on_non_zero_status",
                                                         "0"])
    assert "rank 0 DistributedError after" in out, out
    assert "did not complete within 3 s" in out
    assert rc != 0 and secs < 30, out


@needs_mpi
def test_hung_rank_gives_a_typed_error_and_the_job_ends():
    rc, out, secs = _run(["stuck"], timeout=60)
    assert "rank 0 DistributedError: rank 0 of 2 (mpi): all_reduce of 1000 float32 elements did " \
           "not complete within 2 s" in out, out
    assert rc != 0 and secs < 30, out       # MPI_Abort at exit ended the sleeping rank too


@needs_mpi
def test_world_size_mismatch_under_mpirun():
    rc, out, _ = _run(["worldsize"], timeout=60)
    assert out.count("DistributedError: world size mismatch: 3 ranks expected") == 2, out


def _launch(cmd, nproc, world_size, timeout=60):
    code = ("import sys; from numr_web.distributed.launch import launch; "
            f"sys.exit(launch({cmd!r}, {nproc}, world_size={world_size}, grace=10))")
    t0 = time.monotonic()
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                       timeout=timeout, env=_env())
    return p.returncode, p.stdout + p.stderr, time.monotonic() - t0


def test_store_rendezvous_names_the_missing_rank():
    rc, out, secs = _launch([sys.executable, WORKER, "store_rendezvous"], 2, 3)
    assert rc != 0 and secs < 30, out
    assert "only 2 of WORLD_SIZE=3 ranks joined within 2 s; missing ranks [2]" in out, out
    rc, out, _ = _launch([sys.executable, WORKER, "store_rendezvous"], 2, 2)
    assert rc == 0 and "rank 0 joined" in out and "rank 1 joined" in out, out


@needs_mpi
def test_mpi_backend_without_mpirun_is_a_clear_error():
    rc, out, _ = _launch([sys.executable, WORKER, "mpi_without_mpirun"], 2, 2)
    assert out.count("DistributedError: world size mismatch: 2 ranks expected") == 2, out


@needs_mpi
def test_cli_demo_distributed_under_mpirun():
    """`mpirun -n 2 numr-web demo --distributed`: the ranks end with bit-identical parameters
    and the accuracy of the single-process run with the same global batch."""
    import re
    p = subprocess.run(MPIRUN + [sys.executable, "-m", "numr_web", "demo", "--distributed",
                                 "--epochs", "2", "--hidden", "32"],
                       capture_output=True, text=True, timeout=180, env=_env())
    assert p.returncode == 0, p.stdout + p.stderr
    lines = p.stdout.strip().splitlines()
    assert re.fullmatch(r"parameters bit-identical on all 2 ranks: yes \(sha256 [0-9a-f]{16}\)",
                        lines[-1]), lines
    m = re.fullmatch(r"final test accuracy: (\d+\.\d\d)%  \(2 ranks, \d+\.\d s\)", lines[-2])
    assert m, lines
    assert sum(line.startswith("epoch ") for line in lines) == 2     # rank 0 logs, once per epoch
    ref = _single_process_reference(2)["accuracy"]
    assert abs(float(m.group(1)) - ref * 100) <= 100 / 359 + 0.01    # at most one test image apart
