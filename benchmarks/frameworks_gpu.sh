python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site .whl/*.whl && export PYTHONPATH=/tmp/site:$PYTHONPATH
# Issue 18 on one GPU machine (H200; python3 3.12, torch CUDA, jax CUDA, optax; no TensorFlow,
# no Keras): the line above installs the carried Keras wheels (keras, namex, optree from .whl/,
# git-ignored, carried with `carry: [".whl"]`). Then MNIST small and wide at batch 32 in torch,
# jax, keras-jax and keras-torch on cpu and cuda:0 (4 epochs on 30,000 / 15,000 samples),
# matmul and the Jacobian in torch and jax, and the JAX transfer cells (run it with
# `bash benchmarks/frameworks_gpu.sh`); every run folder goes into $OUT/frameworks-gpu.tar.gz
# (rewritten after each job, so a kill keeps what finished), and each job prints its summary's
# verdict lines. Budget: every job ends by BUDGET_S (530 s) after the start; one that would get
# under 40 s is skipped and says so; an interrupted run keeps its finished cells.
set -u
out=${OUT:-results/gpu}
runs=results/frameworks-gpu
mkdir -p "$out" "$runs"
export PYTHONPATH=$PWD${PYTHONPATH:+:$PYTHONPATH} PYTHONUNBUFFERED=1 MPLCONFIGDIR=/tmp/mpl KERAS_HOME=/tmp/keras
BUDGET_S=${BUDGET_S:-530}
started=$SECONDS

python3 - <<'PY'
from importlib.metadata import PackageNotFoundError, version  # no import: Keras needs a backend
for name in ("torch", "jax", "jaxlib", "optax", "keras", "optree", "namex"):
    try:
        print(f"{name} {version(name)}")
    except PackageNotFoundError:  # the cells say 'unavailable' with the reason
        print(f"{name} missing")
PY
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader

verdicts() {  # the summary's verdict lines: "At a glance" and the framework verdicts
  local run summary
  run=$(ls -td "$runs"/*/ 2>/dev/null | head -n 1)
  [ -n "$run" ] || { echo "(no run folder)"; return; }
  summary=${run}summary.md
  # An interrupted compare draws no report; draw it from what finished.
  [ -f "$summary" ] || python3 -m harness.cli report "$run" >/dev/null 2>&1
  [ -f "$summary" ] || { echo "(no summary.md in $run)"; return; }
  awk '/^## At a glance/ {on=1} /^### Framework verdict/ {on=1}
       on && /^## / && !/^## At a glance/ {on=0} on && /^### / && !/^### Framework verdict/ {on=0}
       on' "$summary"
}

job() {  # job SECONDS_LIMIT compare-args...
  local limit=$1; shift
  local elapsed=$((SECONDS - started))
  local left=$((BUDGET_S - elapsed))
  if [ "$left" -lt 40 ]; then
    echo "=== skipped (${elapsed}s of ${BUDGET_S}s used): harness compare $*"; return
  fi
  [ "$limit" -gt "$left" ] && limit=$left
  echo "=== [${elapsed}s, limit ${limit}s] harness compare $*"
  timeout --signal=INT --kill-after=10 "$limit" python3 -m harness.cli compare "$@" \
    --out "$runs" 2>&1 | tail -n 40
  verdicts
  tar -czf "$out/frameworks-gpu.tar.gz" -C results frameworks-gpu
}

# 4 epochs (one cold, three warm: enough samples for the ranking to judge its gaps) on part of
# the data to fit the budget: 30,000 samples (938 steps) small, 15,000 (469 steps) wide;
# compare per step. Wide goes last: if the budget runs out, it is what is cut.
MNIST="--framework torch,jax,keras-jax,keras-torch --device cpu,cuda:0 --sizes 32"
MNIST="$MNIST --param epochs=4 --no-ceilings --timeout 120"
# shellcheck disable=SC2086
job 180 --workload mnist-small $MNIST --param train_samples=30000
job 90 --workload matmul --framework torch,jax --device cpu,cuda:0 --variant all \
  --sizes 64,256,1024,4096 --quick --timeout 60
job 60 --workload jacobian --framework torch,jax --device cpu,cuda:0 \
  --variant per-sample,per-sample-fwd --sizes 100,1000 --quick --no-ceilings --timeout 40
# As written at batch 20: torch's loop is 8,000 backward passes (batch 100 takes ~12 s a call).
job 60 --workload jacobian --framework torch,jax --device cpu,cuda:0 --variant as-written \
  --sizes 20 --quick --no-ceilings --timeout 40
job 45 --workload transfer --framework jax --device cuda:0 --quick --no-ceilings --timeout 30
# shellcheck disable=SC2086
job 170 --workload mnist-wide $MNIST --param train_samples=15000
echo "=== done in $((SECONDS - started)) s: $out/frameworks-gpu.tar.gz"
