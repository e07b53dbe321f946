"""Keras 3 on its torch backend: the shared Keras code (backends/keras/), torch's devices.

FRAMEWORK is plain data (importing this package imports neither keras nor torch).
"""

from harness.backends.keras import WITHOUT_JAX, WITHOUT_SKLEARN
from harness.backends.torch import QUICK_COMPILE
from harness.spec import FrameworkSpec

FRAMEWORK = FrameworkSpec(
    name="keras-torch",
    import_name="keras",
    package="harness.backends.keras_torch",
    install_hint="pip install 'crossframe-harness[keras,torch]'",
    color="#A1C9F4",
    label="Keras 3 on PyTorch",
    environment={"KERAS_BACKEND": "torch"},  # forced: Keras reads it once, at import
    also_requires=("torch",),
    quick_environment_defaults=QUICK_COMPILE,  # its jit_compile is torch.compile
    # Forked from a warm process (harness.run.forkserver), as torch is; Keras' import on
    # torch opens no device (the pyarrow thread it brings is off in the warm process).
    # Without Keras' scikit-learn wrappers and its JAX import (harness.backends.keras).
    preload=(*WITHOUT_SKLEARN, *WITHOUT_JAX, "torch", "torch.optim", "torch._dynamo", "keras",
             "harness.backends.keras_torch.device"),
)
