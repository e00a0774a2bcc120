#!/bin/bash
# On a CUDA machine: the cuda tests, then the cuda benchmark (tables of ratios), each time-boxed.
# Usage: OUT=/some/dir bash scripts/cuda-check.sh   (writes t_cuda.txt, t_suite.txt, bench.txt there)
set -u
cd "$(dirname "$0")/.."
export PYTHONPATH=$PWD
OUT=${OUT:-/tmp/numr-cuda-check}
mkdir -p "$OUT"
timeout "${T_CUDA:-300}" python3 -m pytest -p no:cacheprovider -q -rf \
    tests/test_cuda_codegen.py tests/test_capture.py tests/test_cuda.py > "$OUT/t_cuda.txt" 2>&1
tail -15 "$OUT/t_cuda.txt"
timeout "${T_SUITE:-300}" python3 -m pytest -p no:cacheprovider -q -rf -k cuda tests/ \
    --ignore=tests/test_cuda.py --ignore=tests/test_capture.py --ignore=tests/test_cuda_codegen.py \
    --ignore=tests/test_webgpu_backend.py --ignore=tests/test_webgpu_codegen.py \
    --ignore=tests/test_webgpu_views.py --ignore=tests/test_webgpu_nn.py --ignore=tests/test_distributed.py \
    --ignore=tests/test_distributed_mpi.py --ignore=tests/test_distributed_nccl_fake.py \
    > "$OUT/t_suite.txt" 2>&1
tail -15 "$OUT/t_suite.txt"
timeout "${T_BENCH:-300}" python3 bench/cuda_vs_torch.py --out "$OUT" ${BENCH_ARGS:-} > "$OUT/bench.txt" 2>&1
tail -40 "$OUT/bench.txt"
