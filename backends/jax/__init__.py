"""JAX backend: placement with jax.device_put / jax.default_device, sync on the step's output.

FRAMEWORK is plain data (importing this package does not import jax).
"""

from harness.spec import FrameworkSpec

# JAX's persistent compilation cache: where (the variable JAX reads at import, and the jax
# device module again in a forked worker) and what (every program, however quick to compile
# or small; JAX's defaults keep only those over a second or a size).
JAX_CACHE_VARIABLE = "JAX_COMPILATION_CACHE_DIR"
JAX_CACHE_KEEPS_ALL = {"JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS": "0",
                       "JAX_PERSISTENT_CACHE_MIN_ENTRY_SIZE_BYTES": "0"}

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
    preload=("jax", "optax", "harness.backends.jax.device"),
    # Later rounds of a cell load round 0's compiled programs (on the H200 17 of a GPU MNIST
    # worker's 21 s went to compiling and autotuning; ~1.4 s of each cpu MNIST
    # worker's 2.2 s of tracing and compiling on the 2-core VM); every size is kept.
    compile_cache_variable=JAX_CACHE_VARIABLE,
    compile_cache_environment=JAX_CACHE_KEEPS_ALL,
)
