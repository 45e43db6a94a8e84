"""Number formatting shared by the HTML and Markdown reports.

One place decides how a missing value, an effect, a CI or an hour count reads, so the two formats
agree to the digit.
"""

from __future__ import annotations

import math

MISSING = "—"


def is_missing(x: float | int | None) -> bool:
    return x is None or (isinstance(x, float) and math.isnan(x))


def num(x: float | int | None) -> str:
    """Three significant digits for small values; thousands separators, no decimals, from 100 up."""
    if is_missing(x):
        return MISSING
    assert x is not None
    if abs(x) >= 100:
        return f"{x:,.0f}"
    return f"{x:.3g}"


def signed(x: float | None) -> str:
    if is_missing(x):
        return MISSING
    assert x is not None
    return ("+" if x > 0 else "") + num(x)


def interval(lo: float | None, hi: float | None) -> str:
    if is_missing(lo) or is_missing(hi):
        return MISSING
    return f"[{signed(lo)}, {signed(hi)}]"


def p_value(p: float | None) -> str:
    if is_missing(p):
        return MISSING
    assert p is not None
    return "<0.001" if p < 0.001 else f"{p:.3f}"


def share(part: float | None, total: float | None) -> str:
    if is_missing(part) or is_missing(total) or not total:
        return MISSING
    assert part is not None and total is not None
    return f"{100 * part / total:.0f}%"


def hours_unit(unit: str | None) -> str:
    """Short column label for the cost unit: CPU sweeps must not pass for GPU ones."""
    if unit and "cpu" in unit.lower():
        return "device-h (CPU)"
    return "GPU-h"


def short(text: str, limit: int = 48) -> str:
    """Trim long trick-set names for plot labels; tables keep the full name."""
    return text if len(text) <= limit else text[: limit - 1] + "…"


def plural(n: int, noun: str) -> str:
    return f"{n} {noun}" + ("" if n == 1 else "s")
