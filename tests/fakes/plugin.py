"""Test-only plugin (loaded through $HARNESS_PLUGINS): a fault-injection workload and backend."""

WORKLOADS = {"fault": "tests.fakes.workload:SPEC", "fault-rated": "tests.fakes.workload:RATED"}
# "json" stands in for the framework's import name: always installed.
FRAMEWORKS = {"fake": ("tests.fakes.backend", "json"),
              "absent": ("tests.fakes.backend", "harness_no_such_package"),
              "fakegpu": ("tests.fakes.gpubackend", "json")}
