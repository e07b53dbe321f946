"""Keras 3 on its TensorFlow backend: the shared Keras code (backends/keras/), TF's devices.

FRAMEWORK is plain data (importing this package imports neither keras nor tensorflow).
"""

from harness.backends.keras import WITHOUT_JAX, WITHOUT_SKLEARN
from harness.spec import FrameworkSpec

FRAMEWORK = FrameworkSpec(
    name="keras-tensorflow",
    import_name="keras",
    package="harness.backends.keras_tensorflow",
    install_hint="pip install 'crossframe-harness[keras,tensorflow]'",
    color="#FFB482",
    label="Keras 3 on TensorFlow",
    # Why: TF reserves nearly all GPU memory at start unless memory growth is on.
    environment={"KERAS_BACKEND": "tensorflow", "TF_FORCE_GPU_ALLOW_GROWTH": "true"},
    environment_defaults={"TF_CPP_MIN_LOG_LEVEL": "2"},
    also_requires=("tensorflow",),
    # Forked from a warm process (harness.run.forkserver): importing TensorFlow starts no
    # thread and no eager context. Not harness.backends.tensorflow.device: it lists the GPUs
    # at import, which would initialise TF's devices in the warm process, where none is seen.
    # Without Keras' scikit-learn wrappers and its JAX import (harness.backends.keras).
    preload=(*WITHOUT_SKLEARN, *WITHOUT_JAX, "tensorflow", "keras"),
)
