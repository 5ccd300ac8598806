"""The relaunch boundary: when a session is launched, kept, or relaunched.

A session is launched with a *trajectory* (``spec.runtime``) at a *launch generation*. Only a
raised ``spec.relaunchGeneration`` relaunches it; a changed runtime without one is drift, shown in
status and never acted on. The launched generation and trajectory hash are read back from the
session workload itself, so a restarted controller adopts what it finds.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, replace
from enum import StrEnum
from typing import Any

from controller.domain.models import Runtime

LAUNCH_GENERATION_ANNOTATION = "bindery.dev/launch-generation"
TRAJECTORY_HASH_ANNOTATION = "bindery.dev/trajectory-hash"
LAUNCHED_AT_ANNOTATION = "bindery.dev/launched-at"
"""The annotations a session's pod template (and so its pod) carries about its launch."""


def trajectory_hash(runtime: Runtime) -> str:
    """A stable content hash of a runtime: sha256 of its canonical JSON (sorted keys, defaults).

    The fields of the first runtime shape (image, command, args, env, model, instructions) are
    always hashed, defaults included; every field added since is hashed only when set to
    something other than its default. A runtime that uses no newer field therefore keeps the
    hash it had before the field existed, so upgrading the controller shows no drift. The idle
    policy is never hashed: it says when the session runs, not what it runs.

    Of ``workspace`` only ``mountPath`` is hashed: adding, removing or moving the workspace
    changes the pod (drift), while its size, class and reclaim policy are the claim's and are
    applied to it without a relaunch.

    ``mcp`` is hashed whole whenever it is set, its defaults included: enabling the adapter with
    ``mcp: {}`` adds a container to the pod, so it is drift like any other change of the pod.
    """

    def pruned(value: dict[str, object]) -> dict[str, object]:
        """``value`` without empty mappings (``securityContext: {}`` is no setting at all)."""
        out: dict[str, object] = {}
        for key, item in value.items():
            kept = pruned(item) if isinstance(item, dict) else item
            if kept != {}:
                out[key] = kept
        return out

    original = {"image", "command", "args", "env", "model", "instructions"}
    not_trajectory = {"idle"}  # when the session runs, not what it runs: never drift
    everything = runtime.model_dump(mode="json", by_alias=True)
    newer = runtime.model_dump(mode="json", by_alias=True, exclude_defaults=True)
    if runtime.workspace is not None:  # only where it is mounted: the claim's own settings
        newer["workspace"] = {"mountPath": runtime.workspace.mount_path}  # change no pod
    if runtime.mcp is not None:  # `mcp: {}` (the default port) is a setting, not an absence
        newer["mcp"] = runtime.mcp.model_dump(mode="json", by_alias=True)
    hashed = {k: v for k, v in everything.items() if k in original}
    hashed |= {k: v for k, v in pruned(newer).items() if k not in original | not_trajectory}
    canonical = json.dumps(
        hashed,
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


class LaunchNotice(StrEnum):
    NONE = ""
    UNKNOWN = "Unknown"
    """The workload carries no launch record Bindery can read: adopted as found."""
    EDITED = "Edited"
    """The workload's launch annotations disagree with what Bindery recorded launching."""


@dataclass(frozen=True)
class LaunchPlan:
    action: LaunchAction
    desired_generation: int
    desired_hash: str
    observed_generation: int | None
    """The launch generation the plan starts from (the record), None when nothing launched."""
    launched_hash: str | None
    notice: LaunchNotice = LaunchNotice.NONE
    launched_at: str = ""
    """When the launch the plan starts from happened (RFC 3339), if known."""

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
        launched_at=launched.launched_at if launched else "",
    )


def plan_session(
    runtime: Runtime,
    relaunch_generation: int,
    *,
    record: Launched | None,
    annotated: Launched | None,
    exists: bool,
) -> LaunchPlan:
    """Decide what to do with a session from Bindery's own record of what it launched (kept in
    the agent's status, which only the controller writes) and what the workload's annotations
    say (which anyone who may patch the workload can change).

    - No workload: launch one.
    - The workload runs exactly the desired generation and runtime: keep it (a relaunch whose
      record had not been written yet when the controller stopped).
    - Otherwise the record decides the generation (when the annotations agree with it, their
      trajectory hash and time stand); without one (an upgrade, a lost status) the annotations
      are adopted; without either, the workload is adopted as found, reported as unknown, and
      relaunched only when ``relaunchGeneration`` changes from what it is now.
    - Annotations that disagree with the record are reported, never obeyed.
    """
    if not exists:
        return plan_launch(runtime, relaunch_generation, None)
    desired_hash = trajectory_hash(runtime)
    if annotated == Launched(
        relaunch_generation, desired_hash, annotated.launched_at if annotated else ""
    ):
        return plan_launch(runtime, relaunch_generation, annotated)
    base = record or annotated
    if record is not None and annotated is not None and annotated.generation == record.generation:
        base = annotated  # they agree on what was launched: the workload's own details stand
    if base is None:
        unknown = Launched(relaunch_generation, "", "")
        return replace(
            plan_launch(runtime, relaunch_generation, unknown), notice=LaunchNotice.UNKNOWN
        )
    plan = plan_launch(runtime, relaunch_generation, base)
    if plan.action is not LaunchAction.KEEP:
        return plan
    if not base.trajectory_hash:  # adopted earlier without a record: still unknown
        return replace(plan, notice=LaunchNotice.UNKNOWN)
    same = annotated is not None and (annotated.generation, annotated.trajectory_hash) == (
        base.generation,
        base.trajectory_hash,
    )
    return plan if same else replace(plan, notice=LaunchNotice.EDITED)


def launched_from_annotations(annotations: dict[str, Any]) -> Launched | None:
    """The launch a session workload's template or pod says it carries (None: it says none)."""
    raw = annotations.get(LAUNCH_GENERATION_ANNOTATION)
    if not isinstance(raw, str) or not raw.isascii() or not raw.isdigit():
        return None
    return Launched(
        int(raw),
        str(annotations.get(TRAJECTORY_HASH_ANNOTATION, "")),
        str(annotations.get(LAUNCHED_AT_ANNOTATION, "")),
    )


def launch_record(status: dict[str, Any]) -> Launched | None:
    """What the controller recorded launching, from the agent's status (only it writes there)."""
    generation = status.get("launchedGeneration")
    if not isinstance(generation, int) or isinstance(generation, bool):
        return None
    return Launched(
        generation,
        str(status.get("launchedTrajectoryHash", "")),
        str(status.get("lastLaunchTime", "")),
    )
