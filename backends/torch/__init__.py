"""PyTorch backend: placement with `.to(device)`, device-wide torch.cuda.synchronize.

FRAMEWORK is plain data (importing this package does not import torch); the harness finds it
through the `harness.frameworks` entry point or its built-in table.
"""

from harness.spec import FrameworkSpec

FRAMEWORK = FrameworkSpec(
    name="torch",
    import_name="torch",
    package="backends.torch",
    install_hint="pip install 'harness[torch]'",
    color="#0173B2",
    label="PyTorch",
    # Keras, if a workload uses it inside a torch cell, must not pull in TensorFlow.
    environment_defaults={"KERAS_BACKEND": "torch"},
)
