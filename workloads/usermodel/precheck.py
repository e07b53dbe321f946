"""A model file's mistakes that show without running it: found in the parent, before any child.

Why: the inspector is a child process that imports the file's framework (seconds: torch,
TensorFlow, JAX); a syntax error, or a file with no builder or no inputs(), needs none of that
to be told. Reads the file's text only: never imports the file or a framework.
"""

from __future__ import annotations

import ast
from pathlib import Path

CONVENTION = ("define model() returning a torch.nn.Module or a keras.Model, or init(seed) "
              "and apply(params, *inputs) for JAX")
NO_INPUTS = ("no inputs(batch, rng): define it to return numpy arrays whose first dimension is "
             "the batch")
# Module-level code that can bind names the text does not show: the names are then not judged.
DYNAMIC_CALLS = {"globals", "exec", "setattr", "vars", "locals"}


class SourceProblem(ValueError):
    """What is wrong with the file's text, in one line (without the --model prefix)."""


def syntax_text(exc: SyntaxError, path: Path) -> str:
    """'model.py:3: SyntaxError: invalid syntax: def model(:' (the line named once)."""
    where = Path(exc.filename).name if exc.filename and exc.filename != "<unknown>" \
        else path.name
    line = f":{exc.lineno}" if exc.lineno else ""
    code = (exc.text or "").strip()
    return f"{where}{line}: {type(exc).__name__}: {exc.msg}" + (f": {code}" if code else "")


def parse_source(path: Path) -> ast.Module:
    """The file's syntax tree; SourceProblem naming the line where Python cannot compile it.

    compile(), not ast.parse alone: it also catches what only the compiler sees ('return'
    outside a function, a nonlocal at module level)."""
    try:
        source = path.read_bytes()
    except OSError as exc:
        raise SourceProblem(f"{path.name}: cannot read it ({exc.strerror or exc})") from None
    try:
        compile(source, str(path), "exec", dont_inherit=True)
        return ast.parse(source, str(path))
    except SyntaxError as exc:
        raise SourceProblem(syntax_text(exc, path)) from None
    except ValueError as exc:  # null bytes (Python 3.11)
        raise SourceProblem(f"{path.name}: not Python source ({exc})") from None


def _module_statements(tree: ast.Module) -> list[ast.AST]:
    """Every node that runs at import time (function and class bodies left out)."""
    found: list[ast.AST] = []
    pending: list[ast.AST] = list(tree.body)
    while pending:
        node = pending.pop()
        found.append(node)
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Lambda)):
            pending.extend(node.decorator_list if not isinstance(node, ast.Lambda) else [])
            continue
        pending.extend(ast.iter_child_nodes(node))
    return found


def bound_names(tree: ast.Module) -> set[str] | None:
    """The names the module binds at import, or None where its text cannot tell (a star
    import, a module __getattr__, globals()/exec/setattr at module level)."""
    names: set[str] = set()
    for node in _module_statements(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
            names.add(node.id)
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            for alias in node.names:
                if alias.name == "*":
                    return None
                names.add(alias.asname or alias.name.split(".")[0])
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and \
                node.func.id in DYNAMIC_CALLS:
            return None
    # A function may bind a module name (`global model`) when it runs.
    names |= {name for node in ast.walk(tree) if isinstance(node, ast.Global)
              for name in node.names}
    return None if "__getattr__" in names else names


# The names the harness reads from a model file (docs/own-model.md's table).
HOOK_NAMES = ("model", "init", "apply", "inputs", "targets", "loss", "optimizer", "step",
              "tolerance")


def misspelled_hooks(functions: set[str], bound: set[str]) -> list[tuple[str, str]]:
    """(the file's function, the hook it is close to) for each function of the file whose name
    is close to a hook the file lacks: ('optimiser', 'optimizer'). Why: an optional hook
    misspelled is otherwise ignored without a word, and the run trains with the harness's
    default while the user believes it trains with theirs."""
    import difflib

    missing = [hook for hook in HOOK_NAMES if hook not in bound]
    found = []
    for name in sorted(functions - set(HOOK_NAMES)):
        close = difflib.get_close_matches(name, missing, n=1, cutoff=0.75)
        if close:
            found.append((name, close[0]))
    return found


def near_misses(functions: set[str], bound: set[str]) -> list[str]:
    """'your file defines optimiser(), not optimizer()': misspelled_hooks in words."""
    return [f"your file defines {name}(), not {hook}(): the harness reads {hook}() only"
            for name, hook in misspelled_hooks(functions, bound)]


def precheck(path: Path) -> ast.Module:
    """The parsed file, or SourceProblem: a syntax error, no builder, no inputs(). The same
    words as the inspector's, which still judges everything the text cannot show."""
    tree = parse_source(path)
    names = bound_names(tree)
    if names is None:
        return tree
    functions = {node.name for node in _module_statements(tree)
                 if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef))}
    misses = near_misses(functions, names)
    hint = f" ({'; '.join(misses)})" if misses else ""
    if "model" not in names and not {"init", "apply"} <= names:
        raise SourceProblem(f"no builder: {CONVENTION}{hint}")
    if "inputs" not in names:
        raise SourceProblem(f"{NO_INPUTS}{hint}")
    return tree
