"""Markdown cells and tables: means ± sd, durations, relative links."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Optional, Sequence


DASH = "—"


def fmt(mean: Optional[float], sd: Optional[float], dec: int, n: Optional[int] = None, bold: bool = False) -> str:
    if mean is None:
        return DASH
    # One seed has no spread: "± 0.000" would read as a measured zero.
    s = f"{mean:.{dec}f}" if n == 1 else f"{mean:.{dec}f} ± {sd:.{dec}f}"
    if bold:
        s = f"**{s}**"
    return s + (f" (n={n})" if n is not None else "")


def better(a: float, b: float, higher_is_better: bool) -> Optional[bool]:
    """True if a beats b, False if b beats a, None on a tie."""
    if a == b:
        return None
    return (a > b) if higher_is_better else (a < b)


def md_table(header: Sequence[str], rows: Sequence[Sequence[str]], align: Optional[Sequence[str]] = None) -> str:
    align = align or ["---"] * len(header)
    lines = ["| " + " | ".join(header) + " |", "| " + " | ".join(align) + " |"]
    lines += ["| " + " | ".join(str(c) for c in row) + " |" for row in rows]
    return "\n".join(lines)


def duration(seconds: float) -> str:
    if seconds < 120:
        return f"{seconds:.1f} s"
    if seconds < 2 * 3600:
        return f"{seconds / 60:.1f} min"
    return f"{seconds / 3600:.2f} h"


def rel(path, start) -> str:
    return os.path.relpath(Path(path).resolve(), Path(start).resolve())


def plain_cell(v) -> str:
    """A value as a table cell: a dash for None, 4 significant digits for a float, pipes escaped."""
    if v is None:
        return DASH
    if isinstance(v, float):
        return f"{v:.4g}"
    return str(v).replace("|", "\\|")
