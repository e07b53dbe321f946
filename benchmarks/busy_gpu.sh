#!/usr/bin/env bash
# Issue 17 on one GPU: the harness's two clocks (wall, device busy) against hand measurements.
#   OUT=/some/dir bash benchmarks/busy_gpu.sh        (from the repository root; < 8 min on an H200)
# Runs, all torch on cuda (this machine has no TensorFlow):
#   matmul fp32 and fp32-graph, n = 256..8192 (with the machine's ceilings);
#   mnist-small and mnist-wide at batch 32: as-written, preloaded, adam-fused, adam-foreach,
#   cuda-graph, reduce-overhead (BUSY_EPOCHS epochs of BUSY_TRAIN_SAMPLES samples);
#   jacobian per-sample vs per-sample-graph at batch 100, if time is left;
# then benchmarks/busy_reference.py (hand torch.profiler, CUDA-graph replay, triton do_bench),
# the merged report, the comparison table, and $OUT/busy-runs.tar.gz with everything.
set -u
OUT=${OUT:-results/busy-gpu}
PYTHON=${PYTHON:-python3}
EPOCHS=${BUSY_EPOCHS:-3}
SAMPLES=${BUSY_TRAIN_SAMPLES:-20000}
# Harness runs end by this many seconds (each is cut to what is left); the reference, report
# and comparison after them take about a minute more.
BUDGET_S=${BUSY_BUDGET_S:-390}
RUNS="$OUT/runs"
mkdir -p "$RUNS"
export PYTHONPATH=$PWD${PYTHONPATH:+:$PYTHONPATH} PYTHONUNBUFFERED=1
export MPLCONFIGDIR=/tmp/mpl-busy KERAS_HOME=/tmp/keras-busy HARNESS_CACHE_DIR="$OUT/cache"
started=$(date +%s)
elapsed() { echo $(( $(date +%s) - started )); }

compare() {  # compare LIMIT_S ARGS...: one harness run, cut at LIMIT_S or the budget's end
  local limit=$1 left=$(( BUDGET_S - $(elapsed) )); shift
  if (( left < 30 )); then
    echo "=== skipped (budget): harness compare $*"; return
  fi
  (( limit > left )) && limit=$left
  echo "=== [$(elapsed) s] harness compare $*"
  # SIGINT, as Ctrl-C: the CLI stops its worker process group and keeps the finished cells.
  timeout -s INT -k 15 "$limit" "$PYTHON" -m harness.cli compare "$@" --device cuda \
    --framework torch --out "$RUNS" --no-report --timeout 150 2>&1 | tail -n 25
}

MNIST_VARIANTS=as-written,preloaded,adam-fused,adam-foreach,cuda-graph,reduce-overhead
compare 120 --workload matmul --variant fp32,fp32-graph --sizes 256,512,1024,2048,4096,8192
compare 150 --workload mnist-small --variant "$MNIST_VARIANTS" --sizes 32 --no-ceilings \
  --param "epochs=$EPOCHS" --param "train_samples=$SAMPLES"
compare 170 --workload mnist-wide --variant "$MNIST_VARIANTS" --sizes 32 --no-ceilings \
  --param "epochs=$EPOCHS" --param "train_samples=$SAMPLES"
compare 60 --workload jacobian --variant per-sample,per-sample-graph --sizes 100 --no-ceilings

echo "=== [$(elapsed) s] hand reference (torch.profiler, CUDA graph, triton do_bench)"
timeout 90 "$PYTHON" benchmarks/busy_reference.py "$OUT/reference.json" > "$OUT/reference.log" 2>&1 \
  || { echo "reference failed:"; tail -n 20 "$OUT/reference.log"; }

echo "=== [$(elapsed) s] report"
timeout 90 "$PYTHON" -m harness.cli report "$RUNS"/* --out "$OUT/report" 2>&1 | tail -n 5

echo "=== [$(elapsed) s] comparison"
"$PYTHON" benchmarks/busy_compare.py --reference "$OUT/reference.json" "$RUNS"/* \
  | tee "$OUT/comparison.txt"
tar -czf "$OUT/busy-runs.tar.gz" -C "$OUT" runs report reference.json reference.log \
  comparison.txt 2>/dev/null
echo "=== [$(elapsed) s] done: $OUT/busy-runs.tar.gz"
