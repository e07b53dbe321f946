"""Reports drawn with every view's table, lines and figure records but no PNG, for tests that
read only summary.md, figures.json or the terminal.

Why: drawing is most of a report's time (harness.report._draw_all's comment), and a test that
never opens a PNG paid for every figure of its runs: 30 of test_audit_figures' 40 s on the
2-core VM. Tests that assert on figures (test_report, the docs runs' re-rendering) still draw.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest


def draw_no_figures(patch: pytest.MonkeyPatch) -> None:
    """From here on (until PATCH is undone), reports in this process draw no figure."""
    from harness import report

    patch.setattr(report, "_draw_all", lambda jobs: [[] for _ in jobs])


@pytest.fixture(scope="module", autouse=True)
def lines_only() -> Iterator[None]:
    """Imported by a test module that never reads a PNG: its reports draw no figure, module
    fixtures' reports included (a module-scoped autouse fixture is set up before them)."""
    with pytest.MonkeyPatch.context() as patch:
        draw_no_figures(patch)
        yield
