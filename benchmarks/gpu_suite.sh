#!/usr/bin/env bash
# The GPU measurements behind docs/findings.md, one subcommand each, on any NVIDIA machine.
#
#   bash benchmarks/gpu_suite.sh SUBCOMMAND OUT [ARGS...]        (from the repository root)
#
#   compare OUT "ARGS" ["ARGS" ...]  any `harness compare` jobs (ARGS without the word compare)
#   busy OUT           the two clocks (wall, device busy) against hand torch.profiler, CUDA-graph
#                      and do_bench readings: matmul fp32/fp32-graph 256..8192, MNIST variants
#                      at batch 32, then busy_reference.py and busy_compare.py   (~8 min)
#   frameworks OUT     torch, jax, keras-jax, keras-torch on cpu and cuda:0: MNIST at batch 32,
#                      matmul, Jacobian, JAX transfer                           (~9 min)
#   capabilities OUT   `--variant all --quick --device cuda:0` per workload: cells the
#                      declarations let through that the backend refused (UNDECLARED), failures
#   state OUT          GPU state, energy per step (harness vs energy_by_hand.py), reduce-overhead
#                      vs cuda-graph, jax/keras-jax cells not flagged SUSPECT  (~8 min)
#   ddp OUT            mnist-ddp over 1..all GPUs, both nets, per-GPU batch 32 and 512; scaling,
#                      per-rank device memory                                  (~5 min on 2 GPUs)
#   blocks OUT         MNIST block samples vs whole warm epochs (mnist_blocks_check.py)
#   usermodel OUT      examples/models/ on cpu and cuda:0, every torch variant, and
#                      usermodel_overhead.py (harness vs a plain loop)          (~6 min)
#   advise OUT         `harness advise` on seed 002's Keras file, the small CNN and seed 000's
#                      Jacobian at the seeds' batches, cpu and cuda:0 (3 min cap each) (~9 min)
#   memfit OUT         the small CNN's memory fit over 3 batches on cuda:0 against the batch
#                      that really runs out (memory_fit_check.py)             (~6 min)
#   audit OUT          an LSTM, an attention block and a CNN on cpu and cuda:0, 3 rounds, each
#                      run then `harness check`ed; seed 002's Keras model: the harness's step
#                      vs a plain fit() (keras_step_overhead.py), cpu and cuda:0  (~8 min)
#
# Every subcommand writes its run folders and logs under OUT and packs them into
# OUT/<subcommand>.tar.gz after each job, so a session cut short keeps what finished. Each job is
# capped so the whole subcommand ends by BUDGET_S seconds (default 530); a capped harness run
# gets SIGINT, as Ctrl-C, which stops its worker and keeps the finished cells. Packages the host
# lacks (keras, nvidia-ml-py, submitit) can be carried as wheels in .whl/ (docs/gpu.md).
set -u
usage() { sed -n '2,28p' "$0"; exit 2; }
[ $# -ge 2 ] || usage
cmd=$1 out=$2; shift 2
mkdir -p "$out/runs"
out=$(cd "$out" && pwd)
runs=$out/runs
if ls .whl/*.whl >/dev/null 2>&1; then
  python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site .whl/*.whl \
    && export PYTHONPATH=/tmp/site${PYTHONPATH:+:$PYTHONPATH}
fi
export PYTHONPATH=$PWD${PYTHONPATH:+:$PYTHONPATH} PYTHONUNBUFFERED=1
export MPLCONFIGDIR=/tmp/mpl KERAS_HOME=/tmp/keras HARNESS_CACHE_DIR="$out/cache"
# The harness sets these in every cell; here they also cover this script's own python3.
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
BUDGET_S=${BUDGET_S:-530}
started=$SECONDS
exec > >(tee "$out/log-$cmd.txt") 2>&1
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader

pack() { tar -czf "$out/$cmd.tar.gz" -C "$out" runs; }

limited() {  # limited SECONDS COMMAND...: run it, cut to what the budget has left
  local limit=$1 left=$(( BUDGET_S - (SECONDS - started) )); shift
  if (( left < 30 )); then echo "=== skipped (budget spent): $*"; return 1; fi
  (( limit > left )) && limit=$left
  echo "=== [$(( SECONDS - started )) s, limit $limit s] $*"
  timeout -s INT -k 15 "$limit" "$@"
}

verdicts() {  # the newest run's "At a glance" and framework-verdict lines
  local run
  run=$(ls -td "$runs"/*/ 2>/dev/null | head -n 1)
  [ -n "$run" ] || return 0
  # An interrupted compare draws no report; draw it from what finished.
  [ -f "${run}summary.md" ] || python3 -m harness.cli report "$run" >/dev/null 2>&1
  [ -f "${run}summary.md" ] && awk '/^## At a glance/ {on=1} /^### Framework verdict/ {on=1}
       on && /^## / && !/^## At a glance/ {on=0} on && /^### / && !/^### Framework verdict/ {on=0}
       on' "${run}summary.md"
  return 0
}

job() {  # job SECONDS COMPARE-ARGS...: one harness run into $runs, then its verdicts and the pack
  local limit=$1; shift
  limited "$limit" python3 -m harness.cli compare "$@" --out "$runs" 2>&1 | tail -n 40
  verdicts
  pack
}

hand_energy() {  # energy_by_hand.py for both nets, batch 32 and 512, both loops, into $runs/hand
  local net batch loop
  for net in small wide; do
    for batch in 32 512; do
      for loop in harness own; do
        limited 30 python3 benchmarks/energy_by_hand.py --net $net --batch $batch --seconds 5 \
          --idle-seconds 2 --loop $loop --out "$runs/hand/hand-$loop-$net-$batch.json"
      done
    done
  done
}

case $cmd in
  compare)
    for args in "$@"; do
      # shellcheck disable=SC2086
      job 600 $args
    done ;;
  busy)
    variants=as-written,preloaded,adam-fused,adam-foreach,cuda-graph,reduce-overhead
    common=(--device cuda --framework torch --no-report --timeout 150)
    mnist=(--variant "$variants" --sizes 32 --no-ceilings --param epochs=3
           --param train_samples=20000)
    job 120 --workload matmul --variant fp32,fp32-graph --sizes 256,512,1024,2048,4096,8192 \
      "${common[@]}"
    job 150 --workload mnist-small "${mnist[@]}" "${common[@]}"
    job 170 --workload mnist-wide "${mnist[@]}" "${common[@]}"
    job 60 --workload jacobian --variant per-sample,per-sample-graph --sizes 100 --no-ceilings \
      "${common[@]}"
    timeout 90 python3 benchmarks/busy_reference.py "$out/reference.json" > "$out/reference.log" \
      2>&1 || { echo "reference failed:"; tail -n 20 "$out/reference.log"; }
    python3 benchmarks/busy_compare.py --reference "$out/reference.json" "$runs"/*/ \
      | tee "$out/comparison.txt" ;;
  frameworks)
    # 4 epochs (one cold) on part of the data so the ranking can judge its gaps; wide goes last,
    # so it is what the budget cuts.
    mnist=(--framework torch,jax,keras-jax,keras-torch --device cpu,cuda:0 --sizes 32
           --param epochs=4 --no-ceilings --timeout 120)
    pair=(--framework torch,jax --device cpu,cuda:0 --quick --no-ceilings --timeout 40)
    job 180 --workload mnist-small "${mnist[@]}" --param train_samples=30000
    job 90 --workload matmul --framework torch,jax --device cpu,cuda:0 --variant all \
      --sizes 64,256,1024,4096 --quick --timeout 60
    job 60 --workload jacobian --variant per-sample,per-sample-fwd --sizes 100,1000 "${pair[@]}"
    # As written, batch b is 400 b backward passes: batch 20 keeps a call near half a second.
    job 60 --workload jacobian --variant as-written --sizes 20 "${pair[@]}"
    job 45 --workload transfer --framework jax --device cuda:0 --quick --no-ceilings --timeout 30
    job 170 --workload mnist-wide "${mnist[@]}" --param train_samples=15000 ;;
  capabilities)
    for workload in matmul jacobian elementwise transfer mnist-small; do
      limited "${JOB_S:-90}" python3 -m harness.cli compare --workload "$workload" \
        --variant all --quick --device cuda:0 --no-ceilings --no-report --out "$runs" \
        > "$out/$workload.log" 2>&1
      echo "== $workload: exit $?"
      run=$(ls -td "$runs"/*-"$workload"-*/ 2>/dev/null | head -n 1)
      [ -n "$run" ] && python3 - "$run/run.json" <<'PY'
import json, sys
cells = json.load(open(sys.argv[1]))["cells"]
workers = [c for c in cells if c.get("worker_started") is not False]
print(f"  {len(cells)} cells, {len(workers)} workers started, "
      f"{len(cells) - len(workers)} unavailable without a worker")
for c in cells:
    cell, status = c["cell"], c["status"]
    tag = ("UNDECLARED" if status == "unavailable" and c in workers else
           "FAILED" if status in ("error", "timeout", "invalid") else "")
    line = f"  {tag:10} {cell['variant']:20} {cell['framework']:17} {status:11}"
    print(line + (f" {c['reason'][:150]}" if tag else ""))
PY
      pack
    done ;;
  state)
    nvidia-smi -q -d CLOCK,POWER,TEMPERATURE,PERFORMANCE > "$out/nvidia-smi-before.txt" 2>&1
    for workload in mnist-small mnist-wide; do
      job 75 --workload $workload --framework torch --device cpu,cuda:0 --variant preloaded \
        --sizes 32,512 --param epochs=3 --no-ceilings --no-report --timeout 70
    done
    hand_energy
    job 150 --workload mnist-small --framework torch --device cuda:0 \
      --variant reduce-overhead,cuda-graph --sizes 32 --param epochs=3 --no-ceilings --timeout 140
    job 100 --workload mnist-small --framework jax,keras-jax --device cuda:0 \
      --variant as-written --sizes 32 --param epochs=3 --no-ceilings --timeout 95
    job 150 --workload mnist-wide --framework torch --device cuda:0 \
      --variant reduce-overhead,cuda-graph --sizes 32,512 --param epochs=3 --no-ceilings \
      --timeout 140
    nvidia-smi -q -d CLOCK,POWER,TEMPERATURE,PERFORMANCE > "$out/nvidia-smi-after.txt" 2>&1
    python3 benchmarks/gpu_summary.py "$runs" "$runs/hand" | tee "$out/summary-state.txt" ;;
  ddp)
    gpus=$(python3 -c 'import torch; print(torch.cuda.device_count())')
    echo "torch sees $gpus GPU(s)"
    for batch in 32 512; do
      for net in small wide; do
        job 120 --workload mnist-ddp --framework torch --device cuda --sizes "$(seq -s, 1 "$gpus")" \
          --param net=$net --param batch_size=$batch --param epochs=4 --timeout 110 --no-ceilings
      done
    done
    python3 benchmarks/gpu_summary.py "$runs" "$runs/hand" | tee "$out/summary-ddp.txt"
    [ "$gpus" -ge 2 ] && limited 120 python3 benchmarks/submitit_local_gpus.py --out "$runs" ;;
  blocks)
    limited 520 python3 benchmarks/mnist_blocks_check.py --device cpu,cuda:0 \
      --framework torch,jax,keras-jax,keras-torch --epochs "${EPOCHS:-3}" \
      --train-samples "${TRAIN_SAMPLES:-60000}" --out "$runs" | tee "$out/blocks-check.txt"
    verdicts | tee -a "$out/blocks-check.txt"
    pack ;;
  usermodel)
    job 120 --model examples/models/keras_mnist.py --framework keras-jax,keras-torch \
      --device cpu,cuda:0 --variant as-written,compiled --sizes 32,1024 --quick --no-ceilings \
      --timeout 50
    # As written, batch b is 400 b backward passes.
    job 70 --model examples/models/jacobian_net.py --device cpu,cuda:0 --sizes 10,20 --quick \
      --no-ceilings --timeout 40
    job 90 --model examples/models/small_cnn.py --device cpu,cuda:0 --variant all \
      --sizes 32,512 --quick --no-ceilings --timeout 40
    limited 90 python3 benchmarks/usermodel_overhead.py --device cuda --rounds 3 \
      | tee "$out/overhead.txt" ;;
  audit)
    for file in lstm_tagger attention_block small_cnn; do
      job 150 --model "examples/models/$file.py" --device cpu,cuda:0 --sizes 32,256 \
        --rounds 3 --timeout 120
      python3 -m harness.cli check "$(ls -td "$runs"/*/ | head -n 1)" \
        | tee -a "$out/check.txt"
    done
    for device in cuda:0 cpu; do
      limited 200 python3 benchmarks/keras_step_overhead.py --device "$device" \
        --framework keras-jax --rounds 3 | tee -a "$out/keras-fit.txt"
    done ;;
  advise)
    # harness advise on the seeds' models at the seeds' batches (seed 002's Keras file at 32,
    # the small CNN at 32, seed 000's Jacobian at 100), cpu and cuda:0, each capped at 3 min;
    # then the memory fit against the batch that really runs out (memory_fit_check.py).
    # The Jacobian's as-written CPU call takes seconds (the seed: 11 s at batch 100), so it
    # runs --quick (one round, a short timing budget) to fit the cap.
    for job_args in "keras_mnist 32 keras-jax" "small_cnn 32 torch" \
                    "jacobian_net 100 torch --quick"; do
      set -- $job_args
      limited 180 python3 -m harness.cli advise --model "examples/models/$1.py" --sizes "$2" \
        --framework "$3" --device cpu,cuda:0 --out "$runs" ${4:-} 2>&1 | tail -n 60
      python3 -m harness.cli check "$(ls -td "$runs"/*/ | head -n 1)" | tee -a "$out/check.txt"
      pack
    done ;;
  memfit)
    limited 120 python3 -m harness.cli compare --model examples/models/small_cnn.py \
      --framework torch --device cuda:0 --sizes 1024,4096,16384 --rounds 1 --no-ceilings \
      --out "$runs" 2>&1 | grep -i "memory\|verdict" | head -n 20
    limited 240 python3 benchmarks/memory_fit_check.py "$(ls -td "$runs"/*/ | head -n 1)" \
      --out "$out/memory-fit.json" ;;
  *) usage ;;
esac
pack
echo "=== done in $(( SECONDS - started )) s: $out/$cmd.tar.gz"
