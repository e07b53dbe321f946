"""Test-only plugin (loaded through $HARNESS_PLUGINS): a fault-injection workload and backend."""

from harness.spec import FrameworkSpec

WORKLOADS = {"fault": "tests.fakes.workload:SPEC", "fault-rated": "tests.fakes.workload:RATED"}
# "json" stands in for the framework's import name: always installed.
# "fake" declares a preload, so its workers are forked from a warm process as torch's are
# (harness.run.forkserver): every run of the suite's fault backend goes through the fork.
FRAMEWORKS = {"fake": FrameworkSpec(name="fake", import_name="json", package="tests.fakes.backend",
                                    install_hint="pip install 'crossframe-harness[fake]'",
                                    preload=("tests.fakes.backend.device",)),
              "absent": ("tests.fakes.backend", "harness_no_such_package"),
              "fakegpu": ("tests.fakes.gpubackend", "json")}
