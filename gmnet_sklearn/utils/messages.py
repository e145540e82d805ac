"""How errors and warnings name the items they are about: the first few rows, with a short
repr of each item where it helps, and how many more (a screen of 100,000 SMILES with one bad
pattern must not make a megabyte message, nor a 3,000-character polymer a 15 kB one)."""

from __future__ import annotations

from typing import Any, Callable, Optional, Sequence

#: Rows a message names before "... (n more)".
SHOWN_ROWS = 5


def short_repr(value: Any, limit: int = 80) -> str:
    """``repr(value)``, cut to ``limit`` characters with "..."."""
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."


def shown_rows(rows: Sequence[int], describe: Optional[Callable[[int], str]] = None, sep: str = ", ",
               limit: int = SHOWN_ROWS) -> str:
    """The first ``limit`` of ``rows`` ("3, 7, 9, ... (12 more)"), each followed by
    ``describe(row)`` where given ("3 ('C1CC')")."""
    rows = [int(r) for r in rows]
    shown = sep.join(f"{r} {describe(r)}" if describe else str(r) for r in rows[:limit])
    return shown + (f"{sep}... ({len(rows) - limit} more)" if len(rows) > limit else "")
