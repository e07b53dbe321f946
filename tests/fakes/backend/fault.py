"""Tasks that misbehave on purpose at size 2 (the first size always succeeds)."""

from __future__ import annotations

import os
import signal
import subprocess
import time


class AlternatingTask:
    """Calls alternate 1 ms and 20 ms: two behaviours that a median alone would hide.

    20 ms, not closer: with another process on both cores a 1 ms sleep can wake several ms
    late, and 1 vs 8 ms then fell under the 2x gap the bimodal rule asks for (seen once with
    the suite on two pytest processes)."""

    def __init__(self, values: list[int], device) -> None:
        self.values, self.device, self.calls, self.total = values, device, 0, None

    def step(self) -> None:
        self.calls += 1
        delay_s = 0.001 if self.calls % 2 else 0.020

        def work() -> None:
            time.sleep(delay_s)
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
    raise AssertionError(variant)
