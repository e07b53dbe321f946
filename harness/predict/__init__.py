"""Predicting a GPU step from a CPU run (issue 51): the parts the prediction stands on.

- `profile`: a device profile, measured by the harness itself on one device (never copied from
  a datasheet), its versioned JSON form and its loader; `profiles/` holds the shipped ones.
- `make` / `devicechild`: `harness profile-device` measures one in a child process (the
  framework code is backends/torch/gpuprofile.py; this package never imports torch).
- `hostspeed`: the host CPU's single-thread speed, so host costs measured on one machine can
  be rescaled to another.
- `features`: the device-independent features of one step (ops with shapes, dtypes, FLOPs and
  bytes, the serial chain, host time per op, copies, sync points, precision); collected by
  backends/torch/features.py from a CPU run.

- `model` (with `kernels` and `rates`): the predicted GPU step from features and a profile,
  with the host's launch queue and the device's kernels, copies, sync stalls and variants.
- `jaxfeatures`, `hlo`, `jaxmodel`: a jitted JAX step's features (its compiled program's
  kernels, read from the optimized HLO, and its host costs; backends/jax/features.py records
  them), its model on a profile's JAX rows, and `predict_any`: any framework's stored record
  predicted (TensorFlow's "unknown": no profile).
"""
