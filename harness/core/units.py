"""Units and labels in one place: how a size, a time, a byte count or a device reads."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any, TypeGuard


def size_label(value: Any) -> str:
    """The sweep value as text, identical whether it came from the CSV or from run.json.

    Why: pandas reads a size column with gaps as float (512.0) while run.json holds 512; both
    must name the same case.
    """
    if value is None:
        return ""
    if isinstance(value, (list, tuple)):
        return "x".join(str(part) for part in value)
    if isinstance(value, float):
        if math.isnan(value):
            return ""
        return str(int(value)) if value.is_integer() else f"{value:g}"
    text = str(value).strip()
    if text.lower() == "nan":
        return ""
    try:
        number = float(text)
    except ValueError:
        return text
    return str(int(number)) if number.is_integer() else text


def _finite(value: Any) -> TypeGuard[float]:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


def counted(count: int, noun: str, plural: str = "") -> str:
    """'1 cell', '3 cells': a count with its noun in the number it needs."""
    return f"{count} {noun if count == 1 else (plural or noun + 's')}"


def three_digits(value: float) -> str:
    """3 significant digits as `:.3g` gives them, in plain notation: 999.7 -> '1000',
    12345 -> '12300', 1.5 -> '1.5' (never '1e+03', which reads as a typo in a table)."""
    return digits(value, 3)


def digits(value: float, count: int) -> str:
    """COUNT significant digits as `:.{count}g` gives them, in plain notation: digits(123.4, 2)
    is '120', not '1.2e+02' (a timed span of minutes on a loaded machine printed so)."""
    text = f"{value:.{count}g}"
    if "e" not in text:
        return text
    plain = f"{float(text):f}"
    return plain.rstrip("0").rstrip(".") if "." in plain else plain


def scaled(value: float, steps: tuple[tuple[str, float], ...], smallest: str,
           smallest_scale: float) -> str:
    """VALUE in the largest unit it reaches after rounding to 3 digits (999.7 us is '1 ms',
    not '1e+03 us'); STEPS largest first, SMALLEST the unit below them all."""
    for unit, scale in steps:
        if abs(float(f"{value / scale:.3g}")) >= 1:
            return f"{three_digits(value / scale)} {unit}"
    return f"{three_digits(value / smallest_scale)} {smallest}"


SECOND_UNITS = (("s", 1.0), ("ms", 1e-3), ("us", 1e-6))


def format_seconds(seconds: float | None) -> str:
    """3 significant digits in s / ms / us / ns; '-' for nothing or a non-finite value."""
    if not _finite(seconds):
        return "-"
    return scaled(seconds, SECOND_UNITS, "ns", 1e-9)


def format_bytes(count: float | None) -> str:
    """Binary prefixes: 1536 -> '1.5 KiB', 1,070,000,000 -> '0.997 GiB'; '-' for nothing or a
    non-finite value. From 1000 of a unit on, the next unit is used (1020 MiB would print
    with 4 digits or an exponent)."""
    if not _finite(count):
        return "-"
    units = ("B", "KiB", "MiB", "GiB", "TiB")
    index = 0
    while abs(count) >= 1000 and index < len(units) - 1:
        count /= 1024
        index += 1
    return f"{int(count)} B" if index == 0 else f"{three_digits(count)} {units[index]}"


def format_joules(joules: float | None) -> str:
    """3 significant digits in kJ / J / mJ / uJ; '-' for nothing or a non-finite value."""
    if not _finite(joules):
        return "-"
    return scaled(joules, (("kJ", 1e3), ("J", 1.0), ("mJ", 1e-3)), "uJ", 1e-6)


def format_ratio(ratio: float | None) -> str:
    """A speed ratio: '0.52x', '3.9x', '1,234x'."""
    if not _finite(ratio):
        return "-"
    if ratio < 1:
        return f"{ratio:.2g}x"
    return f"{ratio:.3g}x" if ratio < 100 else f"{ratio:,.0f}x"


# Sweep parameters whose values are byte counts (read with binary prefixes).
BYTE_SWEEPS = ("bytes",)


def counts_bytes(sweep: str) -> bool:
    """Whether a sweep's values are byte counts."""
    return sweep in BYTE_SWEEPS


def format_size(value: Any, sweep: str) -> str:
    """A sweep value as a reader wants it: bytes with binary prefixes, integers plain."""
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "-"
    try:
        number = float(value)
    except (TypeError, ValueError):
        return str(value)
    if math.isnan(number):
        return str(value)
    if counts_bytes(sweep):
        return format_bytes(number)
    return str(int(number)) if number.is_integer() else f"{number:g}"


ACCELERATOR_PREFIXES = ("cuda", "gpu", "mps", "xpu", "rocm")


def device_kind(device: str) -> str:
    """'gpu' for accelerators (cuda:N, gpu:N, ...), 'cpu' otherwise: the one rule for both."""
    return "gpu" if str(device).lower().startswith(ACCELERATOR_PREFIXES) else "cpu"


# --- figures over a sweep, and what every subject shares ------------------------------------

def series(texts: Sequence[str], separator: str = " / ") -> str:
    """'24.2 / 25.5 / 36.3 mJ' where every text ends in the same unit, else each text whole
    ('850 mJ / 1.2 J'): one line names a cell's figures over its sizes."""
    units = {text.rpartition(" ")[2] for text in texts if " " in text}
    numbers = [text.rpartition(" ")[0] for text in texts]
    if len(units) == 1 and all(" " in text for text in texts):
        return separator.join(numbers) + " " + units.pop()
    return separator.join(texts)


def said_once(clauses: dict[str, list[str]]) -> tuple[list[str], dict[str, list[str]]]:
    """(the clauses every subject shares, each subject's others), in their first order.

    Why: how a figure was measured (a counter, a window, a basis) is usually the same for every
    cell of a run; said per cell it buries the figures, so what all share is said once. With
    one subject nothing is shared: its clauses stay its own.
    """
    if len(clauses) < 2:
        return [], {subject: list(own) for subject, own in clauses.items()}
    first, *others = clauses.values()
    shared = [clause for clause in dict.fromkeys(first)
              if all(clause in own for own in others)]
    return shared, {subject: [clause for clause in own if clause not in shared]
                    for subject, own in clauses.items()}
