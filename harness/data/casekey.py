"""A case's identity: one frozen, hashable key, spelled once.

A case is one size of one cell of one experiment on one machine. The recorder, diff, the
report's views and the audit all name cases; they name them with a CaseKey (or, over a pandas
table, with the key's columns, CASE_COLUMNS), so "which case is this" has one answer
everywhere. torch.utils.benchmark identifies a measurement by a frozen, hashable TaskSpec the
same way.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, fields, replace
from typing import TYPE_CHECKING, Any

from harness.core.units import size_label

if TYPE_CHECKING:
    from harness.data.results import CaseResult, CellResult, RunDocument


@dataclass(frozen=True)
class CaseKey:
    """Which case: experiment, machine, variant, framework, device and size.

    `experiment` is the workload; where a report merges runs of one workload whose other
    parameters differ, the workload with what differs (harness.analysis.casetable
    assign_experiments), so those runs' cases stay apart. `size_label` is the swept value as
    text (harness.core.units.size_label: the same from the CSV as from run.json), '' for a
    case outside the sweep. Field order is the column order of the tables keyed by it.
    """

    experiment: str
    machine: str
    variant: str
    framework: str
    device: str
    size_label: str

    @classmethod
    def of(cls, cell: CellResult, case: CaseResult, *, machine: str, sweep: str) -> CaseKey:
        """The key of a case of a cell result measured on MACHINE over the sweep SWEEP."""
        return cls(cell.workload, machine, cell.variant, cell.framework, cell.device,
                   size_label(case.case.get(sweep)))

    @classmethod
    def of_cell(cls, cell: CellResult, machine: str = "") -> CaseKey:
        """The key every case of a cell shares but its size (a cell's own status row's key)."""
        return cls(cell.workload, machine, cell.variant, cell.framework, cell.device, "")

    @classmethod
    def in_run(cls, document: RunDocument, cell: CellResult, case: CaseResult) -> CaseKey:
        """The key of a case of a stored run, named by the run's machine."""
        return cls.of(cell, case, machine=document.machine, sweep=document.sweep)

    @classmethod
    def from_row(cls, row: Mapping[str, Any]) -> CaseKey:
        """The key of a table row: a report table's (experiment, size_label) or a CSV row's
        (workload, size); a column a row lacks reads as ''."""
        label = row["size_label"] if "size_label" in row else size_label(row.get("size"))
        return cls(_text(row.get("experiment")) or _text(row.get("workload")),
                   _text(row.get("machine")), _text(row.get("variant")),
                   _text(row.get("framework")), _text(row.get("device")), _text(label))

    def without(self, *names: str) -> CaseKey:
        """The same key with the fields NAMES blank: what matches across them (diff matches
        two runs' cases on any machine: without("machine"); the energy view pairs a case's
        devices: without("device"); a case's cell: without("size_label"))."""
        return replace(self, **dict.fromkeys(names, ""))


def _text(value: Any) -> str:
    return "" if value is None or value != value else str(value)  # NaN != NaN: blank


# The key's fields as the columns of the tables keyed by it (groupby, merge, drop_duplicates).
CASE_COLUMNS: tuple[str, ...] = tuple(item.name for item in fields(CaseKey))
CELL_COLUMNS: tuple[str, ...] = tuple(name for name in CASE_COLUMNS if name != "size_label")
