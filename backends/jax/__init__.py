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
)
