"""A torchrun-style launcher for one machine (the GPU machines have no mpirun):

    python -m numr_web.distributed.launch --nproc-per-node 8 train.py ARGS...
    python -m numr_web.distributed.launch --nproc-per-node 8 -m numr_web demo --device cuda \
        --distributed nccl

Starts N copies with RANK, WORLD_SIZE, LOCAL_RANK, LOCAL_WORLD_SIZE, MASTER_ADDR and MASTER_PORT
set (a free port unless given), which numr_web.distributed.init() reads. When one copy fails, the
others get `--grace` seconds to notice (their collectives raise DistributedError), then are
terminated; the launcher exits with the first failure's status (0 when all succeed).
"""
from __future__ import annotations

import argparse
import os
import signal
import socket
import subprocess
import sys
import time


def free_port(host="127.0.0.1"):
    with socket.socket() as s:
        s.bind((host, 0))
        return s.getsockname()[1]


def launch(cmd, nproc, master_addr="127.0.0.1", master_port=0, grace=5.0, env=None,
           world_size=None, timeout=None):
    """Run `cmd` (argv list) nproc times; returns the exit status (124 when `timeout` seconds
    passed first). world_size: what WORLD_SIZE claims (default nproc; set it differently only to
    test the mismatch error)."""
    port = master_port or free_port(master_addr)
    base = dict(os.environ if env is None else env)
    base.setdefault("NCCL_NVLS_ENABLE", "0")    # NVLink multicast off unless asked for (shared hosts)
    procs = []
    for r in range(nproc):
        e = dict(base)
        e.update(RANK=str(r), LOCAL_RANK=str(r), WORLD_SIZE=str(world_size or nproc),
                 LOCAL_WORLD_SIZE=str(nproc), MASTER_ADDR=master_addr, MASTER_PORT=str(port))
        procs.append(subprocess.Popen(cmd, env=e))
    status, failed_at, start = 0, None, time.monotonic()
    try:
        while True:
            if timeout is not None and time.monotonic() - start > timeout:
                _stop(procs)
                return 124
            codes = [p.poll() for p in procs]
            bad = [c for c in codes if c not in (None, 0)]
            if bad and failed_at is None:
                status, failed_at = bad[0], time.monotonic()
            if all(c is not None for c in codes):
                break
            if failed_at is not None and time.monotonic() - failed_at > grace:
                _stop(procs)
                break
            time.sleep(0.05)
    except KeyboardInterrupt:
        _stop(procs)
        status = 130
    return status


def _stop(procs):
    for p in procs:
        if p.poll() is None:
            p.send_signal(signal.SIGTERM)
    deadline = time.monotonic() + 5
    for p in procs:
        try:
            p.wait(max(0.0, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait()


def build_parser():
    ap = argparse.ArgumentParser(prog="python -m numr_web.distributed.launch",
                                 description=__doc__.split("\n\n")[0])
    ap.add_argument("--nproc-per-node", "--nproc_per_node", type=int, required=True,
                    help="processes to start on this machine, one per GPU for nccl")
    ap.add_argument("--master-addr", "--master_addr", default="127.0.0.1",
                    help="address of rank 0's rendezvous (MASTER_ADDR; default 127.0.0.1)")
    ap.add_argument("--master-port", "--master_port", type=int, default=0,
                    help="port of rank 0's rendezvous (MASTER_PORT; default 0 = a free port)")
    ap.add_argument("--grace", type=float, default=5.0,
                    help="seconds the other ranks get after one fails (default 5)")
    ap.add_argument("-m", dest="module", default=None, help="run a module, as python -m does")
    ap.add_argument("rest", nargs=argparse.REMAINDER,
                    help="the script and its arguments (or, after -m, the module's arguments)")
    return ap


def main(argv=None):
    ap = build_parser()
    a = ap.parse_args(argv)
    if a.module:
        cmd = [sys.executable, "-m", a.module] + a.rest
    elif a.rest:
        cmd = [sys.executable] + a.rest
    else:
        ap.error("give a script or -m module")
    return launch(cmd, a.nproc_per_node, a.master_addr, a.master_port, a.grace)


if __name__ == "__main__":
    sys.exit(main())
