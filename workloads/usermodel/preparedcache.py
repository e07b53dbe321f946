"""A model file's shared weights and CPU references, kept between runs on this machine.

Why: every run of a model file made its weights, inputs and CPU references again in a child
process (a framework import, then the file's step in float32 and float64 at every size): on
the H200 host a 4-layer GPT-2-style file at batch 8 and 64 spent ~20 s of a 32 s repeat run
there, outside every worker. The same file, sizes, seed and mode on the same machine and
library versions make the same folder, so a repeat run copies the one made before.

What keys an entry (any change makes a new one): the file's bytes and those of the .py files
beside it (a helper module it imports), the preparing code's own sources, the arguments of
the preparing child (framework, mode, seed, sizes), the versions of Python, numpy and the
framework (read from package metadata: the parent never imports a framework), the CPU model
and CACHE_VERSION. Only a folder whose prepared.json records no error is kept. The parent
never imports the file or its framework here either.
"""

from __future__ import annotations

import contextlib
import hashlib
import importlib.metadata
import json
import os
import platform
import shutil
import tempfile
import time
from pathlib import Path

from harness.measure.envinfo import cpu_model

CACHE_VERSION = 1
# The newest entries kept: a model's weights can be hundreds of MB.
KEEP_ENTRIES = 4
PREPARED_FILE = "prepared.json"  # as harness.workloads.usermodel.spec.PREPARED_FILE
# The sources whose change changes what the child prepares.
PREPARING_SOURCES = ("prepare.py", "inspect.py", "common.py", "preparedcache.py")
FRAMEWORK_PACKAGES = {"torch": ("torch",), "keras-torch": ("keras", "torch"),
                      "keras-jax": ("keras", "jax", "jaxlib"), "jax": ("jax", "jaxlib"),
                      "keras-tensorflow": ("keras", "tensorflow", "tensorflow-cpu")}


def _version(package: str) -> str:
    try:
        return importlib.metadata.version(package)
    except importlib.metadata.PackageNotFoundError:
        return "-"


def _file_bytes(path: Path) -> bytes:
    with contextlib.suppress(OSError):
        return path.read_bytes()
    return b""


def cache_key(model: Path, framework: str, child_args: list[str]) -> str:
    """The entry's name: a hash of everything that decides the prepared folder's contents."""
    digest = hashlib.sha256(f"v{CACHE_VERSION}".encode())
    beside = sorted(model.parent.glob("*.py")) if model.parent.is_dir() else [model]
    for path in [model, *[p for p in beside if p != model]]:
        digest.update(path.name.encode() + b"\0" + _file_bytes(path) + b"\0")
    here = Path(__file__).parent
    for name in PREPARING_SOURCES:
        digest.update(_file_bytes(here / name))
    versions = [platform.python_version(), _version("numpy"),
                *[_version(package) for package in FRAMEWORK_PACKAGES.get(framework, ())]]
    digest.update(json.dumps([framework, child_args, versions, cpu_model()]).encode())
    return digest.hexdigest()[:32]


def restore(root: Path, key: str, folder: Path) -> dict[str, str] | None:
    """Copy entry KEY into FOLDER (hard links where the file system allows); what the entry
    records of its making, or None where there is none to reuse."""
    entry = root / key
    made = entry / "made.json"
    if not (entry / PREPARED_FILE).is_file() or not made.is_file():
        return None
    try:
        origin = json.loads(made.read_text())
        folder.parent.mkdir(parents=True, exist_ok=True)
        shutil.copytree(entry, folder, copy_function=_link_or_copy,
                        ignore=shutil.ignore_patterns("made.json"))
        os.utime(entry)  # the newest use: kept longest
    except (OSError, ValueError):
        shutil.rmtree(folder, ignore_errors=True)
        return None
    return {str(name): str(value) for name, value in origin.items()}


def store(root: Path, key: str, folder: Path, model: Path) -> None:
    """Keep FOLDER as entry KEY, unless its preparation failed; then drop the oldest entries
    beyond KEEP_ENTRIES. A failure to keep it costs the next run its reuse, nothing else."""
    try:
        prepared = json.loads((folder / PREPARED_FILE).read_text())
        if prepared.get("error") or any(isinstance(size, dict) and size.get("error")
                                        for size in prepared.get("sizes", {}).values()):
            return
        root.mkdir(parents=True, exist_ok=True)
        staging = Path(tempfile.mkdtemp(prefix=f".{key}-", dir=root))
        shutil.copytree(folder, staging, dirs_exist_ok=True, copy_function=_link_or_copy)
        (staging / "made.json").write_text(json.dumps(
            {"prepared_at": time.strftime("%Y-%m-%d %H:%M:%S"), "model": str(model)}))
        try:
            staging.rename(root / key)
        except OSError:  # another run kept the same entry first
            shutil.rmtree(staging, ignore_errors=True)
        _prune(root)
    except (OSError, ValueError):
        return


def _prune(root: Path) -> None:
    entries = sorted((path for path in root.iterdir()
                      if path.is_dir() and not path.name.startswith(".")),
                     key=lambda path: path.stat().st_mtime, reverse=True)
    for stale in entries[KEEP_ENTRIES:]:
        shutil.rmtree(stale, ignore_errors=True)


def _link_or_copy(source: str, destination: str) -> None:
    """A hard link (nothing writes to a prepared folder after it is made), else a copy."""
    try:
        os.link(source, destination)
    except OSError:
        shutil.copy2(source, destination)
