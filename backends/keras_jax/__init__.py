"""Keras 3 on its JAX backend: the shared Keras code (backends/keras/), JAX's devices and sync.

FRAMEWORK is plain data (importing this package imports neither keras nor jax).
"""

from harness.backends.jax import JAX_CACHE_KEEPS_ALL, JAX_CACHE_VARIABLE
from harness.backends.keras import WITHOUT_SKLEARN
from harness.spec import FrameworkSpec

FRAMEWORK = FrameworkSpec(
    name="keras-jax",
    import_name="keras",
    package="harness.backends.keras_jax",
    install_hint="pip install 'crossframe-harness[keras,jax]'",
    color="#C5B0D5",
    label="Keras 3 on JAX",
    # Keras reads its backend once, at import: forced, whatever the shell says.
    environment={"KERAS_BACKEND": "jax", "XLA_PYTHON_CLIENT_PREALLOCATE": "false"},
    sync="output",
    also_requires=("jax",),
    # Forked from a warm process (harness.run.forkserver): Keras' import on JAX initialises no
    # backend; the pyarrow thread it brings (through pandas) is off in the warm process.
    # Without Keras' scikit-learn wrappers (harness.backends.keras).
    preload=(*WITHOUT_SKLEARN, "jax", "keras", "harness.backends.keras_jax.device"),
    compile_cache_variable=JAX_CACHE_VARIABLE,  # as jax's (backends/jax/__init__.py)
    compile_cache_environment=JAX_CACHE_KEEPS_ALL,
)
