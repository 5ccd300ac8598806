"""Sessions: an agent's workload, launched, kept, or relaunched at the relaunch boundary."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import structlog

from controller.domain import status
from controller.domain.launch import LaunchAction, Launched, plan_launch
from controller.domain.models import AgentObject
from controller.domain.refs import Request
from controller.k8s import api, builders
from controller.k8s.api import ApiError
from controller.reconcile.store import Store, resource_version
from controller.reconcile.writer import StaleWriteError, Writer

log = structlog.get_logger("bindery.sessions")


@dataclass(frozen=True)
class SessionOutcome:
    """What one pass found and did about an agent's session."""

    view: status.SessionView | None
    """The session as status reports it; None for an agent without a runtime."""
    launched: LaunchAction | None = None
    """Set when this pass launched or relaunched the session."""


NO_SESSION = SessionOutcome(view=None)


class Sessions:
    """Converges an agent's session workload with its runtime and relaunch generation."""

    def __init__(self, store: Store, writer: Writer, *, service_account: str = "") -> None:
        self.store = store
        self.writer = writer
        self.service_account = service_account

    async def converge(self, by: Request, agent: AgentObject) -> SessionOutcome:
        ns, name = agent.meta.namespace, builders.session_name(agent.meta.name)
        current = self.store.get(api.STATEFUL_SETS, f"{ns}/{name}")
        runtime = agent.spec.runtime
        if runtime is None:
            if current is not None:
                await self.writer.delete_at(by, api.STATEFUL_SETS, current)
            return NO_SESSION
        read = builders.launched_from(current) if current is not None else None
        launched = Launched(*read) if read else None
        plan = plan_launch(runtime, agent.spec.relaunch_generation, launched)
        if plan.action is LaunchAction.KEEP and launched is not None:
            view = status.SessionView(
                plan, launched.generation, launched.trajectory_hash, launched.launched_at
            )
            return SessionOutcome(view)
        now = status.now_rfc3339()
        desired = builders.session_workload(
            agent,
            runtime,
            launch_generation=plan.desired_generation,
            trajectory_hash=plan.desired_hash,
            launched_at=now,
            service_account=self.service_account,
        )
        if current is None:
            _, created = await self.writer.create(by, api.STATEFUL_SETS, desired)
            if not created:  # someone made it first: the next pass decides from what is there
                raise ApiError(409, "POST", api.STATEFUL_SETS.path(ns), {"reason": "AlreadyExists"})
        else:
            await self.relaunch(by, current, desired)
        log.info(
            "launched session",
            agent=agent.meta.key,
            action=plan.action.value,
            generation=plan.desired_generation,
            trajectory=plan.desired_hash[:19],
        )
        return SessionOutcome(
            status.SessionView(plan, plan.desired_generation, plan.desired_hash, now), plan.action
        )

    async def relaunch(self, by: Request, current: dict[str, Any], desired: dict[str, Any]) -> None:
        """Replace the pod template whole, guarded by the resourceVersion we decided from.

        A merge patch would keep fields the new runtime dropped. The StatefulSet's rolling
        update then deletes the one pod and starts the new one only once the old one is gone.
        """
        ops = [
            {
                "op": "add",
                "path": "/metadata/annotations",
                "value": desired["metadata"]["annotations"],
            },
            {"op": "replace", "path": "/spec/template", "value": desired["spec"]["template"]},
        ]
        try:
            await self.writer.json_patch_at(by, api.STATEFUL_SETS, current, ops)
        except ApiError as exc:
            if not exc.stale:
                raise
            md = current["metadata"]
            now = await self.writer.reread(by, api.STATEFUL_SETS, md["namespace"], md["name"])
            if now is not None and resource_version(now) == md["resourceVersion"]:
                raise  # not a stale version: the API server refused the template itself
            # It changed since we saw it: the retry decides from what is there now.
            raise StaleWriteError(f"session {md['namespace']}/{md['name']} changed") from exc
