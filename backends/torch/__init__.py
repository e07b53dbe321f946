"""PyTorch backend: placement with `.to(device)`, device-wide torch.cuda.synchronize.

FRAMEWORK is plain data (importing this package does not import torch); the harness finds it
through the `harness.frameworks` entry point or its built-in table.
"""

from harness.spec import FrameworkSpec

# --quick: Inductor takes the CPU's vector ISA from /proc/cpuinfo instead of proving it, in every
# process, by compiling a test library per candidate ISA and loading each in a new Python. On
# the H100 machine's 16-core host that proof was 50 s of a small CNN's 52 s first compiled CPU
# call with the compile cache warm (cProfile: cpu_vec_isa.check_build 53 s, its probe children
# 48 s): the largest single cost of a --quick run. A full run keeps torch's default, so its
# cold call is the one users meet.
QUICK_COMPILE = {"TORCHINDUCTOR_VEC_ISA_OK": "1"}

FRAMEWORK = FrameworkSpec(
    name="torch",
    import_name="torch",
    package="harness.backends.torch",
    install_hint="pip install 'crossframe-harness[torch]'",
    color="#0173B2",
    label="PyTorch",
    # Keras, if a workload uses it inside a torch cell, must not pull in TensorFlow.
    environment_defaults={"KERAS_BACKEND": "torch"},
    quick_environment_defaults=QUICK_COMPILE,
    # Imported once per run and forked (harness.run.forkserver): torch's import starts no
    # thread pool and opens no device. torch._dynamo is named: torch.optim no longer imports it,
    # the first optimizer does (~0.8 s of every worker's warm-up on the 2-core VM: cProfile of
    # an MNIST cell, Adam.__init__); its import starts no thread either.
    preload=("torch", "torch.optim", "torch._dynamo", "harness.backends.torch.device"),
)
