# Issue 21, declared capabilities on one GPU (run it with `bash benchmarks/capabilities_gpu.sh`):
# every built-in single-GPU workload with `--variant all --quick --device cuda:0`, then, per run,
# how many cells started a worker, each cell's status, and the two findings that matter:
#   UNDECLARED: a worker started and its backend said `unavailable` (the declarations let the
#               cell through; if that holds on every machine, declare it in workloads/),
#   FAILED:     error / timeout / invalid (a declared cell that does not run).
# Frameworks missing on the machine (TensorFlow, Keras) are `unavailable` without a worker.
# Every run folder goes into $OUT/capabilities-gpu.tar.gz (rewritten after each job). Budget:
# each job gets at most JOB_S seconds (default 150); the whole script about 9 minutes.
set -u
out=${OUT:-results/gpu}
runs=results/capabilities-gpu
mkdir -p "$out" "$runs"
export PYTHONPATH=$PWD${PYTHONPATH:+:$PYTHONPATH} PYTHONUNBUFFERED=1 MPLCONFIGDIR=/tmp/mpl KERAS_HOME=/tmp/keras
JOB_S=${JOB_S:-150}

python3 -m harness.cli list > "$runs/list.txt" 2>&1
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader

for workload in matmul jacobian elementwise transfer mnist-small; do
  timeout -s INT "$JOB_S" python3 -m harness.cli compare --workload "$workload" --variant all \
    --quick --device cuda:0 --no-ceilings --no-report --out "$runs" > "$runs/$workload.log" 2>&1
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
  tar -czf "$out/capabilities-gpu.tar.gz" -C results capabilities-gpu
done
