#!/usr/bin/env bash
# Run harness jobs on a GPU machine and pack every run folder into $OUT/runs-<tag>.tar.gz.
#   benchmarks/gpu_session.sh TAG "compare args" ["compare args" ...]
# Each argument is one `harness compare` command line (without the word compare); a job that
# fails still leaves its run folder, and the archive is rewritten after every job so a
# command killed at its time limit returns what finished.
set -u
tag=$1; shift
out=${OUT:-results/gpu}
mkdir -p "$out" results/gpu-runs
export PYTHONPATH=$PWD${PYTHONPATH:+:$PYTHONPATH} PYTHONUNBUFFERED=1
export MPLCONFIGDIR=/tmp/mpl KERAS_HOME=/tmp/keras
for job in "$@"; do
  echo "=== harness compare $job"
  # shellcheck disable=SC2086
  python3 -m harness.cli compare $job --out results/gpu-runs 2>&1 | tail -n 60
  tar -czf "$out/runs-$tag.tar.gz" -C results gpu-runs
done
