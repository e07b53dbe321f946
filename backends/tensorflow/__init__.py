"""TensorFlow backend: placement with `tf.device`, sync with sync_devices.

FRAMEWORK is plain data (importing this package does not import tensorflow).
"""

from harness.backends.keras import WITHOUT_JAX, WITHOUT_SKLEARN
from harness.spec import FrameworkSpec

FRAMEWORK = FrameworkSpec(
    name="tensorflow",
    import_name="tensorflow",
    package="harness.backends.tensorflow",
    install_hint="pip install 'crossframe-harness[tensorflow]'",
    color="#DE8F05",
    label="TensorFlow",
    # Why: TF reserves nearly all GPU memory at start unless memory growth is on.
    # KERAS_BACKEND forced: its Keras code (MNIST, backends/keras/training.py; MirroredStrategy)
    # is TensorFlow's only on Keras' TensorFlow backend, whatever the shell says.
    environment={"TF_FORCE_GPU_ALLOW_GROWTH": "true", "KERAS_BACKEND": "tensorflow"},
    environment_defaults={"TF_CPP_MIN_LOG_LEVEL": "2"},
    # Forked from a warm process (harness.run.forkserver): importing TensorFlow starts no
    # thread and creates no eager context (that happens at the first op, in the child). Not
    # its device module: it lists the GPUs at import (harness.backends.keras_tensorflow).
    # Importing TensorFlow imports Keras 3 (tf.keras), and with it Keras' optional scikit-learn
    # and JAX (backends/keras): kept out as for keras-tensorflow, the warm process imports in
    # 3.4-4.5 s instead of 4.9-7.2 s on the 2-core VM (2026-11-28).
    preload=(*WITHOUT_SKLEARN, *WITHOUT_JAX, "tensorflow"),
)
