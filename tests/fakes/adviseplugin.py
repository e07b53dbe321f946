"""Test-only plugin beside tests.fakes.plugin (HARNESS_PLUGINS lists both): two fault
workloads of two variants each, small enough for a `harness advise` run in tests/test_advise.py
and kept out of the suite's own registry (every registered workload is contract-tested)."""

WORKLOADS = {"fault-advise": "tests.fakes.workload:ADVISE_FIX_FAILS",
             "fault-advise-broken": "tests.fakes.workload:ADVISE_BASELINE_FAILS"}
