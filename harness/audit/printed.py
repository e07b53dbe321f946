"""Numbers as summary.md prints them: the value a printed text stands for and half a unit of
its last digit, so that rounding is never called a mismatch."""

from __future__ import annotations

import math
from collections.abc import Callable

from harness.audit.ledger import Printed, Reading
from harness.core.units import format_bytes, format_joules, format_ratio, format_seconds

SECOND_SCALES = {"s": 1.0, "ms": 1e-3, "us": 1e-6, "ns": 1e-9}
JOULE_SCALES = {"kJ": 1e3, "J": 1.0, "mJ": 1e-3, "uJ": 1e-6}


def _digits_tolerance(value: float, digits: int) -> float:
    """Half a unit of the DIGITS-th significant digit of VALUE."""
    if value == 0:
        return 0.5 * 10.0 ** -digits
    return 0.5 * 10.0 ** (math.floor(math.log10(abs(value))) - digits + 1)


def _number(text: str) -> float:
    return float(text.replace(",", ""))


def printed_scaled(text: str, scales: dict[str, float]) -> Printed:
    """'2.31 ms', '1.2 kJ': 3 significant digits and a unit of SCALES (format_seconds,
    format_joules)."""
    number, unit = text.strip().split(" ")
    value = _number(number) * scales[unit]
    return Printed(text.strip(), value, _digits_tolerance(value, 3))


def printed_seconds(text: str) -> Printed:
    return printed_scaled(text, SECOND_SCALES)


BYTE_SCALES = {"B": 1.0, "KiB": 2.0**10, "MiB": 2.0**20, "GiB": 2.0**30, "TiB": 2.0**40}


def printed_bytes(text: str) -> Printed:
    """'21.8 MiB' (format_bytes: 3 significant digits, whole bytes below 1000 B)."""
    number, unit = text.strip().split(" ")
    scale = BYTE_SCALES[unit]
    value = _number(number) * scale
    tolerance = 0.5 if unit == "B" else _digits_tolerance(_number(number), 3) * scale
    return Printed(text.strip(), value, tolerance)


def printed_ratio(text: str) -> Printed:
    """'3.48x' (format_ratio: 2 significant digits below 1, 3 below 100, whole above)."""
    value = _number(text.strip().rstrip("x"))
    tolerance = (_digits_tolerance(value, 2) if value < 1 else
                 _digits_tolerance(value, 3) if value < 100 else 0.5)
    return Printed(text.strip(), value, tolerance)


def printed_fixed(text: str, decimals: int, scale: float = 1.0, unit: str = "") -> Printed:
    """A number printed with a fixed count of decimals ('143.1', '35%' with scale 0.01);
    UNIT is shown after it ('143.1 GFLOP/s')."""
    value = _number(text.strip().rstrip("%")) * scale
    shown = f"{text.strip()} {unit}" if unit else text.strip()
    return Printed(shown, value, 0.5 * 10.0 ** -decimals * scale)


def printed_general(text: str, digits: int) -> Printed:
    """A number printed with :.{digits}g."""
    value = _number(text.strip().rstrip("x"))
    return Printed(text.strip(), value, _digits_tolerance(value, digits))


def fixed(decimals: int, suffix: str = "") -> Callable[[float], str]:
    return lambda value: f"{value:,.{decimals}f}{suffix}"


def _percent(value: float) -> str:
    return f"{value:.0%}"



def fixed_reading(decimals: int) -> Reading:
    return (lambda text: printed_fixed(text, decimals), fixed(decimals))


def general_reading(digits: int, suffix: str = "") -> Reading:
    """A number printed with :.{digits}g, SUFFIX after it."""
    return (lambda text: printed_general(text, digits), lambda value: f"{value:.{digits}g}{suffix}")


SECONDS: Reading = (printed_seconds, format_seconds)
JOULE: Reading = (lambda text: printed_scaled(text, JOULE_SCALES), format_joules)
BYTES: Reading = (printed_bytes, format_bytes)
RATIO: Reading = (printed_ratio, format_ratio)
PERCENT: Reading = (lambda text: printed_fixed(text, 0, 0.01), _percent)
