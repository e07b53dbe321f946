"""NumPy backend: the CPU baseline; synchronous by nature."""

from harness.spec import FrameworkSpec

FRAMEWORK = FrameworkSpec(
    name="numpy",
    import_name="numpy",
    package="harness.backends.numpy",
    install_hint="pip install numpy",
    color="#029E73",
    label="NumPy",
    cpu_only=True,
)
