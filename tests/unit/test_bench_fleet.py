"""The fleet benchmark's pure parts: percentiles, each side's figures, and the target line that
``python -m bench`` reads into its table."""

from __future__ import annotations

import json
import math

import pytest

from bench.__main__ import _RATIO_LINE
from bench.fleet_report import (
    TARGET_RATIO,
    Change,
    Side,
    percentiles,
    ratio_line,
    report_lines,
    side_line,
    timeline_line,
    writes_line,
)
from bench.fleet_sessions import revision_of


def side(name: str, *changes: tuple[list[float], float]) -> Side:
    return Side(name, [Change(tuple(applied), delivered) for applied, delivered in changes])


def test_percentiles_interpolate_between_samples() -> None:
    p50, p99 = percentiles([float(i) for i in range(1, 101)])  # 1 .. 100
    assert p50 == pytest.approx(50.5)
    assert p99 == pytest.approx(99.01)


def test_percentiles_of_one_sample_are_that_sample_and_of_none_are_nan() -> None:
    assert percentiles([2.5]) == (2.5, 2.5)
    assert all(math.isnan(x) for x in percentiles([]))


def test_a_change_knows_its_last_session_and_the_lag_to_delivered() -> None:
    change = Change((0.2, 0.9, 0.4), delivered=1.5)
    assert change.last_applied == 0.9
    assert change.lag == pytest.approx(0.6)


def test_a_side_pools_every_session_of_every_change_and_takes_the_median_delivered() -> None:
    s = side("controller", ([0.1, 0.2], 3.0), ([0.3], 1.0), ([0.4], 2.0))
    assert sorted(s.applied()) == [0.1, 0.2, 0.3, 0.4]
    assert s.delivered() == 2.0


def test_writes_per_change_are_means_over_changes_and_list_every_kind() -> None:
    s = Side(
        "controller", writes=[{"configmaps patch": 4, "events create": 2}, {"configmaps patch": 6}]
    )
    assert s.writes_per_change() == {"configmaps patch": 5.0, "events create": 1.0}
    assert (
        writes_line(s) == "fleet controller writes per change: configmaps patch 5, events create 1"
    )


def test_the_target_line_is_a_ratio_line_the_bench_table_reads() -> None:
    ours = side("controller", ([1.0], 3.0), ([1.0], 4.5), ([1.0], 6.0))
    theirs = side("same-writes baseline", ([1.0], 2.0), ([1.0], 3.0), ([1.0], 4.0))
    line = report_lines(ours, theirs, 1000)[0]
    m = _RATIO_LINE.match(line)
    assert m is not None, line
    assert m.group("value") == "1.50"  # 4.5 s / 3.0 s, the medians
    assert m.group("unit") == "x"
    assert float(m.group("target")) == TARGET_RATIO
    assert m.group("ratio") == "1.00"  # exactly on the target: met
    assert "per change 1.50, 1.50, 1.50" in line
    assert "1000 sessions" in m.group("label")


def test_a_miss_reads_as_a_ratio_above_one() -> None:
    ours = side("controller", ([1.0], 9.0))
    theirs = side("same-writes baseline", ([1.0], 3.0))
    m = _RATIO_LINE.match(report_lines(ours, theirs, 50)[0])
    assert m is not None
    assert float(m.group("value")) == 3.0
    assert float(m.group("ratio")) == 2.0


def test_ratio_line_format() -> None:
    assert (
        ratio_line("x", 0.75, "x", 1.5, " (more)")
        == "x: 0.75 x (more) (target <= 1.5 x, ratio 0.50)"
    )


def test_side_line_reports_p50_p99_last_session_and_delivered() -> None:
    s = side("controller", ([0.5, 1.0, 2.0], 3.0))
    line = side_line(s, 3)
    assert "p50 1.00 s" in line
    assert "last session applied 2.00 s" in line
    assert "Delivered True 3.00 s" in line
    assert "1.00 s after the last session" in line


def test_revision_of_reads_the_shared_resources_attribute() -> None:
    doc = {"resources": [{"name": "shared", "resource": {"attributes": {"revision": "7"}}}]}
    assert revision_of(json.dumps(doc)) == "7"
    assert revision_of(json.dumps({"resources": []})) == ""
    assert revision_of("not json") == ""


def test_the_timeline_orders_kinds_of_write_by_their_last_and_takes_medians() -> None:
    s = Side(
        "controller",
        timelines=[
            {"configmaps patch": (0.1, 10.0), "agentspecs/status patch": (0.2, 30.0)},
            {"configmaps patch": (0.3, 12.0), "agentspecs/status patch": (0.4, 34.0)},
        ],
    )
    assert s.timeline()["configmaps patch"] == pytest.approx((0.2, 11.0))
    assert timeline_line(s) == (
        "fleet controller writes, first-last after the change (medians): configmaps patch "
        "0.2-11.0 s; agentspecs/status patch 0.3-32.0 s"
    )
