"""Tasks that misbehave on purpose at size 2 (the first size always succeeds)."""

from __future__ import annotations

import os
import signal
import subprocess
import time


class VirtualClock:
    """The worker's timing clock, moved only by the seconds each call says it takes.

    Why: on a loaded machine (the suite's other pytest process, a hypervisor stealing time) a
    1 ms sleep wakes several ms late and the host-load guard calls the case contended, so a
    test of what the worker does with two levels of calls would judge the machine instead.
    Read through harness.measure.timing._clock, the one clock every timed call reads."""

    def __init__(self) -> None:
        self.now_s = 0.0

    def read(self) -> float:
        return self.now_s

    def advance(self, seconds: float) -> None:
        self.now_s += seconds


def pin_timing_inputs() -> VirtualClock:
    """From here on in this worker: the timing clock is a VirtualClock and no host load is
    read (as on an OS without /proc), so what the case records is decided by its calls."""
    from harness.measure import hostload, timing

    clock = VirtualClock()
    timing._clock = clock.read
    hostload.snapshot = lambda group=None: None
    return clock


class AlternatingTask:
    """Calls alternate 1 ms and 20 ms: two behaviours that a median alone would hide.

    The durations are a VirtualClock's (pin_timing_inputs), not sleeps: a sleep's wake-up and
    the cores' other users are the machine's, and the bimodal verdict must not depend on
    them (issue 50: another pytest process once made the case SUSPECT for contention)."""

    def __init__(self, values: list[int], device) -> None:
        self.values, self.device, self.calls, self.total = values, device, 0, None
        self.clock = pin_timing_inputs()

    def step(self) -> None:
        self.calls += 1
        delay_s = 0.001 if self.calls % 2 else 0.020

        def work() -> None:
            self.clock.advance(delay_s)
            self.total = sum(self.values)

        self.device.launch(work)

    def output(self) -> dict:
        return {"total": self.total}


class SumTask:
    def __init__(self, values: list[int], device, offset: int = 0, delay_s: float = 0.0) -> None:
        self.values, self.device, self.offset, self.delay_s = values, device, offset, delay_s
        self.total = None

    def step(self) -> None:
        def work() -> None:
            time.sleep(self.delay_s)
            self.total = sum(self.values) + self.offset

        self.device.launch(work)

    def output(self) -> dict:
        return {"total": self.total}


# Timings of each case so far in this process: the throttle variants say "throttled" through
# the fake NVML (tests.fakes.nvml reads FAKE_NVML_THROTTLE at every poll) on the first timing
# only (throttled-once) or on every timing (throttled-always).
TIMINGS: dict[int, int] = {}
SW_THERMAL_SLOWDOWN = "0x20"


def throttle_as_told(case: dict, variant: str) -> None:
    TIMINGS[case["size"]] = TIMINGS.get(case["size"], 0) + 1
    first = TIMINGS[case["size"]] == 1
    throttled = variant == "throttled-always" or (variant == "throttled-once" and first)
    os.environ["FAKE_NVML_THROTTLE"] = SW_THERMAL_SLOWDOWN if throttled else "0"


def make_task(case: dict, variant: str, device, inputs: dict) -> SumTask:
    if variant.startswith("throttled-"):
        throttle_as_told(case, variant)
        return SumTask(inputs["values"], device, delay_s=0.001)
    if case["size"] < 2 or variant == "ok":
        return SumTask(inputs["values"], device)
    if variant == "error":
        raise ValueError("injected failure")
    if variant == "segfault":
        os.kill(os.getpid(), signal.SIGSEGV)
    if variant == "sigkill":
        os.kill(os.getpid(), signal.SIGKILL)
    if variant == "hang":
        if case["pid_file"]:  # where a test waits to see the hang begin
            with open(case["pid_file"], "w") as pid_file:
                pid_file.write(str(os.getpid()))
        time.sleep(3600)
    if variant == "child-hang":
        child = subprocess.Popen(["sleep", "3600"])
        with open(case["pid_file"], "w") as pid_file:
            pid_file.write(str(child.pid))
        time.sleep(3600)
    if variant == "oom":
        raise MemoryError("CUDA out of memory. Tried to allocate 20.00 GiB")
    if variant == "invalid":
        return SumTask(inputs["values"], device, offset=1)
    if variant == "bimodal":
        return AlternatingTask(inputs["values"], device)
    if variant == "slow":
        return SumTask(inputs["values"], device, delay_s=0.5)
    if variant == "grow":
        grow_until_stopped()
    raise AssertionError(variant)


GROW_CHUNK = 16 << 20  # bytes, each touched so that it is resident
GROW_AT_MOST = 48  # chunks (768 MB): where the memory guard failed, the test's timeout ends it


def grow_until_stopped() -> None:
    """A model that allocates without bound: resident memory grows until the guard stops it."""
    hoard = []
    for _ in range(GROW_AT_MOST):
        hoard.append(b"\x01" * GROW_CHUNK)
        time.sleep(0.02)
    time.sleep(3600)


# A planted features record (tests/test_run_finish.py): where FAKE_STEP_FEATURES names a JSON
# file of extra fields, the fake's cases record them as the features pass
# (harness/run/casepasses.py features_pass) would, so a fake run's end predicts a GPU step
# from real features. Unset (every other test): the fake has no step_features at all.
PLANTED_FEATURES = "FAKE_STEP_FEATURES"


def planted_step_features(step, variant: str, inputs: dict, seconds_per_call) -> dict:
    import json

    with open(os.environ[PLANTED_FEATURES]) as planted:
        return json.load(planted)


def __getattr__(name: str):
    if name == "step_features" and os.environ.get(PLANTED_FEATURES):
        return planted_step_features
    raise AttributeError(name)
