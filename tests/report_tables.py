"""The report's table functions under the one name the report tests call them by: `t`.

They all lived in harness/report/tables.py. The case table is now harness.analysis.casetable,
below the report; the other shared ones still live in tables.py; what one view alone shows
is now computed in that view's module (harness/report/views/). Gathering them here keeps the
tests' assertions exactly as they were written.
"""

from __future__ import annotations

from types import SimpleNamespace

from harness.analysis import casetable
from harness.analysis import crossover as analysis_crossover
from harness.report import tables
from harness.report.views import crossover, fastest, overview, ranking, ratios, warnings

MODULES = (casetable, tables, analysis_crossover, crossover, fastest, overview, ranking, ratios,
           warnings)
t = SimpleNamespace(**{name: getattr(module, name) for module in MODULES
                       for name in dir(module) if not name.startswith("_")})
