"""The fleet fan-out benchmark's figures, from its samples (pure: no cluster, no clock).

One *change* of the shared Resource gives, per side (the controller, the same-writes
baseline): every session's change -> applied latency, the time until the last session applied
it, and the time until the Resource's ``Delivered`` condition turned True for the new
generation (time to 100 %). :func:`report_lines` makes the printed lines: the target line
(time to 100 %, controller / baseline, target <= 1.5x) in the ratio-line format
``python -m bench`` reads into its table, then the figures of both sides and the writes per
change.
"""

from __future__ import annotations

import statistics
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from bench.report import pct

TARGET_RATIO = 1.5
"""Time to 100 %: the controller's at most 1.5x the same-writes baseline's."""


@dataclass(frozen=True)
class Change:
    """One change of the shared Resource on one side, in seconds from just before its PATCH."""

    applied: tuple[float, ...]
    """Each session's change -> applied (its runtime applied the new document)."""
    delivered: float
    """Until the Resource's ``Delivered`` condition turned True for the new generation."""

    @property
    def last_applied(self) -> float:
        """Until the last session applied it (the sessions' own 100 %)."""
        return max(self.applied) if self.applied else float("nan")

    @property
    def lag(self) -> float:
        """From the last session's application to ``Delivered`` True: what the status path
        adds after the fleet has applied the change."""
        return self.delivered - self.last_applied


@dataclass
class Side:
    """Every change measured on one side."""

    name: str
    changes: list[Change] = field(default_factory=list)
    writes: list[Mapping[str, int]] = field(default_factory=list)
    """Per change: ``resource[/sub] verb`` -> count of this side's own writes (audit log)."""
    timelines: list[Mapping[str, tuple[float, float]]] = field(default_factory=list)
    """Per change: ``resource[/sub] verb`` -> when the first and the last of them completed,
    in seconds from the PATCH (audit log)."""

    def applied(self) -> list[float]:
        """Every session's change -> applied, over all changes."""
        return [t for change in self.changes for t in change.applied]

    def delivered(self) -> float:
        """The median time to 100 % (``Delivered`` True) over the changes."""
        return median([c.delivered for c in self.changes])

    def timeline(self) -> dict[str, tuple[float, float]]:
        """Per kind of write, the medians over the changes of its first and last completion."""
        kinds = sorted({k for t in self.timelines for k in t})
        return {
            k: (
                median([t[k][0] for t in self.timelines if k in t]),
                median([t[k][1] for t in self.timelines if k in t]),
            )
            for k in kinds
        }

    def writes_per_change(self) -> dict[str, float]:
        """The mean count of each kind of write per change."""
        kinds = sorted({k for w in self.writes for k in w})
        n = max(1, len(self.writes))
        return {k: sum(w.get(k, 0) for w in self.writes) / n for k in kinds}


def median(values: Sequence[float]) -> float:
    return statistics.median(values) if values else float("nan")


def percentiles(values: Sequence[float]) -> tuple[float, float]:
    """p50 and p99 (linear interpolation, as numpy's default)."""
    return pct(values, 0.5), pct(values, 0.99)


def ratio_line(label: str, value: float, unit: str, target: float, detail: str = "") -> str:
    """``label: value unit detail (target <= target unit, ratio r)``: the line ``python -m
    bench`` turns into a row (ratio = value / target; at most 1.00 meets it)."""
    return (
        f"{label}: {value:.2f} {unit}{detail} (target <= {target:g} {unit}, "
        f"ratio {value / target:.2f})"
    )


def side_line(side: Side, sessions: int) -> str:
    """One side's figures: per-session change -> applied, the last session, Delivered True."""
    p50, p99 = percentiles(side.applied())
    last = median([c.last_applied for c in side.changes])
    lag = median([c.lag for c in side.changes])
    each = ", ".join(f"{c.delivered:.1f}" for c in side.changes)
    return (
        f"fleet {side.name}: {sessions} sessions x {len(side.changes)} changes, change -> applied "
        f"p50 {p50:.2f} s, p99 {p99:.2f} s; last session applied {last:.2f} s, Delivered True "
        f"{side.delivered():.2f} s (median; each: {each} s), {lag:.2f} s after the last session"
    )


def writes_line(side: Side) -> str:
    per = side.writes_per_change()
    text = ", ".join(f"{kind} {count:g}" for kind, count in per.items()) or "none recorded"
    return f"fleet {side.name} writes per change: {text}"


def timeline_line(side: Side) -> str:
    """When each kind of write went out after the change: where the time goes."""
    spans = sorted(side.timeline().items(), key=lambda kv: kv[1][1])
    text = "; ".join(f"{kind} {first:.1f}-{last:.1f} s" for kind, (first, last) in spans)
    return f"fleet {side.name} writes, first-last after the change (medians): {text or 'none'}"


def report_lines(controller: Side, baseline: Side, sessions: int) -> list[str]:
    """The target line first (time to 100 %, controller / baseline), then each side's figures
    and writes per change."""
    ours, theirs = controller.delivered(), baseline.delivered()
    ratio = ours / theirs if theirs > 0 else float("inf")
    pairs = ", ".join(
        f"{c.delivered / b.delivered:.2f}"
        for c, b in zip(controller.changes, baseline.changes, strict=False)
        if b.delivered > 0
    )
    detail = (
        f" (controller {ours:.2f} s, baseline {theirs:.2f} s: medians of "
        f"{len(controller.changes)} changes; per change {pairs})"
    )
    label = f"fleet of {sessions} sessions, time to 100 % (Delivered), controller / baseline"
    return [
        ratio_line(label, ratio, "x", TARGET_RATIO, detail),
        side_line(controller, sessions),
        side_line(baseline, sessions),
        writes_line(controller),
        writes_line(baseline),
        timeline_line(controller),
        timeline_line(baseline),
    ]
