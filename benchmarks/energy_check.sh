#!/usr/bin/env bash
# Energy per step on one GPU: the harness's energy per step against a hand NVML
# reading (benchmarks/energy_by_hand.py) of the same loop and of a hand-written one, REPS times
# interleaved (harness runs, then the hand runs), so run-to-run spread is seen beside the gap.
#   python3 -m pip install -q --no-index --no-deps --target /tmp/site .whl/*.whl
#   export PYTHONPATH=/tmp/site:$PWD; REPS=2 bash benchmarks/energy_check.sh OUT
set -u
out=${1:?usage: benchmarks/energy_check.sh OUT}
reps=${REPS:-2}
mkdir -p "$out/runs"
export PYTHONPATH=${PYTHONPATH:-}${PYTHONPATH:+:}$PWD MPLCONFIGDIR=/tmp/mpl PYTHONUNBUFFERED=1
for rep in $(seq 1 "$reps"); do
  runs=$out/runs/rep$rep
  for workload in mnist-small mnist-wide; do
    timeout 100 python3 -m harness.cli compare --workload $workload --framework torch \
      --device cuda:0 --variant preloaded --sizes 32,512 --param epochs=3 --no-ceilings \
      --no-report --out "$runs" > "$out/log-$rep-$workload.txt" 2>&1
  done
  for net in small wide; do
    for batch in 32 512; do
      for loop in harness own; do
        timeout 40 python3 benchmarks/energy_by_hand.py --net $net --batch $batch --seconds 5 \
          --idle-seconds 2 --loop $loop --out "$runs/hand/hand-$loop-$net-$batch.json" 2>&1 \
          | grep -E '^hand|Error'
      done
    done
  done
  python3 benchmarks/gpu_summary.py "$runs" "$runs/hand" | sed -n '2,5p' \
    | tee "$out/summary-rep$rep.txt"
done
tar -czf "$out/energy-runs.tar.gz" -C "$out" runs && rm -rf "$out/runs"
