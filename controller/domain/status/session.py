"""The session side of an agent's status: whether the session it asks for runs, and the launch
fields (``drift`` among them) with the RelaunchRequired condition."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from controller.domain.launch import LaunchNotice, LaunchPlan
from controller.domain.session_health import SessionHealth
from controller.domain.status.conditions import condition
from controller.domain.workspace import WorkspaceView


@dataclass(frozen=True)
class SessionView:
    """What the reconciler observed about the agent's session workload after this pass."""

    plan: LaunchPlan
    observed_generation: int | None
    """The launch generation the running session pod was started with (None: none runs)."""
    launched_hash: str | None
    last_launch_time: str
    health: SessionHealth | None = None
    """The session pod's health; None when it was not observed (the session counts as running)."""
    idle_since: str = ""
    """When the agent became idle, under an idle policy (empty: it has work, or no policy)."""
    suspend_after: int | None = None
    """The idle policy's seconds (None: no policy, the session is never suspended)."""
    workspace: WorkspaceView | None = None
    """The session's workspace claim, if the runtime has one."""

    @property
    def running(self) -> bool:
        return self.health is None or self.health.running

    @property
    def suspended(self) -> bool:
        """Scaled to zero by the idle policy: healthy, with no pod."""
        return self.health is not None and self.health.suspended

    def as_status(self) -> dict[str, Any] | None:
        """The ``status.session`` document (None: the health was not observed)."""
        if self.health is None:
            return None
        out = self.health.as_status()
        if self.idle_since:
            out["idleSince"] = self.idle_since
        return out


def _observed(session: SessionView, old: dict[str, Any]) -> int | None:
    """The generation the running pod was started with; while none runs (a relaunch between
    the old pod's end and the new one's start), the last one that ran."""
    if session.observed_generation is not None or session.health is None:
        return session.observed_generation
    last = old.get("observedLaunchGeneration")
    return last if isinstance(last, int) else None


def session_not_ready(session: SessionView, old: dict[str, Any]) -> tuple[str, str] | None:
    """(reason, message) when the session the spec asks for does not run yet, else None."""
    health = session.health
    if health is None or health.suspended:
        return None
    if not health.running:
        where = f"session pod {health.pod}" if health.pod else "the session"
        restarts = f" ({health.restarts} restarts)" if health.restarts else ""
        detail = f": {health.message}" if health.message else ""
        return health.reason, f"{where} is not running: {health.reason}{restarts}{detail}"
    plan = session.plan
    if plan.notice is LaunchNotice.NONE and _observed(session, old) != plan.observed_generation:
        return (
            "Relaunching",
            f"the session pod runs launch generation {session.observed_generation}; "
            f"generation {plan.observed_generation} is starting",
        )
    return None


def launch_status(
    session: SessionView, generation: int, old: dict[str, Any]
) -> tuple[dict[str, Any], dict[str, Any]]:
    """The launch fields of an agent's status, and its RelaunchRequired condition."""
    plan, observed = session.plan, _observed(session, old)
    fields: dict[str, Any] = {
        "launch": f"{'-' if observed is None else observed}/{plan.desired_generation}",
        "desiredLaunchGeneration": plan.desired_generation,
        "desiredTrajectoryHash": plan.desired_hash,
    }
    if observed is not None:
        fields["observedLaunchGeneration"] = observed
    if plan.observed_generation is not None:
        fields["launchedGeneration"] = plan.observed_generation
    if session.launched_hash:
        fields["launchedTrajectoryHash"] = session.launched_hash
    if session.last_launch_time:
        fields["lastLaunchTime"] = session.last_launch_time
    drift = session.launched_hash is not None and session.launched_hash != plan.desired_hash
    change = "change spec.relaunchGeneration to relaunch the session with spec.runtime"
    if plan.notice is LaunchNotice.UNKNOWN:
        reason, drift = "LaunchUnknown", True
        message = (
            "the session workload carries no launch record Bindery can read (made outside "
            f"Bindery, edited, or by an older version); it is kept as found: {change}"
        )
    elif plan.notice is LaunchNotice.EDITED:
        reason, drift = "LaunchRecordEdited", True
        message = (
            "the session workload's launch annotations differ from what Bindery launched "
            f"(generation {plan.observed_generation}); they are not obeyed: {change}"
        )
    elif drift:
        reason = "TrajectoryChanged"
        message = (
            f"spec.runtime changed (desired {plan.desired_hash[:19]}, launched "
            f"{(session.launched_hash or '')[:19]}); {change}"
        )
    else:
        reason, message = "UpToDate", "the session runs the current spec.runtime"
    # The DRIFT column: the session runs something other than spec.runtime asks for. Not a
    # failure (kstatus): Ready stays as it is, and the RelaunchRequired condition says what to do.
    fields["drift"] = drift
    return fields, condition("RelaunchRequired", drift, reason, message, generation)


def suspended_condition(session: SessionView, generation: int) -> dict[str, Any] | None:
    """The Suspended condition of a session under an idle policy (None: no policy)."""
    if session.suspended and session.health is not None:
        return condition("Suspended", True, "Suspended", session.health.message, generation)
    if session.suspend_after is None:
        return None
    if session.idle_since:
        message = (
            f"idle since {session.idle_since}: suspended once idle for "
            f"{session.suspend_after} s (spec.runtime.idle)"
        )
        return condition("Suspended", False, "Idle", message, generation)
    message = "the agent wants or holds work: its session runs"
    return condition("Suspended", False, "HasWork", message, generation)
