"""The user's file as a module, and errors raised in it told as its own file:line.

Imported only by child processes (the inspector, the preparer, workers): loading the file
imports whatever framework it imports.
"""

from __future__ import annotations

import hashlib
import importlib.util
import sys
import traceback
from pathlib import Path
from types import ModuleType
from typing import Any


class UserCodeError(RuntimeError):
    """Code in the user's file raised; the message starts with that file's name and line."""


def load_user_module(path: str | Path) -> ModuleType:
    """Import the file at `path` under a name of its own (two files named model.py never clash).

    Raises UserCodeError naming the file:line when the file itself raises at import.
    """
    path = Path(path).resolve()
    digest = hashlib.sha1(str(path).encode()).hexdigest()[:10]
    name = f"harness_usermodel_{path.stem}_{digest}"
    if name in sys.modules:
        return sys.modules[name]
    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None or spec.loader is None:
        raise UserCodeError(f"{path.name}: not a Python file")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    try:
        spec.loader.exec_module(module)
    except BaseException as exc:
        del sys.modules[name]
        raise UserCodeError(user_error_text(exc, path, "failed to import")) from exc
    return module


def user_frame(exc: BaseException, path: str | Path) -> traceback.FrameSummary | None:
    """The innermost traceback frame in the user's file, following chained exceptions."""
    target = str(Path(path).resolve())
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        frames = [frame for frame in traceback.extract_tb(current.__traceback__)
                  if frame.filename and str(Path(frame.filename).resolve()) == target]
        if frames:
            return frames[-1]
        current = current.__cause__ or current.__context__
    return None


def user_error_text(exc: BaseException, path: str | Path, doing: str = "") -> str:
    """'model.py:12 in forward: ValueError: shapes do not match': the user's frame, one line.

    A SyntaxError names its own line; an error with no frame in the file (raised inside a
    framework by an argument the file passed) still names the file and what was being done.
    """
    path = Path(path)
    message = f"{type(exc).__name__}: {exc}".strip().splitlines()
    first = message[0][:300] if message else type(exc).__name__
    if isinstance(exc, SyntaxError) and exc.lineno is not None:
        from harness.workloads.usermodel.precheck import syntax_text

        return syntax_text(exc, path)  # its own file and line, named once
    frame = user_frame(exc, path)
    if frame is not None:
        return f"{path.name}:{frame.lineno} in {frame.name}: {first}"
    return f"{path.name}: {doing + ': ' if doing else ''}{first}"


def call_user(path: str | Path, doing: str, function: Any, *args: Any) -> Any:
    """function(*args), with any exception it raises re-raised as UserCodeError (file:line)."""
    try:
        return function(*args)
    except UserCodeError:
        raise
    except Exception as exc:
        raise UserCodeError(user_error_text(exc, path, doing)) from exc
