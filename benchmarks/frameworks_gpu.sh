python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site .whl/*.whl && export PYTHONPATH=/tmp/site:$PYTHONPATH
# Issue 18 on one GPU machine (H200; python3 3.12, torch CUDA, jax CUDA, optax; no TensorFlow,
# no Keras): the line above installs the carried Keras wheels (keras, namex, optree from .whl/,
# git-ignored, carried with `carry: [".whl"]`). Then MNIST small and wide at batch 32 in torch,
# jax, keras-jax and keras-torch on cpu and cuda:0 (2 epochs each: one cold, one warm; wide on
# 30,000 samples per epoch), matmul and the Jacobian in torch and jax, and the JAX transfer
# cells (run it with `bash benchmarks/frameworks_gpu.sh`); every run folder goes into
# $OUT/frameworks-gpu.tar.gz (rewritten after each job, so a kill keeps what finished), and each
# job prints its summary's verdict lines. Budget: < 9 min; a job that would start after
# DEADLINE_S is skipped and says so.
set -u
out=${OUT:-results/gpu}
runs=results/frameworks-gpu
mkdir -p "$out" "$runs"
export PYTHONPATH=$PWD${PYTHONPATH:+:$PYTHONPATH} PYTHONUNBUFFERED=1 MPLCONFIGDIR=/tmp/mpl KERAS_HOME=/tmp/keras
DEADLINE_S=${DEADLINE_S:-470}
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
  local summary
  summary=$(ls -td "$runs"/*/ 2>/dev/null | head -n 1)summary.md
  [ -f "$summary" ] || { echo "(no summary.md)"; return; }
  awk '/^## At a glance/ {on=1} /^### Framework verdict/ {on=1}
       on && /^## / && !/^## At a glance/ {on=0} on && /^### / && !/^### Framework verdict/ {on=0}
       on' "$summary"
}

job() {  # job SECONDS_LIMIT compare-args...
  local limit=$1; shift
  local elapsed=$((SECONDS - started))
  if [ $((elapsed + 30)) -gt "$DEADLINE_S" ]; then
    echo "=== skipped (at ${elapsed}s of ${DEADLINE_S}s): harness compare $*"; return
  fi
  echo "=== [${elapsed}s] harness compare $*"
  timeout --signal=INT --kill-after=15 "$limit" python3 -m harness.cli compare "$@" \
    --out "$runs" 2>&1 | tail -n 40
  verdicts
  tar -czf "$out/frameworks-gpu.tar.gz" -C results frameworks-gpu
}

MNIST="--framework torch,jax,keras-jax,keras-torch --device cpu,cuda:0 --sizes 32"
MNIST="$MNIST --param epochs=2 --no-ceilings --timeout 150"
# shellcheck disable=SC2086
job 170 --workload mnist-small $MNIST
# Wide on half an epoch's samples (938 steps) to fit the budget: compare it per step.
# shellcheck disable=SC2086
job 170 --workload mnist-wide $MNIST --param train_samples=30000
job 90 --workload matmul --framework torch,jax --device cpu,cuda:0 --variant all \
  --sizes 64,256,1024,4096 --quick --timeout 60
job 60 --workload jacobian --framework torch,jax --device cpu,cuda:0 \
  --variant per-sample,per-sample-fwd --sizes 100,1000 --quick --no-ceilings --timeout 40
# As written at batch 20: torch's loop is 8,000 backward passes (batch 100 takes ~12 s a call).
job 60 --workload jacobian --framework torch,jax --device cpu,cuda:0 --variant as-written \
  --sizes 20 --quick --no-ceilings --timeout 40
job 45 --workload transfer --framework jax --device cuda:0 --quick --no-ceilings --timeout 30
echo "=== done in $((SECONDS - started)) s: $out/frameworks-gpu.tar.gz"
