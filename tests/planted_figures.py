"""A stored run copied with one printed figure changed in summary.md and figures.json alike: what
`harness check` must catch (the audit recomputes the figure, not the record)."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

from harness.report.figure import FIGURES_FILE


def planted_copy(run_dir: Path, tmp_path: Path, family: str, name: str,
                 change: Callable[[dict[str, Any]], str]) -> Path:
    """A copy of RUN_DIR whose first record of FAMILY named NAME prints CHANGE(record)."""
    copy = tmp_path / run_dir.name
    copy.mkdir()
    for path in run_dir.iterdir():
        if path.is_file():
            (copy / path.name).write_bytes(path.read_bytes())
    stored = json.loads((copy / FIGURES_FILE).read_text())
    record = next(item for item in stored["figures"]
                  if item["family"] == family and item["name"] == name)
    summary = (copy / "summary.md").read_text().splitlines()
    line = summary[record["line"] - 1]
    assert record["text"] in line
    text = change(record)
    summary[record["line"] - 1] = line.replace(record["text"], text, 1)
    record["text"] = text
    (copy / "summary.md").write_text("\n".join(summary) + "\n")
    (copy / FIGURES_FILE).write_text(json.dumps(stored))
    return copy
