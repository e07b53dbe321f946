#!/usr/bin/env bash
# Run the README's main commands as written, in a
# scratch copy of results/, and print one line per command: its exit code and wall seconds.
# The SLURM commands need a cluster: tests/test_slurm.py runs them against a one-node SLURM.
#   bash benchmarks/readme_commands.sh            (from the repository root, .venv installed)
set -u
cd "$(dirname "$0")/.."
export PATH=$PWD/.venv/bin:$PATH
scratch=$(mktemp -d /tmp/readme-XXXX)
cp -r examples "$scratch/" && cd "$scratch" || exit 1
export PYTHONPATH=$OLDPWD
failed=0
run() {  # run LABEL COMMAND...: one line per command
  local started=$SECONDS
  count=$(( count + 1 ))
  "$@" > "log-$count.txt" 2>&1
  local code=$?
  printf '%-4s rc=%-3s %4ss  %s\n' "$count" "$code" "$(( SECONDS - started ))" "$*"
  [ "$code" = 0 ] || failed=1
}
count=0
run harness compare --workload matmul --quick
run harness compare --workload elementwise --variant all --quick --device cpu
run harness compare --model examples/models/keras_mnist.py --sizes 32,256
run harness list
run harness list --model examples/models/small_cnn.py
run harness env
runs=($(ls -d results/*/ | head -2))
run harness report "${runs[0]}" "${runs[1]}" --out merged/ --html
run harness diff "${runs[0]}" "${runs[0]}"
run harness diff "${runs[0]}" "${runs[0]}" --fail-on-regression 10
run harness export "${runs[0]}" "${runs[1]}" --format parquet --out all.parquet
run python -c '
import harness
result = harness.compare("matmul", frameworks=["torch", "numpy"], devices=["cpu"],
                         sizes=[256, 1024], quick=True, out="results")
print(result.frame.shape, result.path, len(result.cells))
frame = harness.load([str(result.path)])
print(frame.shape)'
echo "logs in $scratch"
exit $failed
