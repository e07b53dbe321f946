"""The Jacobian fixes of a user's torch model: torch.autograd.functional.jacobian / hessian
called with other arguments while the step runs, the user's file unchanged.

A step that calls `torch.autograd.functional.jacobian(f, x)` with its defaults runs one backward
pass per output element in a Python loop: seed 000's (batch, 400) output at batch 100 is 40,000
passes of a few small kernels each. `vectorize=True` runs them as one batched pass (vmap over
the backward); forward mode, vectorized, runs one batched tangent per *input* element instead,
which is far less work where the outputs outnumber the inputs (seed 000: 100 inputs, 40,000
outputs). Both are arguments of the same call, so a fix can set them the way torch.compile is
applied: around the step, without editing it.

The functions are swapped for the duration of each call, where the step finds them: the
attribute of torch.autograd.functional (`torch.autograd.functional.jacobian(...)`) and any name
in the user's module bound to the same function (`from torch.autograd.functional import
jacobian`). Only the outermost call is changed: hessian calls jacobian itself (its inner
reverse-mode jacobian with create_graph=True, which forward mode refuses).
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from types import ModuleType
from typing import Any

import torch.autograd.functional as functional


class JacobianSwitch:
    """One fix's arguments for jacobian / hessian, and how many calls it changed."""

    def __init__(self, arguments: Mapping[str, Mapping[str, object]], user: ModuleType) -> None:
        self.arguments = arguments
        self.user = user
        self.changed_calls = 0
        self.steps = 0
        self.depth = 0
        self.originals = {name: getattr(functional, name) for name in arguments}
        self.replacements = {name: self._changed(name, original)
                             for name, original in self.originals.items()}

    def _changed(self, name: str, original: Callable[..., Any]) -> Callable[..., Any]:
        signature = inspect.signature(original)
        forced = dict(self.arguments[name])

        @functools.wraps(original)
        def changed(*args: Any, **kwargs: Any) -> Any:
            if self.depth:  # a call made by the changed one (hessian's inner jacobian)
                return original(*args, **kwargs)
            bound = signature.bind(*args, **kwargs)
            bound.arguments.update(forced)  # by name: a positional vectorize= is replaced too
            self.changed_calls += 1
            self.depth += 1
            try:
                return original(*bound.args, **bound.kwargs)
            finally:
                self.depth -= 1
        return changed

    @contextmanager
    def applied(self) -> Iterator[None]:
        """The changed functions in place for one call of the step, the originals after."""
        swapped: list[tuple[Any, str, Any]] = []
        for name, original in self.originals.items():
            swapped.append((functional, name, original))
            setattr(functional, name, self.replacements[name])
            for global_name, value in list(vars(self.user).items()):
                if value is original:
                    swapped.append((self.user, global_name, original))
                    setattr(self.user, global_name, self.replacements[name])
        try:
            yield
        finally:
            for owner, attribute, original in reversed(swapped):
                setattr(owner, attribute, original)

    def around(self, call: Callable[[], Any]) -> Callable[[], Any]:
        def switched() -> Any:
            self.steps += 1
            with self.applied():
                return call()
        return switched

    def record(self) -> dict[str, object]:
        """For the case's extra: the arguments set and the calls they changed per step (0: the
        step never called jacobian / hessian, so the fix changed nothing)."""
        per_step = self.changed_calls / self.steps if self.steps else 0.0
        return {"autograd_functional": {name: dict(values) for name, values in
                                        self.arguments.items()},
                "changed_calls_per_step": round(per_step, 3)}
