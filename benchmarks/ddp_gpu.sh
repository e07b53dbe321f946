#!/usr/bin/env bash
# Data-parallel scaling of the seed-3 nets on a multi-GPU host: torch DDP over 1..N GPUs (NCCL),
# dense-128 and dense-1000x2 at per-GPU batch 32 and 512; every run folder plus a merged report
# packed into $OUT/ddp-runs.tar.gz (rewritten after every job, so a cut-short session keeps what
# finished). Run from the repository root:  OUT=/some/dir benchmarks/ddp_gpu.sh
# Budget: about 4-5 minutes on 2 H200s (4 jobs x 2 cases, each case launches its own ranks).
set -u
out=${OUT:-results/ddp-gpu}
runs=results/ddp-runs
mkdir -p "$out" "$runs"
export PYTHONPATH=$PWD${PYTHONPATH:+:$PYTHONPATH} PYTHONUNBUFFERED=1
export MPLCONFIGDIR=/tmp/mpl KERAS_HOME=/tmp/keras
# The harness sets these in every cell too; here they also cover this script's own python3.
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
# Report and CLI packages carried as wheels (see the device notes), when the host lacks them.
if [ -d .whl ]; then
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
    --target /tmp/site .whl/*.whl && export PYTHONPATH=$PYTHONPATH:/tmp/site
fi
python3 -c 'import typer, rich, pandas, seaborn, matplotlib' || {
  echo "missing CLI/report packages (typer rich pandas seaborn matplotlib)"; exit 2; }
gpus=$(python3 -c 'import torch; print(torch.cuda.device_count())')
echo "torch sees $gpus GPU(s); nvidia-smi:"; nvidia-smi -L
sizes=$(seq -s, 1 "$gpus")
for batch in 32 512; do
  for net in small wide; do
    echo "=== mnist-ddp net=$net per-GPU batch=$batch processes=$sizes"
    python3 -m harness.cli compare --workload mnist-ddp --framework torch --device cuda \
      --sizes "$sizes" --param net=$net --param batch_size=$batch --param epochs=4 \
      --timeout 240 --no-ceilings --out "$runs" 2>&1 | tail -n 25
    tar -czf "$out/ddp-runs.tar.gz" -C results ddp-runs
  done
done
python3 -m harness.cli report "$runs"/*-mnist-ddp-* --out "$runs/report" | tail -n 3
tail -n 12 "$runs/report/summary.md"
tar -czf "$out/ddp-runs.tar.gz" -C results ddp-runs
