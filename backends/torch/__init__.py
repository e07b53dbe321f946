"""PyTorch backend: placement with `.to(device)`, device-wide torch.cuda.synchronize.

FRAMEWORK is plain data (importing this package does not import torch); the harness finds it
through the `harness.frameworks` entry point or its built-in table.
"""

from harness.spec import FrameworkSpec

# --quick: torch.compile compiles in this process, not in Inductor's pool of compile workers.
# For a small model the pool's start dominates the cold call: on the H100 machine's 16-core
# host a small CNN's first compiled training steps (batch 8, then 64) took 8.8 + 7.9 s with
# the default pool and 1.7 + 0.7 s with one thread; a CPU cell's first compiled call took 77 s
# there. A full run keeps torch's default, so its cold call is the one users meet.
QUICK_COMPILE = {"TORCHINDUCTOR_COMPILE_THREADS": "1"}

FRAMEWORK = FrameworkSpec(
    name="torch",
    import_name="torch",
    package="backends.torch",
    install_hint="pip install 'harness[torch]'",
    color="#0173B2",
    label="PyTorch",
    # Keras, if a workload uses it inside a torch cell, must not pull in TensorFlow.
    environment_defaults={"KERAS_BACKEND": "torch"},
    quick_environment_defaults=QUICK_COMPILE,
)
