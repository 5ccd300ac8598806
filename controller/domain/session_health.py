"""Session health: what an agent's session pod says about whether the session runs, and why not.

Pure: it reads the pod as a plain mapping (and, when there is no pod, the message of the
workload's last FailedCreate event). The verdict says whether the session runs, and if not,
whether time alone can fix it (starting, being scheduled) or a person must (a refused pod, an
image that cannot be pulled, a crash loop, a container killed for memory).
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum
from typing import Any


class SessionPhase(StrEnum):
    RUNNING = "Running"
    """The pod runs and is ready."""
    STARTING = "Starting"
    """Not running yet, for reasons time or the cluster will resolve (creating, scheduling)."""
    FAILING = "Failing"
    """Not running, and it will not until someone changes the runtime or the namespace."""
    SUSPENDED = "Suspended"
    """Scaled to zero by the idle policy: no pod, and none wanted until the agent has work."""


STALLING_WAITS = frozenset(
    {
        "ImagePullBackOff",
        "ErrImagePull",
        "InvalidImageName",
        "CrashLoopBackOff",
        "CreateContainerConfigError",
        "CreateContainerError",
        "RunContainerError",
    }
)
"""Container waiting reasons that retrying the same pod does not cure."""


@dataclass(frozen=True)
class SessionHealth:
    phase: SessionPhase
    reason: str = ""
    """Why it does not run (Kubernetes' own word: FailedCreate, Unschedulable, ImagePullBackOff,
    CrashLoopBackOff, OOMKilled, ContainerCreating ...); empty while it runs."""
    message: str = ""
    pod: str = ""
    restarts: int = 0

    @property
    def running(self) -> bool:
        return self.phase is SessionPhase.RUNNING

    @property
    def stalled(self) -> bool:
        return self.phase is SessionPhase.FAILING

    @property
    def suspended(self) -> bool:
        return self.phase is SessionPhase.SUSPENDED

    def as_status(self) -> dict[str, Any]:
        """The ``status.session`` document."""
        out: dict[str, Any] = {"phase": self.phase.value}
        if self.pod:
            out["pod"] = self.pod
        if self.reason:
            out["reason"] = self.reason
        if self.message:
            out["message"] = self.message[:1024]
        if self.restarts:
            out["restarts"] = self.restarts
        return out


def _condition(pod: dict[str, Any], type_: str) -> dict[str, Any]:
    conditions = (pod.get("status") or {}).get("conditions") or []
    return next((c for c in conditions if c.get("type") == type_), {})


def suspended_health(pod: dict[str, Any] | None, after_seconds: int) -> SessionHealth:
    """The health of a session the idle policy scaled to zero (its pod, if it is still
    stopping)."""
    name = str((pod or {}).get("metadata", {}).get("name", ""))
    stopping = "; its pod is stopping" if pod is not None else ""
    message = (
        f"idle for {after_seconds} s or more: scaled to zero (spec.runtime.idle){stopping}; "
        "it resumes with the same launch when the agent holds work again"
    )
    return SessionHealth(SessionPhase.SUSPENDED, "Suspended", message, name)


def session_health(pod: dict[str, Any] | None, failed_create: str = "") -> SessionHealth:
    """The health of a session from its pod (None: there is none) and, without a pod, the
    message of the workload's last FailedCreate event."""
    if pod is None:
        if failed_create:
            return SessionHealth(SessionPhase.FAILING, "FailedCreate", failed_create)
        return SessionHealth(
            SessionPhase.STARTING, "PodNotCreated", "the session pod is not created yet"
        )
    md = pod.get("metadata") or {}
    name = str(md.get("name", ""))
    statuses = (pod.get("status") or {}).get("containerStatuses") or []
    restarts = sum(int(c.get("restartCount") or 0) for c in statuses)
    if md.get("deletionTimestamp"):
        phase, reason, message = (
            SessionPhase.STARTING,
            "Terminating",
            "the previous session pod is stopping",
        )
    else:
        phase, reason, message = _failing(pod, statuses) or _progress(pod, statuses)
    return SessionHealth(phase, reason, message, name, restarts)


Verdict = tuple[SessionPhase, str, str]


def _failing(pod: dict[str, Any], statuses: list[dict[str, Any]]) -> Verdict | None:
    """A reason the pod will not run without a change, if there is one."""
    for c in statuses:
        waiting = (c.get("state") or {}).get("waiting") or {}
        reason = str(waiting.get("reason") or "")
        if reason in STALLING_WAITS:
            last = ((c.get("lastState") or {}).get("terminated") or {}).get("reason")
            if reason == "CrashLoopBackOff" and last == "OOMKilled":
                reason = "OOMKilled"
            return SessionPhase.FAILING, reason, str(waiting.get("message") or "")
        crashed = (c.get("state") or {}).get("terminated") or {}
        if crashed.get("exitCode") and int(c.get("restartCount") or 0) > 0:
            # Exited again after restarts, and the kubelet has not (yet) reported its back-off:
            # a crash loop all the same, in the kubelet's own word for the exit.
            code = crashed["exitCode"]
            message = str(
                crashed.get("message")
                or f"the {c.get('name', 'session')} container exited with code {code} "
                f"after {c.get('restartCount')} restarts"
            )
            return SessionPhase.FAILING, str(crashed.get("reason") or "Error"), message
    st = pod.get("status") or {}
    if st.get("phase") in ("Failed", "Succeeded"):
        message = str(st.get("message") or f"the session pod has ended ({st.get('phase')})")
        return SessionPhase.FAILING, str(st.get("reason") or st["phase"]), message
    return None


def _progress(pod: dict[str, Any], statuses: list[dict[str, Any]]) -> Verdict:
    """Running and ready, or on its way there."""
    scheduled = _condition(pod, "PodScheduled")
    if scheduled.get("status") == "False":
        reason = str(scheduled.get("reason") or "Unschedulable")
        return SessionPhase.STARTING, reason, str(scheduled.get("message") or "")
    ready = _condition(pod, "Ready")
    if (pod.get("status") or {}).get("phase") == "Running":
        if ready.get("status") == "True":
            return SessionPhase.RUNNING, "", ""
        message = str(ready.get("message") or "the session pod is not ready")
        return SessionPhase.STARTING, "NotReady", message
    waiting = next(
        (
            str(w.get("reason") or "")
            for c in statuses
            if (w := (c.get("state") or {}).get("waiting"))
        ),
        "",
    )
    return SessionPhase.STARTING, waiting or "ContainerCreating", "the session pod is starting"
