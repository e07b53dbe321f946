#!/usr/bin/env bash
# Issue 22 on one GPU machine: `bash benchmarks/usermodel_gpu.sh OUTDIR` (<= 6 minutes).
# 1. The Keras MNIST example (examples/models/keras_mnist.py): one builder on keras-jax and
#    keras-torch, cpu vs cuda:0, as-written and compiled: the framework ranking per device.
# 2. The seed's Jacobian net as the user's step (examples/models/jacobian_net.py): cpu vs GPU.
# 3. The small CNN with every torch variant (resident, compiled, cuda-graph on the GPU): the
#    GPU-only code paths of backends/torch/usermodel.py, each checked against the CPU.
# 4. benchmarks/usermodel_overhead.py on cuda:0: harness vs a plain loop, per step.
# Keras must be importable (on the lent H200 machines: install the carried wheels first, as
# benchmarks/frameworks_gpu.sh does). Run folders and logs go under OUTDIR; each job prints
# its summary's "At a glance" and framework-verdict lines. Every job ends by BUDGET_S.
set -u
out=${1:?usage: bash benchmarks/usermodel_gpu.sh OUTDIR}
mkdir -p "$out/runs"
export PYTHONPATH=$PWD${PYTHONPATH:+:$PYTHONPATH} PYTHONUNBUFFERED=1 MPLCONFIGDIR=/tmp/mpl KERAS_HOME=/tmp/keras
BUDGET_S=${BUDGET_S:-350}
started=$SECONDS
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader

verdicts() {  # the newest run's "At a glance" and framework-verdict lines
  local run
  run=$(ls -td "$out"/runs/*/ 2>/dev/null | head -n 1)
  [ -n "$run" ] || return
  [ -f "${run}summary.md" ] || python3 -m harness.cli report "$run" >/dev/null 2>&1
  [ -f "${run}summary.md" ] && awk '/^## At a glance/ {on=1} /^### Framework verdict/ {on=1}
       on && /^## / && !/^## At a glance/ {on=0} on && /^### / && !/^### Framework verdict/ {on=0}
       on' "${run}summary.md"
}

limited() {  # limited SECONDS command...: the limit, cut to what the budget has left
  local limit=$1; shift
  local left=$((BUDGET_S - (SECONDS - started)))
  if [ "$left" -lt 30 ]; then echo "=== skipped (budget spent): $*"; return 1; fi
  [ "$limit" -gt "$left" ] && limit=$left
  echo "=== [$((SECONDS - started))s, limit ${limit}s] $*"
  timeout --signal=INT --kill-after=10 "$limit" "$@"
}

job() {  # job SECONDS compare-args...
  local limit=$1; shift
  limited "$limit" python3 -m harness.cli compare "$@" --out "$out/runs" 2>&1 | tail -n 40
  verdicts
}

job 120 --model examples/models/keras_mnist.py --framework keras-jax,keras-torch \
  --device cpu,cuda:0 --variant as-written,compiled --sizes 32,1024 --quick --no-ceilings \
  --timeout 50
# As written, batch b is 400 b backward passes (batch 100 took ~12 s a call on an H100).
job 70 --model examples/models/jacobian_net.py --device cpu,cuda:0 --sizes 10,20 --quick \
  --no-ceilings --timeout 40
job 90 --model examples/models/small_cnn.py --device cpu,cuda:0 --variant all \
  --sizes 32,512 --quick --no-ceilings --timeout 40
limited 70 python3 benchmarks/usermodel_overhead.py --device cuda --rounds 3 2>&1 \
  | tee "$out/overhead_gpu.txt"
echo "=== done in $((SECONDS - started)) s: $out"
