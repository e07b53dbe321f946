"""What every family's implementation shares: the timed call that keeps its first results."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

from harness.backend import VariantUnavailable
from harness.workloads.usermodel.source import UserCodeError, user_error_text

if TYPE_CHECKING:  # spec imports this module's family implementations' helpers at run time
    from harness.workloads.usermodel.spec import ModelInputs


class ModelTask:
    """One prepared case of a user's model: step() is the timed call, output() the results.

    The first `keep` results are kept (through `snapshot`, which copies what a later call could
    overwrite, e.g. a CUDA graph's static output): they came from the shared initial weights,
    so they are what the check compares with the CPU reference, however many calls the timing
    makes afterwards. Later calls pay one integer comparison.
    """

    def __init__(self, call: Callable[[], Any], path: str, keep: int,
                 snapshot: Callable[[Any], Any], to_numpy: Callable[[Any], Any],
                 extra: dict[str, object] | None = None, spe: bool = False) -> None:
        self.call, self.path, self.keep = call, path, keep
        self.snapshot, self.to_numpy = snapshot, to_numpy
        self.kept: list[Any] = []
        # The model's output in its deterministic mode from the shared weights (computed before
        # any timed call), for a step that is random by design (spec.check compares it).
        self.deterministic: Any = None
        # For the FLOP counters (outside the timed region): one eager call of the same work
        # (torch's FlopCounterMode sees eager ops only), or the step lowered for XLA (JAX).
        self.eager: Callable[[], Any] | None = None
        self.lowered: Callable[[], Any] | None = None
        # JAX: the step traced (jax.jit(f).trace(...)): the jaxpr of the second FLOP count,
        # and lowered, the same step XLA's cost analysis reads.
        self.traced: Callable[[], Any] | None = None
        self.extra = extra or {}
        # Figures read when the results are collected, after every timed call (the thread
        # count a cell really ran with, the updates a loss scaler skipped): merged into extra.
        self.late_extra: list[Callable[[], Mapping[str, object]]] = []
        self.spe = spe

    def step(self) -> Any:
        try:
            value = self.call()
        except Exception as exc:  # the user's file:line, not the harness' frames
            raise UserCodeError(user_error_text(exc, self.path, "step")) from exc
        if len(self.kept) < self.keep:
            self.kept.append(self.snapshot(value))
        return value

    def output(self) -> dict[str, Any]:
        extra = dict(self.extra)
        for read in self.late_extra:
            extra.update(read())
        output = {"result": [self.to_numpy(value) for value in self.kept], "spe": self.spe,
                  "extra": extra}
        if self.deterministic is not None:
            output["deterministic"] = self.deterministic
        return output


def add_deterministic(task: ModelTask, inputs: ModelInputs,
                      forward_task: Callable[[ModelInputs], ModelTask]) -> ModelTask:
    """For a random step: the model's deterministic-mode output (forward_task builds the same
    model from the shared weights in inference mode), made before any timed call."""
    from harness.workloads.usermodel.spec import wants_deterministic

    if wants_deterministic(inputs) and inputs.get("what") != "inference":
        forward = forward_task({**inputs, "what": "inference"})
        forward.step()
        task.deterministic = forward.output()["result"]
    return task


def nested_map(function: Callable[[Any], Any], value: Any) -> Any:
    """function applied to every leaf of nested tuples, lists and dicts (dicts in key order)."""
    if isinstance(value, dict):
        return [nested_map(function, value[key]) for key in sorted(value)]
    if isinstance(value, (list, tuple)):
        return [nested_map(function, item) for item in value]
    return function(value)


@contextmanager
def user_code(path: str, doing: str) -> Iterator[None]:
    """Errors raised while building a cell's task read as the user's file:line (or the file
    and what was being done); a variant that cannot run here stays a VariantUnavailable."""
    try:
        yield
    except (UserCodeError, VariantUnavailable):
        raise
    except Exception as exc:
        raise UserCodeError(user_error_text(exc, path, doing)) from exc


def forward_variant(variant: str, arithmetic: Iterable[str]) -> str:
    """The variant a random step's deterministic-mode forward runs as: the parts of `variant`
    among `arithmetic` (those that change the numbers: a precision, a layout), else as-written.
    The check compares that forward with the float32 reference, so it must compute as the
    timed step does."""
    from harness.workloads.usermodel.spec import compose_variant, split_parts

    chosen = [part for part in split_parts(variant) if part in set(arithmetic)]
    return compose_variant(chosen) if chosen else "as-written"
