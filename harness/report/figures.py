"""Drawing helpers the views share: saving, log axes that read, the legend of cells.

Each view draws its own figure (harness/report/views/); what several of them need lives here.
Import this module only after style.use_private_matplotlib_config() has chosen the backend.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

import matplotlib.pyplot as plt
import pandas as pd
from matplotlib.figure import Figure
from matplotlib.lines import Line2D
from matplotlib.ticker import FixedLocator, FuncFormatter, LogLocator, NullLocator

from harness.core.units import counts_bytes, format_bytes, format_seconds
from harness.report import style

STATUS_TEXT_CHARS = 66


PANEL_WIDTH = 6.0


def save(figure: Figure, path: Path) -> Path:
    figure.savefig(path, dpi=style.DPI, bbox_inches="tight", facecolor="white")
    plt.close(figure)
    return path


def log_labels(axis: Any, label: Any) -> None:
    """Decade ticks labelled by `label`; 2x and 5x ticks too when the axis spans < 2 decades.

    Why: matplotlib's default labels a short log axis '3x10^1', which nobody reads at a glance.
    """
    axis.set_major_locator(LogLocator(base=10))
    axis.set_major_formatter(FuncFormatter(lambda value, _: label(value)))
    axis.set_minor_locator(LogLocator(base=10, subs=(2.0, 5.0)))

    def minor(value: float, _: Any) -> str:
        low, high = sorted(axis.get_view_interval())
        return label(value) if low > 0 and high / low < 100 else ""
    axis.set_minor_formatter(FuncFormatter(minor))


def format_rate(value: float) -> str:
    for unit, scale in (("M", 1e6), ("k", 1e3)):
        if value >= scale:
            return f"{value / scale:g}{unit}"
    return f"{value:g}"


def seconds_axis(axis: Any) -> None:
    """Log axis whose ticks read 10 us, 1 ms, 1 s rather than 1e-05."""
    log_labels(axis, format_seconds)


def size_axis(axis: Any, sweep: str, sizes: list[float]) -> None:
    """Ticks at the measured sizes (few enough to label), else at powers of ten."""
    label = (lambda value: format_bytes(value)) if counts_bytes(sweep) else format_count
    axis.set_minor_locator(NullLocator())
    if len(sizes) <= 12:
        axis.set_major_locator(FixedLocator(sizes))
    else:
        axis.set_major_locator(LogLocator(base=10))
    axis.set_major_formatter(FuncFormatter(lambda value, _: label(value)))


def format_count(value: float) -> str:
    """16, 4096, 100k, 1M: exact below 10^4 (matrix sizes read better whole), short above."""
    if value < 1e4:
        return f"{value:g}"
    for unit, scale in (("G", 1e9), ("M", 1e6), ("k", 1e3)):
        if value >= scale:
            return f"{value / scale:g}{unit}"
    return f"{value:g}"


def short(text: str, limit: int = STATUS_TEXT_CHARS) -> str:
    text = " ".join(str(text).split())
    return text if len(text) <= limit else text[: limit - 3] + "..."


def legend_handles(cells: pd.DataFrame, colors: Mapping[str, str]) -> list[Line2D]:
    """One entry per framework x device kind drawn: colour says framework (COLORS: the
    report's, style.framework_color), line says device."""
    handles = []
    pairs = cells[["framework", "device_kind"]].drop_duplicates().itertuples(index=False)
    pairs = list(pairs)
    order = {name: index for index, name in enumerate(dict.fromkeys(p[0] for p in pairs))}
    for framework, kind in sorted(pairs, key=lambda pair: (order[pair[0]], pair[1])):
        handles.append(Line2D([], [], color=style.framework_color(framework, colors),
                              linestyle=style.DEVICE_LINESTYLES[kind],
                              marker=style.DEVICE_MARKERS[kind],
                              label=f"{framework} {style.DEVICE_NAMES[kind]}"))
    return handles
