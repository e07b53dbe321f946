#!/usr/bin/env bash
# Issue 24 on the lent GPU machine: GPU state, energy per step and the four misleading numbers.
#   one GPU  (<= 8 min):  benchmarks/gpu_truth.sh OUT one
#   two GPUs (<= 4 min):  benchmarks/gpu_truth.sh OUT ddp
# Run from the repository root after installing the carried wheels:
#   python3 -m pip install -q --no-index --no-deps --target /tmp/site .whl/*.whl
#   export PYTHONPATH=/tmp/site:$PWD
# Writes under OUT: runs-<part>.tar.gz (every run folder and the hand readings, rewritten after
# each job so a cut-short session keeps what finished), summary-<part>.txt (the lines to paste
# into the issue note), nvidia-smi-<part>-{before,after}.txt and log-<part>.txt.
# Every job has its own time cap inside one deadline for the whole part; a capped harness run
# gets one SIGTERM (timeout --foreground), which stops its worker and saves what finished.
set -u
out=${1:?usage: benchmarks/gpu_truth.sh OUT [one|ddp]}
part=${2:-one}
mkdir -p "$out"
out=$(cd "$out" && pwd)
work=$(mktemp -d /tmp/gpu-truth-XXXX)
runs=$work/runs-$part
hand=$runs/hand
mkdir -p "$runs" "$hand"
export PYTHONPATH=${PYTHONPATH:-}${PYTHONPATH:+:}$PWD PYTHONUNBUFFERED=1
export MPLCONFIGDIR=/tmp/mpl KERAS_HOME=/tmp/keras
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
start=$(date +%s)
case $part in  # seconds for the whole part (GPU_TRUTH_BUDGET overrides, e.g. for a dry run)
  one) budget=${GPU_TRUTH_BUDGET:-450} ;;
  ddp) budget=${GPU_TRUTH_BUDGET:-220} ;;
  *) echo "part must be one or ddp"; exit 2 ;;
esac
exec > >(tee "$out/log-$part.txt") 2>&1

left() { echo $(( start + budget - $(date +%s) )); }
# cap SECONDS: the smaller of SECONDS and what the part's deadline leaves (at least 1).
cap() { local l; l=$(left); [ "$1" -lt "$l" ] && l=$1; [ "$l" -lt 1 ] && l=1; echo "$l"; }
pack() { tar -czf "$out/runs-$part.tar.gz" -C "$work" "runs-$part"; }
compare() {  # compare SECONDS ARGS...: one harness run, capped
  local seconds=$1; shift
  echo "=== [$(( $(date +%s) - start )) s] harness compare $* (cap $(cap "$seconds") s)"
  timeout --foreground -k 10 "$(cap "$seconds")" python3 -m harness.cli compare "$@" --no-ceilings \
    --no-report --out "$runs" 2>&1 | tail -n 30
  pack
}

python3 -c 'import pynvml; pynvml.nvmlInit(); print("NVML", pynvml.nvmlSystemGetDriverVersion())' \
  || echo "pynvml missing or NVML failing: the harness records gpu_state/energy as unavailable"
nvidia-smi -q -d CLOCK,POWER,TEMPERATURE,PERFORMANCE > "$out/nvidia-smi-$part-before.txt" 2>&1
nvidia-smi -L

if [ "$part" = one ]; then
  # 1. Energy per step through the harness: preloaded (the plain eager loop), batch 32 and 512,
  #    GPU and CPU (the CPU cell gives the verdict's other half; RAPL may be unreadable there).
  for workload in mnist-small mnist-wide; do
    compare 75 --workload $workload --framework torch --device cpu,cuda:0 --variant preloaded \
      --sizes 32,512 --param epochs=3 --timeout 70
  done
  # 2. By hand: plain torch + pynvml, no harness measurement code. The harness's own training
  #    step with a hand clock and hand NVML reads (the same loop), and a loop written here.
  for net in small wide; do
    for batch in 32 512; do
      for loop in harness own; do
        echo "=== [$(( $(date +%s) - start )) s] energy by hand ($loop loop): $net batch $batch"
        timeout -k 5 "$(cap 30)" python3 benchmarks/energy_by_hand.py --net $net --batch $batch \
          --seconds 5 --idle-seconds 2 --loop $loop --out "$hand/hand-$loop-$net-$batch.json"
      done
    done
  done
  pack
  # 3. reduce-overhead (whole step compiled) vs cuda-graph at batch 32, and
  # 4. the jax and keras-jax GPU cells (false SUSPECT of item 3; keras-jax needs carried keras).
  compare 150 --workload mnist-small --framework torch --device cuda:0 \
    --variant reduce-overhead,cuda-graph --sizes 32 --param epochs=3 --timeout 140
  compare 100 --workload mnist-small --framework jax,keras-jax --device cuda:0 \
    --variant as-written --sizes 32 --param epochs=3 --timeout 95
  compare 150 --workload mnist-wide --framework torch --device cuda:0 \
    --variant reduce-overhead,cuda-graph --sizes 32,512 --param epochs=3 --timeout 140
else
  # The 117% case (net=small, per-GPU batch 512) and DDP device memory (both nets).
  gpus=$(python3 -c 'import torch; print(torch.cuda.device_count())')
  echo "torch sees $gpus GPU(s)"
  compare 110 --workload mnist-ddp --framework torch --device cuda:0 --sizes 1,2 \
    --param net=small --param batch_size=512 --param epochs=4 --timeout 100
  compare 100 --workload mnist-ddp --framework torch --device cuda:0 --sizes 1,2 \
    --param net=wide --param batch_size=512 --param epochs=3 --timeout 95
fi

nvidia-smi -q -d CLOCK,POWER,TEMPERATURE,PERFORMANCE > "$out/nvidia-smi-$part-after.txt" 2>&1
timeout 30 python3 benchmarks/gpu_truth_summary.py "$runs" "$hand" | tee "$out/summary-$part.txt"
pack
echo "done in $(( $(date +%s) - start )) s: $out/summary-$part.txt, $out/runs-$part.tar.gz"
