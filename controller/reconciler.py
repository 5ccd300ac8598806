"""The level-triggered reconciler.

Watch events (fed by the kopf handlers) only update what the controller has observed and queue
the keys whose desired state may have changed. Workers take keys from one deduplicating queue and
run a single reconcile function per kind, which recomputes desired state from the observed world
and converges it: create, update, resume, dependency changes and retries all take this one path.

Writes are made only when the computed object differs from the observed one, so a pass that
changes nothing writes nothing, and an idle controller makes no API writes.
"""

from __future__ import annotations

import asyncio
import time
import uuid
from collections import OrderedDict
from dataclasses import dataclass, field
from typing import Any, Literal

import structlog
from pydantic import ValidationError

from controller import metrics
from controller.domain import delivery, status
from controller.domain.launch import LaunchAction, Launched, plan_launch
from controller.domain.models import (
    AgentObject,
    AgentSpecSpec,
    ResourceObject,
    ResourceSpec,
    ResourceTypeObject,
    ResourceTypeSpec,
    ToolObject,
    ToolSpec,
    meta_from_body,
)
from controller.domain.multiindex import MultiIndex
from controller.domain.registry import Affected, Registry
from controller.domain.results import AgentResolution, BindingState
from controller.domain.work import Claim, Hold, WorkPlan, WorkState, hold_name, plan_work
from controller.k8s import builders
from controller.k8s.api import (
    AGENTS,
    CONFIG_MAPS,
    EVENTS,
    LEASES,
    RESOURCE_TYPES,
    RESOURCES,
    STATEFUL_SETS,
    TOOLS,
    ApiError,
    Kind,
    KubeApi,
)
from controller.queue import WorkQueue

log = structlog.get_logger("bindery.reconciler")

FINALIZER = "bindery.dev/work-hold"
ItemKind = Literal["agent", "tool", "resource", "type"]
Item = tuple[ItemKind, str]

KIND_OF: dict[ItemKind, Kind] = {
    "agent": AGENTS,
    "tool": TOOLS,
    "resource": RESOURCES,
    "type": RESOURCE_TYPES,
}


def _key(body: dict[str, Any]) -> str:
    md = body.get("metadata") or {}
    ns, name = md.get("namespace") or "", md.get("name", "")
    return f"{ns}/{name}" if ns else name


def _split(key: str) -> tuple[str, str]:
    ns, _, name = key.rpartition("/")
    return ns, name


def _rv(body: dict[str, Any] | None) -> str:
    return str(((body or {}).get("metadata") or {}).get("resourceVersion", ""))


def _newer_or_equal(incoming: dict[str, Any], cached: dict[str, Any] | None) -> bool:
    """Whether an event's object is not older than what is cached (etcd revisions are numbers)."""
    try:
        return cached is None or int(_rv(incoming)) >= int(_rv(cached))
    except ValueError:
        return True


def _remember(cache: dict[str, dict[str, Any]], key: str, written: dict[str, Any]) -> None:
    """Write-through: cache what a write returned, unless a newer version is cached already.

    The watch event of a later change (the controller-manager updating a StatefulSet's status,
    a user editing a spec) can arrive while the write's response is still on its way. Going back
    to the older version would make the next pass decide from it: a user's edit ignored, or a
    resourceVersion-guarded write refused until some unrelated event refreshed the cache.
    """
    if _newer_or_equal(written, cache.get(key)):
        cache[key] = written


def _trim(body: dict[str, Any]) -> dict[str, Any]:
    """The body without ``managedFields``, which the controller never reads (memory)."""
    md = body.get("metadata")
    if not md or "managedFields" not in md:
        return body
    return {**body, "metadata": {k: v for k, v in md.items() if k != "managedFields"}}


def _parse_error(exc: ValidationError) -> str:
    return "; ".join(
        f"spec.{'.'.join(str(p) for p in err['loc'])}: {err['msg']}" for err in exc.errors()
    )


class Tombstones:
    """A bounded set of uids, oldest forgotten first."""

    def __init__(self, capacity: int) -> None:
        self._uids: OrderedDict[str, None] = OrderedDict()
        self._capacity = capacity

    def add(self, uid: str) -> None:
        self._uids[uid] = None
        self._uids.move_to_end(uid)
        while len(self._uids) > self._capacity:
            self._uids.popitem(last=False)

    def __contains__(self, uid: object) -> bool:
        return uid in self._uids


@dataclass
class Observed:
    """Latest observed bodies, by kind and key (from watch events and our own write responses)."""

    bodies: dict[ItemKind, dict[str, dict[str, Any]]] = field(
        default_factory=lambda: {"agent": {}, "tool": {}, "resource": {}, "type": {}}
    )
    parse_errors: dict[Item, str] = field(default_factory=dict)
    config_maps: dict[str, dict[str, Any]] = field(default_factory=dict)
    sessions: dict[str, dict[str, Any]] = field(default_factory=dict)
    """namespace/name -> session StatefulSet."""
    holds: dict[tuple[str, str], Hold] = field(default_factory=dict)
    """(namespace, uri) -> hold."""
    holds_of: MultiIndex[str, tuple[str, str]] = field(default_factory=MultiIndex)
    """holder uid -> the (namespace, uri) of each hold it has."""
    hold_bodies: dict[str, dict[str, Any]] = field(default_factory=dict)
    """namespace/lease-name -> Lease body."""
    wanted: MultiIndex[tuple[str, str], str] = field(default_factory=MultiIndex)
    """(namespace, work uri) -> agents whose spec asks for it."""
    work_of: dict[str, str] = field(default_factory=dict)
    """agent key -> its desired work uri."""
    tombstones: Tombstones = field(default_factory=lambda: Tombstones(100_000))
    """uids of objects seen deleted, so late events cannot bring them back."""


class Controller:
    def __init__(
        self,
        api: KubeApi,
        *,
        workers: int = 8,
        instance: str = "",
        session_service_account: str = "",
    ) -> None:
        self.api = api
        self.registry = Registry()
        self.observed = Observed()
        self.queue: WorkQueue[Item] = WorkQueue()
        self.workers = workers
        self.instance = instance or f"bindery-{uuid.uuid4().hex[:8]}"
        self.session_service_account = session_service_account
        self._tasks: list[asyncio.Task[None]] = []
        self._states: dict[str, str] = {}
        self._event_tasks: set[asyncio.Task[None]] = set()
        self._binding_counts: dict[str, dict[str, int]] = {}

    # ================================================================== intake (watch events)

    def observe(self, kind: ItemKind, body: dict[str, Any], deleted: bool = False) -> None:
        """A custom resource was listed, added, modified or deleted."""
        if self._buried(body, deleted):
            return
        body = _trim(body)
        key = _key(body)
        cache = self.observed.bodies[kind]
        if deleted:
            cache.pop(key, None)
            self.observed.parse_errors.pop((kind, key), None)
            if kind == "agent":
                self._count(key, None, {})
            self._enqueue(self._forget(kind, key))
            return
        if not _newer_or_equal(body, cache.get(key)):
            return
        if _rv(body) == _rv(cache.get(key)) and cache.get(key) is not None:
            return  # our own write, already cached from its response
        cache[key] = body
        affected = self._learn(kind, key, body)
        self._enqueue(affected)
        self.queue.add((kind, key))

    def _learn(self, kind: ItemKind, key: str, body: dict[str, Any]) -> Affected:
        """Parse a body into the registry; a spec the models reject is recorded, not raised."""
        meta = meta_from_body(body)
        spec = body.get("spec") or {}
        try:
            match kind:
                case "type":
                    affected = self.registry.upsert_type(
                        ResourceTypeObject(meta=meta, spec=ResourceTypeSpec.model_validate(spec))
                    )
                case "resource":
                    affected = self.registry.upsert_resource(
                        ResourceObject(meta=meta, spec=ResourceSpec.model_validate(spec))
                    )
                case "tool":
                    affected = self.registry.upsert_tool(
                        ToolObject(meta=meta, spec=ToolSpec.model_validate(spec))
                    )
                case "agent":
                    agent = AgentObject(meta=meta, spec=AgentSpecSpec.model_validate(spec))
                    affected = self.registry.upsert_agent(agent)
                    self._index_work(key, agent)
        except ValidationError as exc:
            self.observed.parse_errors[(kind, key)] = _parse_error(exc)
            return self._forget(kind, key)
        self.observed.parse_errors.pop((kind, key), None)
        return affected

    def _forget(self, kind: ItemKind, key: str) -> Affected:
        ns, name = _split(key)
        match kind:
            case "type":
                return self.registry.delete_type(name)
            case "resource":
                return self.registry.delete_resource(ns, name)
            case "tool":
                return self.registry.delete_tool(ns, name)
            case "agent":
                self._index_work(key, None)
                return self.registry.delete_agent(ns, name)

    def _index_work(self, key: str, agent: AgentObject | None) -> None:
        ns = _split(key)[0]
        old = self.observed.work_of.pop(key, None)
        if old is not None:
            self.observed.wanted.discard((ns, old), key)
            self._enqueue_claimants(ns, old)
        work = agent.spec.work() if agent else None
        if work is not None:
            self.observed.work_of[key] = work.uri
            self.observed.wanted.add((ns, work.uri), key)

    def observe_owned(self, kind: Kind, body: dict[str, Any], deleted: bool = False) -> None:
        """A ConfigMap, StatefulSet or Lease labelled as ours changed."""
        if self._buried(body, deleted):
            return
        body = _trim(body)
        key = _key(body)
        ns = _split(key)[0]
        if kind is LEASES:
            self._observe_hold(key, body, deleted)
            return
        cache = self.observed.config_maps if kind is CONFIG_MAPS else self.observed.sessions
        if deleted:
            cache.pop(key, None)
        elif _rv(body) == _rv(cache.get(key)) or not _newer_or_equal(body, cache.get(key)):
            return
        else:
            cache[key] = body
        agent = ((body.get("metadata") or {}).get("labels") or {}).get(builders.AGENT_LABEL)
        if agent:
            self.queue.add(("agent", f"{ns}/{agent}"))

    def _observe_hold(self, key: str, body: dict[str, Any], deleted: bool) -> None:
        ns = _split(key)[0]
        cached = self.observed.hold_bodies.get(key)
        if not deleted and (_rv(body) == _rv(cached) or not _newer_or_equal(body, cached)):
            return
        hold = _hold_from(body)
        if deleted:
            self.observed.hold_bodies.pop(key, None)
        else:
            self.observed.hold_bodies[key] = body
        if hold is not None:
            self._file_hold(ns, hold, present=not deleted)
        if hold:
            self.queue.add(("agent", hold.holder))
            self._enqueue_claimants(ns, hold.uri)
            for res in self.registry.resources_with_uri(ns, hold.uri):
                self.queue.add(("resource", res.meta.key))

    def _file_hold(self, ns: str, hold: Hold, *, present: bool) -> None:
        """Record (or forget) a hold under its URI and under its holder's uid."""
        slot = (ns, hold.uri)
        current = self.observed.holds.get(slot)
        if current is not None and (present or current.uid == hold.uid):
            del self.observed.holds[slot]
            self.observed.holds_of.discard(current.holder_uid, slot)
        if present:
            self.observed.holds[slot] = hold
            self.observed.holds_of.add(hold.holder_uid, slot)

    def _buried(self, body: dict[str, Any], deleted: bool) -> bool:
        """Whether ``body`` belongs to an object already seen deleted (a late, stale event).

        Watch streams and our own write-through can interleave, so an old ADDED or MODIFIED
        event may arrive after the object is gone; the uid, unique per incarnation, tells.
        """
        uid = str((body.get("metadata") or {}).get("uid", ""))
        if not uid:
            return False
        if deleted:
            self.observed.tombstones.add(uid)
            return False
        return uid in self.observed.tombstones

    def _enqueue_claimants(self, ns: str, uri: str) -> None:
        for agent in self.observed.wanted.get((ns, uri)):
            self.queue.add(("agent", agent))

    def _enqueue(self, affected: Affected) -> None:
        for a in affected.agents:
            self.queue.add(("agent", a))
        for t in affected.tools:
            self.queue.add(("tool", t))
        for r in affected.resources:
            self.queue.add(("resource", r))
        for ty in affected.types:
            self.queue.add(("type", ty))

    def enqueue_all(self) -> None:
        for kind, cache in self.observed.bodies.items():
            for key in cache:
                self.queue.add((kind, key))

    # ================================================================== workers

    def start(self) -> None:
        self._tasks = [
            asyncio.create_task(self._worker(i), name=f"bindery-worker-{i}")
            for i in range(self.workers)
        ]

    async def stop(self) -> None:
        for task in self._tasks:
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        self._tasks = []
        if self._event_tasks:  # let events already on their way arrive
            await asyncio.wait(self._event_tasks, timeout=5)

    async def _worker(self, index: int) -> None:
        while True:
            item = await self.queue.get()
            metrics.QUEUE_DEPTH.set(len(self.queue))
            try:
                await self.process(item)
            except asyncio.CancelledError:
                raise
            except Exception as exc:
                delay = self.queue.retry_delay(item)
                metrics.RECONCILES.labels(item[0], "error").inc()
                # An API refusal is expected now and then (conflicts, a webhook, RBAC); anything
                # else is a bug worth its traceback. Either way the item is retried with backoff.
                report = log.warning if isinstance(exc, ApiError) else log.exception
                report(
                    "reconcile failed; retrying",
                    kind=item[0],
                    key=item[1],
                    retry_in=delay,
                    error=str(exc),
                )
                self.queue.add_after(item, delay)
            else:
                self.queue.forget(item)
            finally:
                self.queue.done(item)

    async def process(self, item: Item) -> None:
        kind, key = item
        started = time.perf_counter()
        body = self.observed.bodies[kind].get(key)
        if body is None:
            return
        match kind:
            case "agent":
                changed = await self.reconcile_agent(key, body)
            case "tool":
                changed = await self.reconcile_tool(key, body)
            case "resource":
                changed = await self.reconcile_resource(key, body)
            case "type":
                changed = await self.reconcile_type(key, body)
        elapsed = time.perf_counter() - started
        outcome = "changed" if changed else "unchanged"
        metrics.RECONCILES.labels(kind, outcome).inc()
        metrics.RECONCILE_SECONDS.labels(kind).observe(elapsed)
        md = body.get("metadata") or {}
        (log.info if changed else log.debug)(
            "reconciled",
            kind=kind,
            namespace=md.get("namespace", ""),
            name=md.get("name"),
            generation=md.get("generation"),
            outcome=outcome,
            ms=round(elapsed * 1000, 2),
        )

    # ================================================================== status writes

    async def _write_status(
        self, kind: ItemKind, key: str, body: dict[str, Any], new: dict[str, Any]
    ) -> bool:
        if body.get("status") == new:
            return False
        ns, name = _split(key)
        try:
            written = await self.api.replace_status(KIND_OF[kind], ns, name, new)
        except ApiError as exc:
            if exc.not_found:
                return False
            raise
        metrics.API_WRITES.labels(KIND_OF[kind].plural, "patch").inc()
        _remember(self.observed.bodies[kind], key, written)
        return True

    def _event(
        self, body: dict[str, Any], kind: str, reason: str, note: str, warning: bool = False
    ) -> None:
        """Post an Event in the background: a pass never waits for (or fails on) one."""
        task = asyncio.get_running_loop().create_task(
            self._post_event(body, kind, reason, note, warning)
        )
        self._event_tasks.add(task)
        task.add_done_callback(self._event_tasks.discard)

    async def _post_event(
        self, body: dict[str, Any], kind: str, reason: str, note: str, warning: bool
    ) -> None:
        md = body.get("metadata") or {}
        ns = md.get("namespace") or "default"
        now = time.time()
        event = {
            "apiVersion": "events.k8s.io/v1",
            "kind": "Event",
            "metadata": {"name": f"{md.get('name')}.{uuid.uuid4().hex[:16]}", "namespace": ns},
            "eventTime": time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(now))
            + f".{int(now % 1 * 1e6):06d}Z",
            "reportingController": "bindery.dev/controller",
            "reportingInstance": self.instance,
            "action": "Reconcile",
            "reason": reason,
            "note": note[:1024],
            "type": "Warning" if warning else "Normal",
            "regarding": {
                "apiVersion": body.get("apiVersion"),
                "kind": kind,
                "name": md.get("name"),
                "namespace": md.get("namespace", ""),
                "uid": md.get("uid"),
            },
        }
        try:
            await self.api.create(EVENTS, event)
            metrics.API_WRITES.labels("events", "create").inc()
        except ApiError as exc:  # events are best effort: never fail a pass for one
            log.warning("could not post event", reason=reason, error=str(exc))

    # ================================================================== small kinds

    async def reconcile_type(self, name: str, body: dict[str, Any]) -> bool:
        gen = int(body["metadata"].get("generation", 0))
        old = body.get("status") or {}
        error = self.observed.parse_errors.get(("type", name))
        if error:
            new = _invalid_status(gen, error, old)
        else:
            new = status.resource_type_status(
                generation=gen,
                closure=self.registry.closure(name),
                old=old,
                now=status.now_rfc3339(),
            )
        return await self._write_status("type", name, body, new)

    async def reconcile_tool(self, key: str, body: dict[str, Any]) -> bool:
        gen = int(body["metadata"].get("generation", 0))
        old = body.get("status") or {}
        error = self.observed.parse_errors.get(("tool", key))
        tool = self.registry.tool(key)
        if error or tool is None:
            new = _invalid_status(gen, error or "not parsed", old)
        else:
            new = status.tool_status(
                generation=gen,
                tool=tool.spec,
                validation=self.registry.validate_tool(key),
                old=old,
                now=status.now_rfc3339(),
            )
        changed = await self._write_status("tool", key, body, new)
        if changed and _ready(new) != _ready(old) and not _ready(new):
            self._event(body, "Tool", "InvalidStaticSlot", _ready_message(new), True)
        return changed

    async def reconcile_resource(self, key: str, body: dict[str, Any]) -> bool:
        gen = int(body["metadata"].get("generation", 0))
        old = body.get("status") or {}
        error = self.observed.parse_errors.get(("resource", key))
        res = self.registry.resource(key)
        if error or res is None:
            new = _invalid_status(gen, error or "not parsed", old)
        else:
            hold = self.observed.holds.get((res.meta.namespace, res.spec.uri))
            new = status.resource_status(
                generation=gen,
                errors=self.registry.validate_resource(key),
                holder=hold,
                old=old,
                now=status.now_rfc3339(),
            )
        return await self._write_status("resource", key, body, new)

    # ================================================================== agents

    async def reconcile_agent(self, key: str, body: dict[str, Any]) -> bool:
        md = body["metadata"]
        gen = int(md.get("generation", 0))
        old = body.get("status") or {}
        if md.get("deletionTimestamp"):
            await self._finalize_agent(key, body)
            return True
        error = self.observed.parse_errors.get(("agent", key))
        agent = self.registry.agent(key)
        if error or agent is None:
            return await self._write_status(
                "agent", key, body, _invalid_status(gen, error or "not parsed", old, state=True)
            )
        resolution = self.registry.resolve(key)
        work = await self._plan_work(agent, resolution, old)
        if work.uri or self._own_holds(agent):
            await self._ensure_finalizer(key, body, present=True)
        work = await self._apply_work(agent, work)

        rendered = delivery.render(
            delivery.bindings_document(agent, resolution, deliver_work=work.deliver)
        )
        writes = await self._deliver(agent, rendered)

        for hold in work.release:  # only after the delivered bindings no longer carry it
            await self._release(hold)
        if not work.uri and not self._own_holds(agent):
            await self._ensure_finalizer(
                key, self.observed.bodies["agent"].get(key, body), present=False
            )

        session, launched_now = await self._converge_session(agent, body)
        body = self.observed.bodies["agent"].get(key, body)
        waiting_since = _waiting_since(old, work)
        new = status.agent_status(
            generation=gen,
            resolution=resolution,
            work=work,
            waiting_since=waiting_since,
            config_map=builders.bindings_config_map_name(agent.meta.name),
            session=session,
            old=old,
            now=status.now_rfc3339(),
        )
        changed = await self._write_status("agent", key, body, new)
        if changed:
            self._agent_events(body, old, new, launched_now)
        self._count(key, new.get("state"), status.binding_counts(resolution))
        return changed or writes

    # ------------------------------------------------------------------ work holds

    def _own_holds(self, agent: AgentObject) -> list[Hold]:
        return self._holds_of(agent.meta.uid)

    def _holds_of(self, uid: str) -> list[Hold]:
        return [self.observed.holds[slot] for slot in sorted(self.observed.holds_of.get(uid))]

    async def _plan_work(
        self, agent: AgentObject, resolution: AgentResolution, old: dict[str, Any]
    ) -> WorkPlan:
        ns = agent.meta.namespace
        work = next((d for d in resolution.direct if d.name == "work"), None)
        desired = work.uri if work is not None and work.state is not BindingState.ERROR else None
        hold = self.observed.holds.get((ns, desired)) if desired else None
        holder_exists = hold is not None and await self._holder_exists(hold)
        rivals = []
        if desired:
            for other in sorted(self.observed.wanted.get((ns, desired))):
                if other == agent.meta.key or (hold is not None and other == hold.holder):
                    continue
                rivals.append(self._claim(other, desired))
        return plan_work(
            agent=agent.meta.key,
            agent_uid=agent.meta.uid,
            desired_uri=desired,
            holds={desired: hold} if desired and hold else {},
            own_holds=self._own_holds(agent),
            holder_exists=holder_exists,
            me=_claim_from(agent.meta.key, old, desired or ""),
            rivals=rivals,
        )

    def _claim(self, agent_key: str, uri: str) -> Claim:
        body = self.observed.bodies["agent"].get(agent_key) or {}
        return _claim_from(agent_key, body.get("status") or {}, uri)

    async def _holder_exists(self, hold: Hold) -> bool:
        cached = self.registry.agent(hold.holder)
        if cached is not None and cached.meta.uid == hold.holder_uid:
            return True
        ns, name = _split(hold.holder)  # not in our view: ask the API server, it is authoritative
        live = await self.api.get(AGENTS, ns, name)
        return live is not None and (live.get("metadata") or {}).get("uid") == hold.holder_uid

    async def _apply_work(self, agent: AgentObject, plan: WorkPlan) -> WorkPlan:
        ns = agent.meta.namespace
        if plan.reclaim is not None:
            log.info(
                "reclaiming a hold whose holder is gone",
                uri=plan.reclaim.uri,
                holder=plan.reclaim.holder,
                by=agent.meta.key,
            )
            await self._release(plan.reclaim)
        if not plan.acquire:
            return plan
        try:
            created = await self.api.create(LEASES, builders.work_hold(agent, plan.uri))
        except ApiError as exc:
            if not exc.conflict:
                raise
            current = await self.api.get(LEASES, ns, hold_name(plan.uri))
            if current is not None:
                self.observe_owned(LEASES, current)
            hold = _hold_from(current) if current else None
            if hold is not None and hold.holder_uid == agent.meta.uid:
                return WorkPlan(
                    state=WorkState.WORKING, uri=plan.uri, release=plan.release, deliver=True
                )
            return WorkPlan(
                state=WorkState.WAITING,
                uri=plan.uri,
                release=plan.release,
                waiting_for=hold.holder if hold else "",
            )
        metrics.API_WRITES.labels("leases", "create").inc()
        self.observe_owned(LEASES, created)
        log.info("acquired work", agent=agent.meta.key, uri=plan.uri)
        return WorkPlan(state=WorkState.WORKING, uri=plan.uri, release=plan.release, deliver=True)

    async def _release(self, hold: Hold) -> None:
        ns = _split(hold.holder)[0]
        try:
            await self.api.delete(
                LEASES, ns, hold.name, uid=hold.uid, resource_version=hold.resource_version
            )
        except ApiError as exc:
            if not exc.conflict:
                raise
            return  # it changed under us: the next pass sees the new state
        metrics.API_WRITES.labels("leases", "delete").inc()
        # While the delete was in flight its watch event may already have let another agent
        # create the next hold under the same name: forget only the incarnation we deleted.
        body = self.observed.hold_bodies.get(f"{ns}/{hold.name}")
        if body is not None and (body.get("metadata") or {}).get("uid") == hold.uid:
            self.observe_owned(LEASES, body, deleted=True)
        else:
            self.observed.tombstones.add(hold.uid)
        log.info("released work", agent=hold.holder, uri=hold.uri)

    async def _ensure_finalizer(self, key: str, body: dict[str, Any], *, present: bool) -> None:
        md = body["metadata"]
        finalizers = list(md.get("finalizers") or [])
        if (FINALIZER in finalizers) == present:
            return
        finalizers = (
            [*finalizers, FINALIZER] if present else [f for f in finalizers if f != FINALIZER]
        )
        ns, name = _split(key)
        patch = {"metadata": {"finalizers": finalizers, "resourceVersion": md["resourceVersion"]}}
        written = await self.api.merge_patch(AGENTS, ns, name, patch)
        metrics.API_WRITES.labels("agentspecs", "patch").inc()
        _remember(self.observed.bodies["agent"], key, written)

    async def _finalize_agent(self, key: str, body: dict[str, Any]) -> None:
        """Deleting an agent: withdraw its work from the session, release holds, let it go."""
        md = body["metadata"]
        if FINALIZER not in (md.get("finalizers") or []):
            return
        ns = md.get("namespace", "")
        uid = md.get("uid", "")
        holds = self._holds_of(uid)
        cm_key = f"{ns}/{builders.bindings_config_map_name(md['name'])}"
        cm = self.observed.config_maps.get(cm_key)
        if holds and cm is not None:
            data = (cm.get("data") or {}).get(delivery.BINDINGS_FILE, "")
            if delivery.delivered_work_uris(data):
                await self._write_config_map(cm_key, cm, delivery.without_work(data))
        for hold in holds:
            await self._release(hold)
        await self._ensure_finalizer(key, body, present=False)

    # ------------------------------------------------------------------ delivery

    async def _deliver(self, agent: AgentObject, rendered: str) -> bool:
        desired = builders.bindings_config_map(agent, rendered)
        key = f"{agent.meta.namespace}/{desired['metadata']['name']}"
        current = self.observed.config_maps.get(key)
        if current is None:
            try:
                created = await self.api.create(CONFIG_MAPS, desired)
            except ApiError as exc:
                if not exc.conflict:
                    raise
                current = await self.api.get(
                    CONFIG_MAPS, agent.meta.namespace, desired["metadata"]["name"]
                )
                if current is None:
                    raise
                _remember(self.observed.config_maps, key, current)
            else:
                metrics.API_WRITES.labels("configmaps", "create").inc()
                _remember(self.observed.config_maps, key, created)
                return True
        if (current.get("data") or {}).get(delivery.BINDINGS_FILE) == rendered:
            return False
        await self._write_config_map(key, current, rendered)
        return True

    async def _write_config_map(self, key: str, current: dict[str, Any], rendered: str) -> None:
        ns, name = _split(key)
        patch = {
            "metadata": {"resourceVersion": current["metadata"]["resourceVersion"]},
            "data": {delivery.BINDINGS_FILE: rendered},
        }
        written = await self.api.merge_patch(CONFIG_MAPS, ns, name, patch)
        metrics.API_WRITES.labels("configmaps", "patch").inc()
        _remember(self.observed.config_maps, key, written)

    # ------------------------------------------------------------------ sessions

    async def _converge_session(
        self, agent: AgentObject, body: dict[str, Any]
    ) -> tuple[status.SessionView | None, LaunchAction | None]:
        ns, name = agent.meta.namespace, builders.session_name(agent.meta.name)
        key = f"{ns}/{name}"
        current = self.observed.sessions.get(key)
        runtime = agent.spec.runtime
        if runtime is None:
            if current is not None:
                await self.api.delete(STATEFUL_SETS, ns, name)
                metrics.API_WRITES.labels("statefulsets", "delete").inc()
                self.observed.sessions.pop(key, None)
            return None, None
        read = builders.launched_from(current) if current is not None else None
        launched = Launched(*read) if read else None
        plan = plan_launch(runtime, agent.spec.relaunch_generation, launched)
        if plan.action is LaunchAction.KEEP and launched is not None:
            return status.SessionView(
                plan, launched.generation, launched.trajectory_hash, launched.launched_at
            ), None
        now = status.now_rfc3339()
        desired = builders.session_workload(
            agent,
            runtime,
            launch_generation=plan.desired_generation,
            trajectory_hash=plan.desired_hash,
            launched_at=now,
            service_account=self.session_service_account,
        )
        if current is None:
            written = await self._create_session(key, desired)
        else:
            written = await self._relaunch_session(agent, current, desired)
        _remember(self.observed.sessions, key, written)
        log.info(
            "launched session",
            agent=agent.meta.key,
            action=plan.action.value,
            generation=plan.desired_generation,
            trajectory=plan.desired_hash[:19],
        )
        return (
            status.SessionView(plan, plan.desired_generation, plan.desired_hash, now),
            plan.action,
        )

    async def _create_session(self, key: str, desired: dict[str, Any]) -> dict[str, Any]:
        try:
            written = await self.api.create(STATEFUL_SETS, desired)
        except ApiError as exc:
            if not exc.conflict:
                raise
            await self._reread_session(*_split(key))  # adopt it: the next pass decides from it
            raise
        metrics.API_WRITES.labels("statefulsets", "create").inc()
        return written

    async def _reread_session(self, ns: str, name: str) -> None:
        found = await self.api.get(STATEFUL_SETS, ns, name)
        if found is not None:
            _remember(self.observed.sessions, f"{ns}/{name}", found)

    async def _relaunch_session(
        self, agent: AgentObject, current: dict[str, Any], desired: dict[str, Any]
    ) -> dict[str, Any]:
        """Replace the pod template whole, guarded by the resourceVersion we decided from.

        A merge patch would keep fields the new runtime dropped. The StatefulSet's rolling
        update then deletes the one pod and starts the new one only once the old one is gone.
        """
        ns, name = agent.meta.namespace, desired["metadata"]["name"]
        ops = [
            {
                "op": "add",
                "path": "/metadata/annotations",
                "value": desired["metadata"]["annotations"],
            },
            {"op": "replace", "path": "/spec/template", "value": desired["spec"]["template"]},
        ]
        rv = current["metadata"]["resourceVersion"]
        try:
            written = await self.api.json_patch_at(STATEFUL_SETS, ns, name, rv, ops)
        except ApiError as exc:
            if exc.stale:  # it changed since we saw it: the retry decides from what is there now
                await self._reread_session(ns, name)
            raise
        metrics.API_WRITES.labels("statefulsets", "patch").inc()
        return written

    # ------------------------------------------------------------------ events and metrics

    def _agent_events(
        self,
        body: dict[str, Any],
        old: dict[str, Any],
        new: dict[str, Any],
        launched: LaunchAction | None,
    ) -> None:
        before, after = old.get("state"), new.get("state")
        if launched is not None:
            self._event(
                body,
                "AgentSpec",
                "Launched" if launched is LaunchAction.LAUNCH else "Relaunched",
                f"session launched at generation {new.get('desiredLaunchGeneration')}"
                f" with trajectory {str(new.get('desiredTrajectoryHash'))[:19]}",
            )
        if before == after:
            return
        message = _ready_message(new)
        if after == status.ERROR_STATE:
            self._event(body, "AgentSpec", "BindingError", message, warning=True)
        elif after == WorkState.WAITING.value:
            self._event(body, "AgentSpec", "WaitingForWork", message)
        elif after == WorkState.WORKING.value:
            uri = (new.get("work") or {}).get("uri", "")
            self._event(body, "AgentSpec", "AcquiredWork", f"holds work URI {uri!r}")
        elif before == status.ERROR_STATE:  # a new agent says it in its Ready condition
            self._event(body, "AgentSpec", "Bound", message)

    def _count(self, key: str, state: str | None, bindings: dict[str, int]) -> None:
        """Keep the by-state gauges current by difference, without scanning every agent."""
        before_state = self._states.pop(key, None)
        if before_state is not None:
            metrics.AGENTS_BY_STATE.labels(before_state).dec()
        for binding_state, n in self._binding_counts.pop(key, {}).items():
            metrics.BINDINGS_BY_STATE.labels(binding_state).dec(n)
        if state:
            self._states[key] = state
            metrics.AGENTS_BY_STATE.labels(state).inc()
        if bindings:
            self._binding_counts[key] = bindings
            for binding_state, n in bindings.items():
                metrics.BINDINGS_BY_STATE.labels(binding_state).inc(n)


# ====================================================================== helpers


def _hold_from(body: dict[str, Any] | None) -> Hold | None:
    if not body:
        return None
    md = body.get("metadata") or {}
    ann = md.get("annotations") or {}
    uri = ann.get(builders.URI_ANNOTATION)
    holder = (body.get("spec") or {}).get("holderIdentity")
    if not uri or not holder:
        return None
    return Hold(
        uri=uri,
        holder=holder,
        holder_uid=ann.get(builders.HOLDER_UID_ANNOTATION, ""),
        name=md.get("name", ""),
        resource_version=str(md.get("resourceVersion", "")),
        uid=md.get("uid", ""),
    )


def _claim_from(agent_key: str, agent_status: dict[str, Any], uri: str) -> Claim:
    work = agent_status.get("work") or {}
    since = work.get("since", "") if work.get("uri") == uri and not work.get("held") else ""
    return Claim(agent=agent_key, waiting_since=since)


def _waiting_since(old: dict[str, Any], plan: WorkPlan) -> str:
    if plan.state is not WorkState.WAITING:
        return ""
    work = old.get("work") or {}
    if work.get("uri") == plan.uri and not work.get("held") and work.get("since"):
        return str(work["since"])
    return status.now_rfc3339()


def _invalid_status(
    generation: int, error: str, old: dict[str, Any], *, state: bool = False
) -> dict[str, Any]:
    conditions = [
        status.condition("Ready", False, "InvalidSpec", error, generation),
        status.condition("Stalled", True, "InvalidSpec", error, generation),
    ]
    new: dict[str, Any] = {
        "observedGeneration": generation,
        "conditions": status.merge_conditions(
            old.get("conditions"), conditions, status.now_rfc3339()
        ),
    }
    if state:
        new["state"] = status.ERROR_STATE
    return new


def _ready(st: dict[str, Any]) -> bool:
    return any(
        c.get("type") == "Ready" and c.get("status") == "True" for c in st.get("conditions") or []
    )


def _ready_message(st: dict[str, Any]) -> str:
    return next(
        (str(c.get("message", "")) for c in st.get("conditions") or [] if c.get("type") == "Ready"),
        "",
    )
