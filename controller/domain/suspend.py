"""The idle policy: when an idle agent's session is suspended (scaled to zero) and resumed.

An agent is *idle* when it neither wants nor holds a work URI: waiting for a hold is not idle,
and neither is releasing one (its session has not let go yet). The moment it became idle is kept
in its status (``status.session.idleSince``), so the clock survives a controller restart. Once
idle for ``spec.runtime.idle.suspendAfterSeconds`` its session is scaled to zero replicas, its
template untouched (no relaunch; the launch record stays). It resumes, with the same launched
template, once it holds work again: the hold is acquired first, so a suspended agent that waits
for a URI stays suspended until the URI is its own.

Pure: no Kubernetes client; the reconciler passes in what it observed.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from controller.domain.acknowledgement import countable_time, read_time, seconds_since

SUSPENDED_REASON = "Suspended"
"""The reason of the Ready and Suspended conditions, and the ``status.state``, while suspended."""


def idle_since(old: dict[str, Any], *, idle: bool, now: str) -> str:
    """When the agent became idle: kept from ``old`` (``status.session.idleSince``) while it
    stays idle, ``now`` when it just became idle, empty while it has work."""
    if not idle:
        return ""
    before = (old.get("session") or {}).get("idleSince")
    clock = read_time(now)
    if before and (clock is None or countable_time(before, clock)):
        return str(before)
    return now  # none yet, or one it cannot count from (written by others): from now on


@dataclass(frozen=True)
class IdleDecision:
    """What the idle policy asks of an agent's session in this pass."""

    suspend: bool
    """Run the session at zero replicas (suspend it, or keep it suspended)."""
    due_in: float | None = None
    """Seconds until it is due for suspension (look again then); None when nothing is due."""


RUN = IdleDecision(suspend=False)


def decide(
    after_seconds: int | None,
    *,
    idle: bool,
    held: bool,
    suspended: bool,
    since: str,
    now: datetime,
) -> IdleDecision:
    """Whether the session should be suspended.

    ``after_seconds`` is the policy (None: never suspend); ``idle`` whether the agent neither
    wants nor holds work; ``held`` whether it holds the work URI it wants; ``suspended`` whether
    its session is at zero replicas now; ``since`` when it became idle (RFC 3339).

    - No policy: run (a session suspended under a policy since removed resumes).
    - Suspended: stay suspended until it holds work (a waiting agent resumes only once the hold
      is its own, so the resumed session is handed its work at once).
    - Running: suspend once idle for ``after_seconds``; until then, say when that is due.
    """
    if after_seconds is None:
        return RUN
    if suspended:
        return RUN if held else IdleDecision(suspend=True)
    if not idle or not since:
        return RUN
    left = after_seconds - seconds_since(since, now)
    if left <= 0:
        return IdleDecision(suspend=True)
    return IdleDecision(suspend=False, due_in=left)
