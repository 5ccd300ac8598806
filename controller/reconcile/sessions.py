"""Sessions: an agent's workload, launched, kept, or relaunched at the relaunch boundary."""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass, replace
from typing import Any

import structlog

from controller.domain import names, status, suspend
from controller.domain.launch import (
    LaunchAction,
    Launched,
    LaunchPlan,
    launch_record,
    plan_session,
)
from controller.domain.models import AgentObject, Runtime
from controller.domain.session_health import SessionHealth, session_health, suspended_health
from controller.domain.workspace import WorkspaceView
from controller.k8s import api, builders
from controller.k8s.api import ApiError
from controller.reconcile.acks import Acknowledgements
from controller.reconcile.passes import Pass
from controller.reconcile.result import earliest
from controller.reconcile.store import Store, key_of, resource_version
from controller.reconcile.workspace import Workspaces
from controller.reconcile.writer import StaleWriteError, Writer

log = structlog.get_logger("bindery.sessions")


@dataclass(frozen=True)
class SessionOutcome:
    """What one pass found and did about an agent's session."""

    view: status.SessionView | None
    """The session as status reports it; None for an agent without a runtime."""
    launched: LaunchAction | None = None
    """Set when this pass launched or relaunched the session."""
    requeue_after: float | None = None
    """Seconds before a pass should look again (a session without a pod: nothing else tells;
    an idle session when it is due for suspension)."""


NO_SESSION = SessionOutcome(view=None)


@dataclass(frozen=True)
class _PodReport:
    """What the session pod says in this pass."""

    health: SessionHealth
    running: int | None
    """The launch generation the pod runs (None: none runs)."""
    recheck: float | None
    """When to look again (without a pod: pod creation failures come as Events only)."""


@dataclass(frozen=True)
class _Idling:
    """Where the session stands with its idle policy in this pass."""

    policy: int | None
    """The policy's seconds (None: no policy)."""
    since: str
    """When the agent became idle ("" while it has work, or without a policy)."""
    decision: suspend.IdleDecision


def _idling(
    pass_: Pass, runtime: Runtime, current: dict[str, Any] | None, *, idle: bool, held: bool
) -> _Idling:
    """What the idle policy asks of the session now (its idle clock is kept in status)."""
    policy = runtime.idle.suspend_after_seconds if runtime.idle else None
    now = pass_.now.rfc3339
    since = suspend.idle_since(pass_.old, idle=idle, now=now) if policy is not None else ""
    decision = suspend.decide(
        policy,
        idle=idle,
        held=held,
        suspended=current is not None and _replicas(current) == 0,
        since=since,
        now=pass_.now.wall,
    )
    return _Idling(policy, since, decision)


class Sessions:
    """Converges an agent's session workload with its runtime and relaunch generation, and
    reports how its pod is doing."""

    recheck = 5.0
    """Seconds before a pass looks again at a session without a pod (nothing else tells)."""

    def __init__(
        self,
        store: Store,
        writer: Writer,
        *,
        acks: Acknowledgements,
        service_account: str = "",
    ) -> None:
        self.store = store
        self.writer = writer
        self.acks = acks
        self.service_account = service_account
        self.workspaces = Workspaces(store, writer)

    async def converge(
        self, pass_: Pass, agent: AgentObject, *, idle: bool = False, held: bool = False
    ) -> SessionOutcome:
        """Launch, keep or relaunch the session; suspend or resume it by the idle policy.

        ``idle``: the agent neither wants nor holds work; ``held``: it holds the work it wants
        (a suspended session resumes only then, its hold acquired first).
        """
        current = self._workload(agent)
        if current is not None:
            current = await self.writer.own(pass_, api.STATEFUL_SETS, current, agent, "StatefulSet")
        runtime = agent.spec.runtime
        if runtime is None:
            if current is not None:
                await self.writer.delete_at(pass_, api.STATEFUL_SETS, current)
            return NO_SESSION
        idling = _idling(pass_, runtime, current, idle=idle, held=held)
        workspace = await self.workspaces.converge(pass_, agent, runtime)  # before the pod
        plan = plan_session(
            runtime,
            agent.spec.relaunch_generation,
            record=launch_record(pass_.old),
            annotated=builders.launched_from(current) if current else None,
            exists=current is not None,
        )
        launching = plan.action is not LaunchAction.KEEP
        await self.acks.ensure(pass_, agent, runtime, launching=launching)
        if not launching and current is not None:
            resumed = await self._scale(pass_, agent, current, suspend=idling.decision.suspend)
            return await self._outcome(
                agent, plan, idling, workspace, since=plan.launched_at, just_launched=resumed
            )
        launched = await self._launch(
            pass_, agent, runtime, current, plan, suspended=idling.decision.suspend
        )
        return await self._outcome(
            agent, launched, idling, workspace, since=pass_.now.rfc3339, action=plan.action
        )

    def _workload(self, agent: AgentObject) -> dict[str, Any] | None:
        """The agent's session StatefulSet as last observed."""
        name = names.session_name(agent.meta.name)
        return self.store.get(api.STATEFUL_SETS, names.key(agent.meta.namespace, name))

    async def _launch(
        self,
        pass_: Pass,
        agent: AgentObject,
        runtime: Runtime,
        current: dict[str, Any] | None,
        plan: LaunchPlan,
        *,
        suspended: bool,
    ) -> LaunchPlan:
        """Create the session's workload, or replace its template (a relaunch); the plan as
        launched (suspended if it is launched while idle and due)."""
        now = pass_.now.rfc3339
        desired = builders.session_workload(
            agent,
            runtime,
            launch_generation=plan.desired_generation,
            trajectory_hash=plan.desired_hash,
            launched_at=now,
            service_account=self.service_account,
            delivery=self.acks.delivery,
        )
        if suspended:  # launched or relaunched while idle and due: launched suspended
            desired["spec"]["replicas"] = 0
        if current is None:
            found, created = await self.writer.create(pass_, api.STATEFUL_SETS, desired)
            await self.writer.own(pass_, api.STATEFUL_SETS, found, agent, "StatefulSet")
            if not created:  # made meanwhile: the next pass decides from what is there
                raise StaleWriteError(
                    f"session {key_of(desired)} was created meanwhile; deciding again"
                )
        else:
            await self.relaunch(pass_, current, desired)
        log.info(
            "launched session",
            agent=agent.meta.key,
            action=plan.action.value,
            generation=plan.desired_generation,
            trajectory=plan.desired_hash[:19],
        )
        return replace(
            plan, observed_generation=plan.desired_generation, launched_hash=plan.desired_hash
        )

    async def _outcome(
        self,
        agent: AgentObject,
        plan: LaunchPlan,
        idling: _Idling,
        workspace: WorkspaceView | None,
        *,
        since: str,
        just_launched: bool = True,
        action: LaunchAction | None = None,
    ) -> SessionOutcome:
        """How the session is doing after this pass: suspended by its idle policy, or as its
        pod says (and when to look again)."""
        ns = agent.meta.namespace
        pod_key = names.session_pod_key(ns, agent.meta.name)
        requeue = None
        if idling.decision.suspend and idling.policy is not None:
            health = suspended_health(self.store.get(api.PODS, pod_key), idling.policy)
            running = None
        else:
            report = await self._health(
                ns, agent.meta.name, since=since, just_launched=just_launched
            )
            health, running = report.health, report.running
            requeue = earliest(report.recheck, idling.decision.due_in)
        session_view = status.SessionView(
            plan=plan,
            observed_generation=running,
            launched_hash=plan.launched_hash,
            last_launch_time=since,
            health=health,
            idle_since=idling.since,
            suspend_after=idling.policy,
            workspace=workspace,
        )
        return SessionOutcome(session_view, action, requeue)

    async def _scale(
        self, pass_: Pass, agent: AgentObject, current: dict[str, Any], *, suspend: bool
    ) -> bool:
        """Scale the session to zero (suspend) or back to one (resume), its template untouched:
        a resume is not a relaunch. Whether this resumed it."""
        want = 0 if suspend else 1
        if _replicas(current) == want:
            return False
        await self.writer.patch_at(pass_, api.STATEFUL_SETS, current, {"spec": {"replicas": want}})
        log.info(
            "suspended idle session" if suspend else "resumed session",
            agent=agent.meta.key,
            generation=(builders.launched_from(current) or Launched(0, "")).generation,
        )
        return not suspend

    async def stopped_or_acknowledged(
        self, pass_: Pass, agent: dict[str, Any], uris: Collection[str]
    ) -> bool:
        """A deleted agent's session has let go of its work ``uris``: every pod labelled as its
        session acknowledged the document without them, or runs no more, whoever owns it now.
        Until then it is being stopped (fencing by termination, see :meth:`stop`), and the
        pod's end brings the next pass (the caller looks again after :attr:`recheck` seconds
        too)."""
        md = agent["metadata"]
        ns, agent_name, uid = md.get("namespace", ""), md["name"], str(md.get("uid", ""))
        if self.acks.pods.let_go(ns, agent_name, uid, uris):
            return True
        await self.stop(pass_, ns, agent_name, uid)
        return False

    async def stop(self, pass_: Pass, namespace: str, agent_name: str, agent_uid: str) -> None:
        """Stop the session of a deleted or gone agent: delete its StatefulSet if it is that
        agent's (by uid) or nobody's, never a later agent's of the same name. A session pod that
        no StatefulSet owns is not the controller's to delete: it is waited for."""
        workload = self.acks.pods.workload_of(namespace, agent_name, agent_uid)
        key = names.key(namespace, agent_name)
        if workload is None:  # stopping already, or orphaned: its pods end by themselves
            log.debug("waiting for the session pods of a deleted agent to stop", agent=key)
            return
        if not (workload.get("metadata") or {}).get("deletionTimestamp"):
            log.info("stopping the session of a deleted agent", agent=key)
            await self.writer.delete_at(pass_, api.STATEFUL_SETS, workload)

    async def _health(
        self, ns: str, agent_name: str, *, since: str, just_launched: bool = False
    ) -> _PodReport:
        """What the session pod says (see :class:`_PodReport`)."""
        pod = self.store.get(api.PODS, names.session_pod_key(ns, agent_name))
        failed = ""
        if pod is None and not just_launched:
            failed = await self._failed_create(ns, names.session_name(agent_name), since)
        health = session_health(pod, failed)
        ran = builders.launched_from_pod(pod) if pod is not None and health.running else None
        return _PodReport(
            health, ran.generation if ran else None, self.recheck if pod is None else None
        )

    async def _failed_create(self, ns: str, name: str, since: str) -> str:
        """The message of the StatefulSet's newest FailedCreate Event since ``since``."""
        selector = f"involvedObject.kind=StatefulSet,involvedObject.name={name},reason=FailedCreate"
        try:
            events = await self.writer.api.list_page(api.CORE_EVENTS, ns, field_selector=selector)
        except ApiError as exc:  # not allowed to read Events: report what the pod says
            log.debug("cannot read session events", namespace=ns, name=name, error=str(exc))
            return ""

        def when(e: dict[str, Any]) -> str:
            return str(
                e.get("lastTimestamp")
                or e.get("eventTime")
                or (e.get("metadata") or {}).get("creationTimestamp")
                or ""
            )

        recent = [e for e in events if when(e)[:19] >= since[:19]]
        return str(max(recent, key=when).get("message", "")) if recent else ""

    async def relaunch(self, pass_: Pass, current: dict[str, Any], desired: dict[str, Any]) -> None:
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
        if _replicas(current) != _replicas(desired):  # suspended, or resumed, with it
            ops.append({"op": "replace", "path": "/spec/replicas", "value": _replicas(desired)})
        try:
            await self.writer.json_patch_at(pass_, api.STATEFUL_SETS, current, ops)
        except ApiError as exc:
            if not exc.stale:
                raise
            md = current["metadata"]
            now = await self.writer.reread(pass_, api.STATEFUL_SETS, md["namespace"], md["name"])
            if now is not None and resource_version(now) == md["resourceVersion"]:
                raise  # not a stale version: the API server refused the template itself
            # It changed since we saw it: the retry decides from what is there now.
            raise StaleWriteError(f"session {md['namespace']}/{md['name']} changed") from exc


def _replicas(workload: dict[str, Any]) -> int:
    """The replicas a session workload asks for (1 when unset, the API server's default)."""
    replicas = (workload.get("spec") or {}).get("replicas")
    return replicas if isinstance(replicas, int) else 1
