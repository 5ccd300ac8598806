"""Lease expiry arithmetic for leader election (the API calls are covered by test_leader)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from controller.runtime.leader import MICRO, lease_expired

NOW = datetime(2026, 11, 30, 12, 0, 0, tzinfo=UTC)


def lease(
    renewed: datetime | None, seconds: int = 15, acquired: datetime | None = None
) -> dict[str, object]:
    spec: dict[str, object] = {"leaseDurationSeconds": seconds}
    if renewed is not None:
        spec["renewTime"] = renewed.strftime(MICRO)
    if acquired is not None:
        spec["acquireTime"] = acquired.strftime(MICRO)
    return {"spec": spec}


def test_a_recently_renewed_lease_is_live() -> None:
    assert not lease_expired(lease(NOW - timedelta(seconds=14)), NOW)


def test_a_lease_past_its_duration_has_expired() -> None:
    assert lease_expired(lease(NOW - timedelta(seconds=16)), NOW)


def test_acquire_time_counts_when_never_renewed() -> None:
    assert not lease_expired(lease(None, acquired=NOW - timedelta(seconds=1)), NOW)


def test_a_lease_without_times_or_with_garbage_is_expired() -> None:
    assert lease_expired(lease(None), NOW)
    assert lease_expired({"spec": {"renewTime": "yesterday", "leaseDurationSeconds": 15}}, NOW)
