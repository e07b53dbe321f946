"""Units and labels in one place: how a size, a time, a byte count or a device reads."""

from __future__ import annotations

import math
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


def format_seconds(seconds: float | None) -> str:
    """3 significant digits in s / ms / us / ns; '-' for nothing or a non-finite value."""
    if not _finite(seconds):
        return "-"
    for unit, scale in (("s", 1.0), ("ms", 1e-3), ("us", 1e-6)):
        if abs(seconds) >= scale:
            return f"{seconds / scale:.3g} {unit}"
    return f"{seconds / 1e-9:.3g} ns"


def format_bytes(count: float | None) -> str:
    """Binary prefixes: 1536 -> '1.5 KiB'; '-' for nothing or a non-finite value."""
    if not _finite(count):
        return "-"
    units = ("B", "KiB", "MiB", "GiB", "TiB")
    index = 0
    while abs(count) >= 1024 and index < len(units) - 1:
        count /= 1024
        index += 1
    return f"{int(count)} B" if index == 0 else f"{count:.3g} {units[index]}"


def format_joules(joules: float | None) -> str:
    """3 significant digits in kJ / J / mJ / uJ; '-' for nothing or a non-finite value."""
    if not _finite(joules):
        return "-"
    for unit, scale in (("kJ", 1e3), ("J", 1.0), ("mJ", 1e-3)):
        if abs(joules) >= scale:
            return f"{joules / scale:.3g} {unit}"
    return f"{joules / 1e-6:.3g} uJ"


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
