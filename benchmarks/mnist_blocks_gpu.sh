# MNIST block samples vs whole epochs on one GPU machine (H200: torch and jax with CUDA, no
# TensorFlow; Keras from the carried wheels in .whl/, carry: [".whl"], as frameworks_gpu.sh).
# Run with `bash benchmarks/mnist_blocks_gpu.sh`: mnist-wide, 3 epochs of 60,000 samples at
# batch 32, torch, jax, keras-jax and keras-torch on cpu and cuda:0, then per cell the median
# block sample, the median warm whole epoch and their ratio (benchmarks/mnist_blocks_check.py),
# and the run's verdict lines as `harness compare` prints them. Everything lands in $OUT.
set -u
if ls .whl/*.whl >/dev/null 2>&1; then
  python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site .whl/*.whl
  export PYTHONPATH=/tmp/site${PYTHONPATH:+:$PYTHONPATH}
fi
out=${OUT:-results/gpu}
mkdir -p "$out"
export PYTHONPATH=$PWD${PYTHONPATH:+:$PYTHONPATH} PYTHONUNBUFFERED=1 MPLCONFIGDIR=/tmp/mpl KERAS_HOME=/tmp/keras
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader
timeout 560 python3 benchmarks/mnist_blocks_check.py --device cpu,cuda:0 \
  --framework torch,jax,keras-jax,keras-torch --epochs "${EPOCHS:-3}" \
  --train-samples "${TRAIN_SAMPLES:-60000}" --out results/blocks-check | tee "$out/blocks-check.txt"
run=$(ls -td results/blocks-check/*/ 2>/dev/null | head -n 1)
if [ -n "$run" ]; then
  python3 -c "import sys; from harness.report import verdict_lines; print('\n'.join(verdict_lines([sys.argv[1]])))" "$run" | tee -a "$out/blocks-check.txt"
  tar czf "$out/blocks-check.tar.gz" "$run"
fi
