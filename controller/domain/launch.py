"""The relaunch boundary: when a session is launched, kept, or relaunched.

A session is launched with a *trajectory* (``spec.runtime``) at a *launch generation*. Only a
raised ``spec.relaunchGeneration`` relaunches it; a changed runtime without one is drift, shown in
status and never acted on. The launched generation and trajectory hash are read back from the
session workload itself, so a restarted controller adopts what it finds.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from enum import StrEnum

from controller.domain.models import Runtime


def trajectory_hash(runtime: Runtime) -> str:
    """A stable content hash of a runtime: sha256 of its canonical JSON (sorted keys, defaults)."""
    canonical = json.dumps(
        runtime.model_dump(mode="json", by_alias=True),
        sort_keys=True,
        separators=(",", ":"),
        ensure_ascii=False,
    )
    return "sha256:" + hashlib.sha256(canonical.encode()).hexdigest()


@dataclass(frozen=True)
class Launched:
    """What the session workload says about its own launch (from its pod template)."""

    generation: int
    trajectory_hash: str
    launched_at: str = ""


class LaunchAction(StrEnum):
    LAUNCH = "Launch"
    """No session exists yet: launch one with the current runtime."""
    RELAUNCH = "Relaunch"
    """The desired launch generation was raised: relaunch once with the current runtime."""
    KEEP = "Keep"
    """Leave the running session exactly as it is (drift, if any, is only reported)."""


@dataclass(frozen=True)
class LaunchPlan:
    action: LaunchAction
    desired_generation: int
    desired_hash: str
    observed_generation: int | None
    launched_hash: str | None

    @property
    def drift(self) -> bool:
        """The session runs a trajectory other than ``spec.runtime``; a relaunch would fix it."""
        return (
            self.action is LaunchAction.KEEP
            and self.launched_hash is not None
            and self.launched_hash != self.desired_hash
        )


def plan_launch(
    runtime: Runtime, relaunch_generation: int, launched: Launched | None
) -> LaunchPlan:
    """Decide what to do with an agent's session, given what the workload reports."""
    desired_hash = trajectory_hash(runtime)
    if launched is None:
        action = LaunchAction.LAUNCH
    elif relaunch_generation != launched.generation:
        action = LaunchAction.RELAUNCH
    else:
        action = LaunchAction.KEEP
    return LaunchPlan(
        action=action,
        desired_generation=relaunch_generation,
        desired_hash=desired_hash,
        observed_generation=launched.generation if launched else None,
        launched_hash=launched.trajectory_hash if launched else None,
    )
