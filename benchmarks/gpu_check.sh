#!/usr/bin/env bash
# The checks that need a GPU, in one short run (about 10 minutes): the layer and kernel
# tests with every tensor on CUDA (PYG_AGG_TEST_DEVICE, tests/conftest.py), then the
# side-by-side benchmarks on CUDA. Logs go to $OUT (default /tmp/gpu_check).
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-/tmp/gpu_check}
mkdir -p "$OUT"
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1
python3 -c "import torch, torch_geometric as g; print(torch.__version__, g.__version__, torch.cuda.get_device_name())"
PYG_AGG_TEST_DEVICE=cuda timeout 180 python3 -m pytest -q -p no:cacheprovider --durations=15 \
    tests/nn tests/ops > "$OUT/tests_cuda.log" 2>&1
echo "tests rc $?"
tail -40 "$OUT/tests_cuda.log" | cut -c1-300
# The Triton attention kernels: the attention op and GATv2 layer tests again with the native
# backend forced (PYG_AGG_BACKEND), which CUDA's "auto" does not pick yet, so every attention
# call on CUDA runs them (dense reference, gradcheck in float64, bitwise determinism)
PYG_AGG_BACKEND=native PYG_AGG_TEST_DEVICE=cuda timeout 150 python3 -m pytest -q -p no:cacheprovider \
    --durations=5 tests/ops/test_attention.py tests/nn/conv/test_gatv2_conv.py > "$OUT/attention_cuda.log" 2>&1
echo "attention tests (native backend) rc $?"
tail -30 "$OUT/attention_cuda.log" | cut -c1-300
# The Triton statistics kernels (segment_stats, stack_statistics) the same way,
# through the PNA layers
PYG_AGG_BACKEND=native PYG_AGG_TEST_DEVICE=cuda timeout 150 python3 -m pytest -q -p no:cacheprovider \
    --durations=5 tests/nn/conv/test_pna_conv.py tests/nn/aggr/test_degree_scaler.py > "$OUT/statistics_cuda.log" 2>&1
echo "statistics tests (native backend) rc $?"
tail -30 "$OUT/statistics_cuda.log" | cut -c1-300
cd benchmarks
run_bench() {  # LIMIT_S SCRIPT [ARGS...]
    local limit=$1 name=$2
    shift 2
    local log="$OUT/$name${PYG_AGG_BACKEND:+_$PYG_AGG_BACKEND}.log"
    timeout "$limit" python3 "$name.py" --device cuda "$@" > "$log" 2>&1
    echo "== $name ${PYG_AGG_BACKEND:-auto} rc $?"
    tail -20 "$log" | cut -c1-250
}
run_bench 45 bench_ops --repeat 10
run_bench 70 bench_gatv2
PYG_AGG_BACKEND=native run_bench 70 bench_gatv2  # GATv2 on the Triton attention kernels
run_bench 70 bench_pna
PYG_AGG_BACKEND=native run_bench 70 bench_pna  # PNA on the Triton statistics kernels
run_bench 40 bench_degree_scaler
