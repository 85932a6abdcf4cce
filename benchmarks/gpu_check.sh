#!/usr/bin/env bash
# The checks that need a GPU, in one short run (about 7 minutes): the layer and kernel
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
cd benchmarks
run_bench() {  # LIMIT_S SCRIPT [ARGS...]
    local limit=$1 name=$2
    shift 2
    timeout "$limit" python3 "$name.py" --device cuda "$@" > "$OUT/$name.log" 2>&1
    echo "== $name rc $?"
    tail -20 "$OUT/$name.log" | cut -c1-250
}
run_bench 45 bench_ops --repeat 10
run_bench 70 bench_gatv2
run_bench 70 bench_pna
run_bench 40 bench_degree_scaler
