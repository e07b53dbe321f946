"""The installed libraries a model file imports, read from its source in the parent (never
imported there), so that the run's warm processes import them once before forking its workers
(harness.run.forkserver ForkServers.share_imports) instead of every worker importing them again:
on the H100 host each worker of a 4-layer GPT-2 file imported transformers anew (step setup
24.2 s of a 66 s first run), each of a torchvision CNN torchvision.

Only installed third-party top-level packages are shared: not the standard library (cheap, and
already imported where it matters), not the harness or a framework (FRAMEWORK_PACKAGES), and
not a module beside the file (the user's own code runs where it always ran, in the worker,
where a failure is reported).
"""

from __future__ import annotations

import ast
import importlib.util
import sys
from pathlib import Path

# The frameworks themselves: each warm process imports its own (FrameworkSpec.preload), and
# another's (a Keras file's `import tensorflow` under keras-jax) is no library to share: its
# import can start threads, and a warm process with a thread forks no worker.
FRAMEWORK_PACKAGES = frozenset({"torch", "tensorflow", "jax", "jaxlib", "keras", "numpy"})


def imported_roots(tree: ast.Module) -> set[str]:
    """The top-level names of every absolute import in the file, in functions too (a model()
    that imports torchvision inside it)."""
    roots: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            roots |= {alias.name.split(".")[0] for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            roots.add(node.module.split(".")[0])
    return roots


def installed(name: str) -> bool:
    """Whether NAME is an installed top-level module; found without running it."""
    try:
        return importlib.util.find_spec(name) is not None
    except (ImportError, ValueError):
        return False


def model_libraries(path: Path) -> tuple[frozenset[str], tuple[str, ...]]:
    """(the file's imported top-level names, the installed third-party ones to share); both
    empty where the file cannot be read or parsed (its inspection says why)."""
    try:
        tree = ast.parse(Path(path).read_text(), str(path))
    except (OSError, SyntaxError, ValueError, UnicodeDecodeError):
        return frozenset(), ()
    roots = imported_roots(tree)
    folder = Path(path).resolve().parent
    shared = sorted(name for name in roots
                    if name not in sys.stdlib_module_names and name != "harness"
                    and name not in FRAMEWORK_PACKAGES
                    and not (folder / f"{name}.py").exists() and not (folder / name).is_dir()
                    and installed(name))
    return frozenset(roots), tuple(shared)
