"""A fake framework: a cpu device that does its work in a background thread (asynchronous).

synchronize() joins the thread, so a clock read without it would miss the work, which is the
property the timing core must not fall for.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, field

from harness.backend import DeviceUnavailable


def version() -> str:
    return "0.0-fake"


def threads() -> dict:
    return {"intra_op": 1}


def list_devices() -> list[dict]:
    return [{"name": "cpu", "description": "fake cpu"}]


@dataclass
class FakeDevice:
    name: str = "cpu"
    description: str = "fake cpu"
    pending: list[threading.Thread] = field(default_factory=list)
    is_gpu: bool = False

    def launch(self, work) -> None:
        """Start work and return at once, like a kernel launch."""
        thread = threading.Thread(target=work)
        thread.start()
        self.pending.append(thread)

    def synchronize(self) -> None:
        while self.pending:
            self.pending.pop().join()

    def peak_memory_bytes(self) -> int | None:
        return None


def open_device(name: str) -> FakeDevice:
    if name != "cpu":
        raise DeviceUnavailable(f"the fake framework has no {name}")
    return FakeDevice()
