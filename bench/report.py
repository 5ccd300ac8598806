"""The figures a benchmark reports: rows of one table, their quantiles, and the progress log.

``python -m bench`` prints the rows of every benchmark in one table (:func:`print_table`); a
row against a target carries the ratio to it (at most 1.00 meets it).
"""

from __future__ import annotations

import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any


@dataclass
class Row:
    """One figure of the final table."""

    bench: str
    figure: str
    value: str
    target: str = ""
    ratio: float | None = None
    ok: bool | None = None
    note: str = ""


@dataclass
class Report:
    rows: list[Row] = field(default_factory=list)
    data: dict[str, Any] = field(default_factory=dict)

    def add(self, *args: Any, **kwargs: Any) -> Row:
        row = Row(*args, **kwargs)
        self.rows.append(row)
        return row

    def against(
        self,
        bench: str,
        figure: str,
        value: str,
        target: str,
        *,
        measured: float,
        limit: float,
        note: str = "",
    ) -> Row:
        """A figure with a target: its ratio is ``measured / limit``, met when at most 1."""
        return self.add(bench, figure, value, target, measured / limit, measured <= limit, note)

    def times(
        self,
        bench: str,
        figure: str,
        value: str,
        *,
        ratio: float,
        limit: float,
        of: str = "",
        stat: str = "",
        more: str = "",
    ) -> Row:
        """A ratio to another side's figure with a limit: target ``[stat ]<= {limit}x[ of]``,
        note ``[stat ]ratio {ratio}x`` then ``more``."""
        return self.against(
            bench,
            figure,
            value,
            f"{stat}<= {limit}x{of}",
            measured=ratio,
            limit=limit,
            note=f"{stat}ratio {ratio:.2f}x{more}",
        )

    def info(self, bench: str, figure: str, value: str, note: str = "") -> Row:
        """A figure without a target, printed beside those that have one."""
        return self.add(bench, figure, value, "", None, None, note)


def log(message: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


def pct(values: Sequence[float], q: float) -> float:
    """The q-quantile (0..1) by linear interpolation, as numpy's default."""
    xs = sorted(values)
    if not xs:
        return float("nan")
    pos = (len(xs) - 1) * q
    lo = int(pos)
    hi = min(lo + 1, len(xs) - 1)
    return xs[lo] + (xs[hi] - xs[lo]) * (pos - lo)


def p50_p99(values: Sequence[float]) -> str:
    """``p50 N ms, p99 M ms`` of latencies in seconds."""
    return f"p50 {pct(values, 0.5) * 1000:.0f} ms, p99 {pct(values, 0.99) * 1000:.0f} ms"


def print_table(rows: Sequence[Row], file: Any = sys.stdout) -> None:
    head = ("benchmark", "figure", "value", "target", "ratio", "met", "notes")
    cells = [
        (
            r.bench,
            r.figure,
            r.value,
            r.target,
            "" if r.ratio is None else f"{r.ratio:.2f}",
            "" if r.ok is None else ("yes" if r.ok else "NO"),
            r.note,
        )
        for r in rows
    ]
    print("| " + " | ".join(head) + " |", file=file)
    print("|" + "|".join("---" for _ in head) + "|", file=file)
    for c in cells:
        print("| " + " | ".join(c) + " |", file=file)
