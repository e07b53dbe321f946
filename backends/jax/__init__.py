"""JAX backend: placement with jax.device_put / jax.default_device, sync on the step's output.

FRAMEWORK is plain data (importing this package does not import jax).
"""

from harness.spec import FrameworkSpec

FRAMEWORK = FrameworkSpec(
    name="jax",
    import_name="jax",
    package="harness.backends.jax",
    install_hint="pip install 'crossframe-harness[jax]'",
    color="#9467BD",
    label="JAX",
    # Why: JAX reserves 75% of GPU memory at start unless told not to.
    environment={"XLA_PYTHON_CLIENT_PREALLOCATE": "false"},
    # JAX has no device-wide wait: the worker blocks on each step's returned output.
    sync="output",
    also_requires=("optax",),  # Adam for the MNIST step
    # Imported once per run and forked (harness.run.forkserver): importing jax and optax starts
    # no thread and no XLA client (jax._src.xla_bridge._backends stays empty until the first
    # device call, in the child); the device module only defines functions.
    preload=("jax", "optax", "harness.backends.jax.device", "harness.run.worker"),
)
