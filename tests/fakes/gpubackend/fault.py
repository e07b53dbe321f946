"""The fault workload's tasks, shared with the fake cpu backend."""

from tests.fakes.backend.fault import make_task  # noqa: F401
