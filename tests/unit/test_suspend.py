"""The idle policy: the idle clock kept in status, when suspension is due, and when a suspended
session resumes (controller/domain/suspend.py)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from hypothesis import given
from hypothesis import strategies as st
from pydantic import ValidationError

from controller.domain import suspend
from controller.domain.launch import trajectory_hash
from controller.domain.models import Runtime
from controller.domain.session_health import SessionPhase, suspended_health

NOW = datetime(2026, 1, 1, 12, 0, 0, tzinfo=UTC)
STAMP = "2026-01-01T12:00:00Z"


def ago(seconds: float) -> str:
    return (NOW - timedelta(seconds=seconds)).strftime("%Y-%m-%dT%H:%M:%SZ")


def test_the_idle_clock_starts_when_the_agent_becomes_idle() -> None:
    assert suspend.idle_since({}, idle=True, now=STAMP) == STAMP


def test_the_idle_clock_is_kept_from_status_while_idle() -> None:
    """Level-triggered: a restarted controller reads when the agent became idle."""
    old = {"session": {"phase": "Running", "idleSince": ago(300)}}
    assert suspend.idle_since(old, idle=True, now=STAMP) == ago(300)


def test_the_idle_clock_is_cleared_while_the_agent_has_work() -> None:
    old = {"session": {"idleSince": ago(300)}}
    assert suspend.idle_since(old, idle=False, now=STAMP) == ""


def decide(
    after: int | None = 60,
    *,
    idle: bool = True,
    held: bool = False,
    suspended: bool = False,
    since: str = "",
) -> suspend.IdleDecision:
    return suspend.decide(after, idle=idle, held=held, suspended=suspended, since=since, now=NOW)


def test_no_policy_never_suspends() -> None:
    assert decide(None, since=ago(10**6)) == suspend.RUN


def test_a_policy_removed_while_suspended_resumes() -> None:
    assert decide(None, suspended=True) == suspend.RUN


def test_an_idle_session_is_due_after_the_policy_seconds() -> None:
    assert decide(60, since=ago(60)).suspend
    assert decide(60, since=ago(3600)).suspend


def test_before_it_is_due_the_pass_asks_to_look_again_then() -> None:
    decision = decide(60, since=ago(20))
    assert not decision.suspend
    assert decision.due_in == pytest.approx(40)


def test_an_agent_with_work_is_never_suspended() -> None:
    """Working, waiting for a hold or releasing one are not idle."""
    assert decide(1, idle=False, since="") == suspend.RUN


def test_a_suspended_agent_resumes_only_once_it_holds_its_work() -> None:
    assert decide(60, suspended=True, idle=False, held=False).suspend  # waiting: stays down
    assert decide(60, suspended=True, idle=True, since=ago(5)).suspend
    assert decide(60, suspended=True, idle=False, held=True) == suspend.RUN


@given(after=st.integers(1, 10**6), elapsed=st.integers(0, 2 * 10**6))
def test_due_iff_idle_for_at_least_the_policy(after: int, elapsed: int) -> None:
    decision = decide(after, since=ago(elapsed))
    assert decision.suspend == (elapsed >= after)
    if not decision.suspend:
        assert decision.due_in == pytest.approx(after - elapsed)


def test_the_idle_policy_is_not_part_of_the_trajectory() -> None:
    """Changing it takes effect without a relaunch: no drift."""
    plain = Runtime.model_validate({"image": "a:1"})
    idle = Runtime.model_validate({"image": "a:1", "idle": {"suspendAfterSeconds": 30}})
    assert trajectory_hash(plain) == trajectory_hash(idle)


@pytest.mark.parametrize("seconds", [0, -1, 31_536_001])
def test_the_policy_seconds_are_bounded(seconds: int) -> None:
    with pytest.raises(ValidationError):
        Runtime.model_validate({"image": "a:1", "idle": {"suspendAfterSeconds": seconds}})


def test_a_suspended_session_is_healthy_and_not_starting() -> None:
    health = suspended_health(None, 30)
    assert health.phase is SessionPhase.SUSPENDED
    assert health.suspended
    assert not health.stalled
    assert health.as_status()["phase"] == "Suspended"
    stopping = suspended_health({"metadata": {"name": "a-session-0"}}, 30)
    assert stopping.pod == "a-session-0"
    assert "stopping" in stopping.message
