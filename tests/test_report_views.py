"""The report as views: a core that names no workload, views of one file, optional views.

Fixture runs come from tests/test_report.py's builders (written through harness.data.store, the
path `harness compare` takes), so every view is exercised on the real file layout.
"""

from __future__ import annotations

import ast
import json
import re
import sys
from dataclasses import replace
from pathlib import Path
from typing import Any

import pandas as pd
import pytest

from harness.core import registry
from harness.data.columns import BASE_COLUMNS
from harness.report import render_report
from harness.report import views as views_package
from harness.report.load import hints_for_old_run
from harness.report.views import View, registered
from harness.spec import Status
from tests.test_report import (
    CPU_MACHINE,
    make_case,
    make_result,
    private_matplotlib,  # noqa: F401 - autouse fixture: keeps matplotlib's cache in tmp
    write_fixture_run,
)

REPORT = Path(__file__).resolve().parents[1] / "harness" / "report"


# --- the core names no workload, framework, variant or parameter -------------------------------

def registered_names() -> dict[str, str]:
    """name -> what it is, for every registered workload and framework and their variants and
    parameters (workloads that fail to load add their name only)."""
    names = {name: "framework" for name in registry.FRAMEWORKS}
    for workload in registry.WORKLOADS:
        names[workload] = "workload"
        try:
            spec = registry.load_workload(workload)
        except Exception:  # noqa: BLE001 - a broken plugin still names its workload
            continue
        names.update({variant: f"variant of {workload}" for variant in spec.variants})
        names.update({param: f"parameter of {workload}" for param in [*spec.params, spec.sweep]})
    # The report's own vocabulary stays usable whatever a plugin calls things: the columns of
    # the measurements file ("bytes" is the work count every workload fills, and transfer's
    # sweep) and the statuses (the fault-injection plugin names its variants after them).
    vocabulary = {*BASE_COLUMNS, *(status.value for status in Status)}
    return {name: kind for name, kind in names.items() if name and name not in vocabulary}


def asked_for_views() -> set[Path]:
    """Files of the views some registered workload asks for by name: they may carry labels."""
    asked = {name for workload in registry.WORKLOADS
             for name in registry.load_workload(workload).report.views}
    return {Path(sys.modules[type(view).__module__].__file__).resolve()
            for view in registered() if view.name in asked}


def core_files() -> list[Path]:
    exempt = asked_for_views()
    return [path for path in sorted(REPORT.rglob("*.py")) if path.resolve() not in exempt]


SHIPPED = {*registry.BUILTIN_WORKLOADS, *registry.BUILTIN_FRAMEWORKS}


def is_prose(name: str) -> bool:
    """A name that is also an English word ('data', 'steps', 'compiled'): only a string that is
    exactly the name counts, since sentences use the word. Names with '-', '_' or a digit, and
    the workloads and frameworks the harness ships, count wherever they stand in a string."""
    return re.fullmatch(r"[a-z]+", name) is not None and name not in SHIPPED


def docstrings(tree: ast.AST) -> set[int]:
    """ids of the docstring nodes: documentation, not what the code does."""
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
            first = node.body[0] if node.body else None
            if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant):
                found.add(id(first.value))
    return found


def name_hits(source: str, names: dict[str, str]) -> list[str]:
    """'line N: "text" names X (kind)' for every string constant in the code (docstrings
    aside) that names one of `names`; f-strings' literal parts included."""
    tree = ast.parse(source)
    skipped = docstrings(tree)
    hits = []
    for node in ast.walk(tree):
        if not (isinstance(node, ast.Constant) and isinstance(node.value, str)) \
                or id(node) in skipped:
            continue
        for name, kind in names.items():
            whole = node.value.strip() == name
            anywhere = re.search(rf"(?<![\w-]){re.escape(name)}(?![\w-])", node.value)
            if whole or (anywhere and not is_prose(name)):
                hits.append((node.lineno, f"line {node.lineno}: {node.value[:60]!r} names "
                                          f"{name} ({kind})"))
    return [hit for _, hit in sorted(hits, key=lambda pair: pair[0])]


def test_report_core_names_no_workload_framework_variant_or_parameter() -> None:
    names = registered_names()
    assert {"torch", "mnist-small", "as-written", "batch_size"} <= set(names)
    files = core_files()
    assert REPORT / "views" / "overview.py" in files and REPORT / "summary.py" in files
    hits = [f"{path.relative_to(REPORT.parent)} {hit}" for path in files
            for hit in name_hits(path.read_text(), names)]
    assert not hits, "\n".join(hits)


def test_the_name_check_catches_what_it_must() -> None:
    names = {"mnist-small": "workload", "torch": "framework", "as-written": "variant of x",
             "batch_size": "parameter of x", "data": "parameter of x"}
    planted = ('"""Docs about the data and torch."""\n'
               'LABEL = "batch size of the data"\n'
               'a = params["batch_size"]\n'
               'b = name == "data"\n'
               'c = f"{x} on torch cuda:0"\n'
               'd = "as-written vs the rest"\n'
               'e = "mnist-small"\n')
    hits = name_hits(planted, names)
    assert [hit.split(" names ")[1] for hit in hits] == [
        "batch_size (parameter of x)", "data (parameter of x)", "torch (framework)",
        "as-written (variant of x)", "mnist-small (workload)"]


def test_runs_differing_only_in_a_data_files_folder_are_one_experiment() -> None:
    """The core compares any path-valued parameter by file name, whatever it is called."""
    from tests.report_tables import t

    runs = pd.DataFrame({"workload": ["w", "w", "w"], "sweep": ["n", "n", "n"], "params": [
        {"n": [1], "input": "/home/me/digits.npz"}, {"n": [2], "input": "/srv/digits.npz"},
        {"n": [1], "input": "/srv/other.npz"}]})
    experiments = t.assign_experiments(runs)["experiment"]
    assert experiments[0] == experiments[1] != experiments[2]


# --- workloads declare their optional views ---------------------------------------------------

def test_every_view_a_workload_asks_for_is_registered_and_optional() -> None:
    optional = {view.name for view in registered() if view.optional}
    for workload in registry.WORKLOADS:
        spec = registry.load_workload(workload)
        assert set(spec.report.views) <= optional, (workload, spec.report.views)
        assert set(spec.report.view_labels) <= set(spec.report.views), workload
    assert "epochs-accuracy" in registry.load_workload("mnist-small").report.views
    assert "scaling" in registry.load_workload("mnist-ddp").report.views
    names = [view.name for view in registered()]
    assert len(names) == len(set(names)) >= 13


def test_views_and_labels_are_stored_in_the_hints() -> None:
    hints = registry.load_workload("mnist-small").report.as_dict()
    assert hints["views"] == ["epochs-accuracy"]
    labels = hints["view_labels"]["epochs-accuracy"]
    assert labels["size"] == "batch size" and labels["chance"] == 0.1
    assert json.loads(json.dumps(hints)) == hints  # plain data, as run.json holds it
    ddp = registry.load_workload("mnist-ddp").report.as_dict()
    assert "DDP's no_sync()" in ddp["view_labels"]["scaling"]["share_explanation"]
    assert registry.load_workload("matmul").report.as_dict()["views"] == []


def test_hints_of_an_old_run_get_their_views_and_keep_the_rest() -> None:
    stored = {"bandwidth_ceiling": "h2d_pinned_gbps", "cpu_baseline_any_variant": []}
    derived = hints_for_old_run("mnist-small", stored)
    assert derived["views"] == ["epochs-accuracy"]
    assert derived["view_labels"]["epochs-accuracy"]["metric"] == "test accuracy"
    assert derived["bandwidth_ceiling"] == "h2d_pinned_gbps"
    assert "overhead_pairs" not in derived  # only the view hints are filled in
    assert "views" not in hints_for_old_run("no-such-workload", stored)


def mnist_like_run(tmp_path: Path, name: str, hints: dict[str, Any] | None) -> Path:
    params = {"batch_size": [32], "epochs": 3, "train_samples": 2048}
    extra = {"accuracy": 0.87, "steps_per_call": 64, "data_source": "tiny set",
             "samples_distinct": 500}
    results = [make_result("mnist-small", framework, "cpu", [make_case(
        {"batch_size": 32, "epochs": 3, "train_samples": 2048}, median, extra=extra)],
        variant="as-written") for framework, median in (("torch", 0.4), ("numpy", 0.6))]
    return write_fixture_run(tmp_path / name, CPU_MACHINE, results, workload="mnist-small",
                             sweep="batch_size", params=params, work=lambda case: {"flops": 1e9},
                             extra_doc={"hints": hints} if hints is not None else None)


def test_an_optional_view_runs_only_where_the_workload_asks_for_it(tmp_path: Path) -> None:
    declared = {"views": ["epochs-accuracy"],
                "view_labels": {"epochs-accuracy": {"metric": "top-1 accuracy", "chance": 0.5}}}
    out = tmp_path / "declared"
    written = {path.name for path in render_report([mnist_like_run(tmp_path, "a", declared)],
                                                   out)}
    summary = (out / "summary.md").read_text()
    assert "mnist-small-epochs.png" in written and "### Accuracy and data" in summary
    assert "| top-1 accuracy |" in summary  # the workload's label, not the view's default
    out = tmp_path / "not-declared"
    written = {path.name for path in render_report(
        [mnist_like_run(tmp_path, "b", {"views": [], "view_labels": {}})], out)}
    summary = (out / "summary.md").read_text()
    assert "mnist-small-epochs.png" not in written and "Accuracy and data" not in summary
    assert "mnist-small-overview.png" in written  # the core views still run


def test_a_run_stored_before_views_gets_them_from_the_installed_spec(tmp_path: Path) -> None:
    out = tmp_path / "out"
    written = {path.name for path in render_report(
        [mnist_like_run(tmp_path, "old", {"bandwidth_ceiling": "bandwidth_gbps"})], out)}
    assert "mnist-small-epochs.png" in written
    assert "| test accuracy |" in (out / "summary.md").read_text()


# --- adding a view is adding one file ---------------------------------------------------------

PLANTED_VIEW = '''
from pathlib import Path

import pandas as pd

from harness.report.views import View


class CellCountView(View):
    """Cells per experiment: the smallest view there is."""

    name = "cell-count"
    order = 95  # after the epochs view, before the warnings

    def compute(self, context):
        if context.cells.empty:
            return pd.DataFrame()
        return context.cells.groupby("device", sort=False).size().rename("cells").reset_index()

    def draw(self, table, context, out_dir):
        path = out_dir / f"{context.stem}-cell-count.png"
        path.write_bytes(b"not really a png")
        return [path]

    def markdown(self, table, context, figures, out_dir):
        return ["### Cells per device", ""] + [
            f"- {row.device}: {row.cells}" for row in table.itertuples()] + [""]
'''


@pytest.fixture
def planted_view(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> str:
    """A view module in a folder of its own, added to the views package's search path."""
    folder = tmp_path / "more_views"
    folder.mkdir()
    (folder / "cell_count.py").write_text(PLANTED_VIEW)
    monkeypatch.setattr(views_package, "__path__", [*views_package.__path__, str(folder)])
    yield "harness.report.views.cell_count"
    sys.modules.pop("harness.report.views.cell_count", None)


def test_a_view_added_as_one_file_is_computed_drawn_and_placed(planted_view: str,
                                                                tmp_path: Path) -> None:
    assert "cell-count" in {view.name for view in registered()}
    run = mnist_like_run(tmp_path, "run", None)
    out = tmp_path / "out"
    written = {path.name for path in render_report([run], out)}
    assert "mnist-small-cell-count.png" in written
    summary = (out / "summary.md").read_text()
    assert "![mnist-small: cell-count](mnist-small-cell-count.png)" in summary
    section = summary.split("### Cells per device")[1]
    assert section.startswith("\n\n- cpu: 2\n")
    # Placed by its order: after the accuracy view's lines, before the warnings.
    assert summary.index("### Accuracy and data") < summary.index("### Cells per device") \
        < summary.index("### Warnings")


def test_a_view_with_an_empty_table_is_skipped(tmp_path: Path) -> None:
    """One framework: the ranking view has nothing to rank, so it draws and says nothing."""
    results = [make_result("matmul", "torch", "cpu", [make_case({"n": 64}, 1e-3)])]
    run = write_fixture_run(tmp_path / "one", CPU_MACHINE, results, params={"n": [64]})
    render_report([run], tmp_path / "out")
    summary = (tmp_path / "out" / "summary.md").read_text()
    assert "Framework verdict" not in summary
    assert "None: every cell ran" in summary  # the warnings view says so when it has none


def test_view_base_class_skips_nothing_it_is_not_told_to() -> None:
    class Plain(View):
        name = "plain"

        def compute(self, context: Any) -> pd.DataFrame:
            return pd.DataFrame({"x": [1]})

    view, context = Plain(), type("Context", (), {"views": frozenset()})()
    assert view.applies(context) and view.when_empty(context) == []
    Plain.optional = True
    assert not view.applies(context)


# --- the scaling view's labels reach the command line too --------------------------------------

def test_console_lines_name_series_by_the_workloads_labels() -> None:
    from harness.report.views.scaling import console_lines
    from tests.test_mnist_ddp import _document

    document = _document(registry.load_workload("mnist-ddp").report.as_dict())
    lines = console_lines(document)
    assert lines[0].startswith("torch cuda:0 (net=wide, batch_size=512), 1 process:")
    unlabelled = console_lines(replace(document, hints={"scaling": document.hints["scaling"]}))
    assert unlabelled[0].startswith("torch cuda:0 (batch_size=512, net=wide), 1 process:")
