"""All-reduce bandwidth on cpu over MPI: numr_web.distributed.all_reduce (a Tensor, in place,
non-blocking MPI polled with a deadline) against mpi4py's raw Allreduce and Iallreduce+Wait on the
same numpy buffers (the tensor's own storage). numr_web's mpi backend sets Open MPI's libnbc
iallreduce algorithm to Rabenseifner unless OMPI_MCA_coll_libnbc_iallreduce_algorithm is set; the
raw Iallreduce column runs with the same setting.

    mpirun -n 2 python bench/distributed.py [--min-kib 4] [--max-mib 64] [--seconds 0.3]

Rank 0 prints a markdown table: time per all-reduce (fastest of 7 interleaved batches), algorithm bandwidth
(bytes / time) and bus bandwidth (algbw * 2(n-1)/n, as nccl-tests reports), and the wrapper's
overhead against raw Allreduce. float32 buffers, op sum.
"""
import argparse
import statistics
import time

import numpy as np


def timed(fns, comm, seconds, batches=7):
    """Seconds per call of each fn: the methods run interleaved in batches sized to ~seconds/batches
    each (rank 0's estimate, broadcast so every rank agrees) and each method keeps its fastest
    batch, so that load from other processes on a shared machine hits the methods alike."""
    reps = []
    for fn in fns:
        fn()
        comm.Barrier()
        t0 = time.perf_counter()
        fn()
        est = comm.bcast(time.perf_counter() - t0, root=0)
        reps.append(max(1, int(seconds / batches / max(est, 1e-7))))
    best = [float("inf")] * len(fns)
    for _ in range(batches):
        for i, fn in enumerate(fns):
            comm.Barrier()
            t0 = time.perf_counter()
            for _ in range(reps[i]):
                fn()
            best[i] = min(best[i], (time.perf_counter() - t0) / reps[i])
    return best


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--min-kib", type=int, default=4)
    ap.add_argument("--max-mib", type=int, default=64)
    ap.add_argument("--seconds", type=float, default=0.3, help="per size and method")
    a = ap.parse_args()

    import numr_web as nr
    import numr_web.distributed as dist
    dist.init("mpi", timeout=120)
    from mpi4py import MPI
    comm = MPI.COMM_WORLD
    n = dist.world_size()
    sizes, b = [], a.min_kib * 1024
    while b <= a.max_mib * 1024 * 1024:
        sizes.append(b)
        b *= 4
    rows = []
    for nbytes in sizes:
        t = nr.tensor(np.ones(nbytes // 4, dtype=np.float32))
        arr = t.numpy()                       # the tensor's storage (zero-copy on cpu)
        raw, iraw, wrap = timed([lambda: comm.Allreduce(MPI.IN_PLACE, arr, MPI.SUM),
                                 lambda: comm.Iallreduce(MPI.IN_PLACE, arr, MPI.SUM).Wait(),
                                 lambda: dist.all_reduce(t)], comm, a.seconds)
        rows.append((nbytes, raw, iraw, wrap))
    if dist.rank() == 0:
        bus = 2 * (n - 1) / n

        def fmt(nb):
            return f"{nb // 1024} KiB" if nb < 1 << 20 else f"{nb >> 20} MiB"
        print(f"all_reduce float32 sum over {n} MPI ranks ({MPI.Get_library_version().splitlines()[0]})")
        print("| size | raw Allreduce | raw Iallreduce+Wait | numr all_reduce | algbw raw / numr "
              "(GB/s) | busbw raw / numr (GB/s) | overhead |")
        print("|---:|---:|---:|---:|---:|---:|---:|")
        for nb, raw, iraw, wrap in rows:
            print(f"| {fmt(nb)} | {raw * 1e6:.1f} us | {iraw * 1e6:.1f} us | {wrap * 1e6:.1f} us | "
                  f"{nb / raw / 1e9:.2f} / {nb / wrap / 1e9:.2f} | "
                  f"{bus * nb / raw / 1e9:.2f} / {bus * nb / wrap / 1e9:.2f} | "
                  f"{(wrap - raw) * 1e6:+.1f} us ({wrap / raw:.2f}x) |")
    dist.destroy()


if __name__ == "__main__":
    main()
