"""One look for every PNG: a fixed colour per framework, a fixed line and marker per device.

Fixed rather than seaborn's cycling palette so that a framework has the same colour in every
figure of every report, whichever frameworks a run happened to contain (benchopt's get_style
does this); the colour comes from the framework's FrameworkSpec, stored in run.json.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Mapping
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from matplotlib.typing import LineStyleType

# Colour-blind-safe (seaborn's "colorblind" palette) for frameworks that stored none.
OTHER_COLORS = ("#CC78BC", "#CA9161", "#949494", "#56B4E9", "#D55E00", "#FBAFE4")
DEVICE_LINESTYLES: dict[str, LineStyleType] = {"cpu": "--", "gpu": "-"}
DEVICE_MARKERS = {"cpu": "o", "gpu": "s"}
# Bars: GPU cells solid, CPU cells a lighter fill of the same framework colour.
DEVICE_BAR_ALPHA = {"cpu": 0.5, "gpu": 0.95}
DEVICE_NAMES = {"cpu": "CPU", "gpu": "GPU"}
FAILED_COLOR = "#9A9A9A"
# Parts of a call in the "where the time goes" bars: neutral colours, not framework ones.
PART_COLORS = {"compute": "#4D4D4D", "overhead": "#D55E00", "cold": "#E6B422"}
DPI = 130


def framework_color(framework: str, colors: Mapping[str, str]) -> str:
    """The framework's fixed colour in COLORS, the report's (its context's framework_colors:
    each FrameworkSpec's colour as run.json stored it, so the report names no framework and a
    plugin framework brings its own); one stored none of gets a stable colour from its name."""
    if colors.get(framework):
        return colors[framework]
    return OTHER_COLORS[sum(map(ord, framework)) % len(OTHER_COLORS)]


def use_private_matplotlib_config() -> None:
    """Agg backend, and a temporary MPLCONFIGDIR unless the user set one.

    Why: matplotlib otherwise writes a font cache under ~/.cache, which may be read-only (CI,
    containers) and is not ours to fill.
    """
    if not os.environ.get("MPLCONFIGDIR"):
        # One folder per user, reused, so the font cache is built once rather than per report.
        user = os.getuid() if hasattr(os, "getuid") else os.environ.get("USERNAME", "user")
        folder = os.path.join(tempfile.gettempdir(), f"harness-matplotlib-{user}")
        os.makedirs(folder, mode=0o700, exist_ok=True)
        os.environ["MPLCONFIGDIR"] = folder
    import matplotlib

    matplotlib.use("Agg", force=True)
