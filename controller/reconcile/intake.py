"""The intake: what one observed object version changes in memory, and which requests it affects.

Every version the controller learns of (a watch event, a start-up LIST item, or the response to
its own write) passes through :meth:`Intake.observe`. It updates the store, the registry and the
indexes, and returns the requests whose desired state may have changed. It performs no I/O and
enqueues nothing itself. A write's response names the request that made it (``by``): that
request is never returned, since the pass that wrote already decided from what it wrote, unless
the response carries a spec the pass did not decide from (a user's edit that landed first).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import structlog
from pydantic import ValidationError

from controller.domain.grants import parse_grant
from controller.domain.models import AgentObject, parse_object
from controller.domain.refs import Kind, Ref, Request
from controller.domain.registry import Affected, Registry
from controller.domain.status import failure
from controller.domain.work import Hold
from controller.k8s import api, builders
from controller.reconcile import metrics
from controller.reconcile.index import HoldIndex, SessionPodIndex, WantedIndex, hold_problem
from controller.reconcile.store import Body, Store

log = structlog.get_logger("bindery.intake")

KINDS: dict[api.Endpoint, Kind] = {endpoint: kind for kind, endpoint in api.ENDPOINTS.items()}
OWNED: tuple[api.Endpoint, ...] = (
    api.CONFIG_MAPS,
    api.STATEFUL_SETS,
    api.LEASES,
    api.PODS,
    api.PERSISTENT_VOLUME_CLAIMS,
)
"""The kinds of object the controller creates for agents (labelled as managed by Bindery)."""
OWNED_SELECTOR = f"{builders.MANAGED_BY}={builders.MANAGER}"
"""The label selector of the objects the controller creates."""


def parse_error(exc: Exception) -> str:
    """Why a spec was refused, naming each field (see :func:`failure.refusal`)."""
    return failure.refusal(exc)


def _learned(body: Body | None) -> tuple[Any, ...]:
    """What the registry learns from a body: a version differing only elsewhere (status,
    finalizers, resourceVersion) changes nothing it knows."""
    md = (body or {}).get("metadata") or {}
    return (md.get("uid"), md.get("generation"), md.get("labels"), (body or {}).get("spec"))


def _acknowledgement(body: Body) -> bool:
    """A session's acknowledgement Lease (not a hold): its agent is what it affects."""
    labels = (body.get("metadata") or {}).get("labels") or {}
    return labels.get(builders.COMPONENT_LABEL) == "session-ack"


def _handed_over(before: Hold | None, after: Hold | None) -> bool:
    """The same hold (uid) now names another holder: Bindery never does that."""
    return (
        before is not None
        and after is not None
        and before.uid == after.uid
        and (before.holder, before.holder_uid) != (after.holder, after.holder_uid)
    )


class Intake:
    """Applies observed object versions to the store, registry and indexes (memory only)."""

    def __init__(self, store: Store, registry: Registry) -> None:
        self.store = store
        self.registry = registry
        self.holds = HoldIndex()
        self.wanted = WantedIndex()
        self.session_pods = SessionPodIndex()
        self.hold_namespace = ""
        """Where cluster-scope holds live: a hold there may name a holder of any namespace."""
        self.parse_errors: dict[Request, str] = {}
        self.suspects: set[Request] = set()
        """Agents whose owned object someone else deleted: perhaps the garbage collector, because
        the agent itself is gone and its DELETED event was missed. Their next pass checks."""
        self.on_agent_gone: Callable[[str], None] = lambda key: None
        """Called with an agent's key when it leaves the view (its gauges are forgotten)."""

    def observe(
        self,
        endpoint: api.Endpoint,
        body: Body,
        *,
        deleted: bool = False,
        by: Request | None = None,
    ) -> set[Request]:
        """Apply one observed version; return the requests it affects (``by`` excluded)."""
        kind = KINDS.get(endpoint)
        if endpoint is api.NAMESPACES:
            affected = self._namespace(body, deleted)
        elif kind is not None:
            affected = self._bindery(kind, endpoint, body, deleted, by)
        elif endpoint is api.LEASES and not _acknowledgement(body):
            affected = self._hold(body, deleted)
            if by is not None:
                affected.discard(by)
        else:
            affected = self._owned(endpoint, body, deleted, by)
        return affected

    # ------------------------------------------------------------------ the five kinds

    def _bindery(
        self, kind: Kind, endpoint: api.Endpoint, body: Body, deleted: bool, by: Request | None
    ) -> set[Request]:
        ref = Ref.of(body)
        request = Request(kind, ref)
        if deleted:
            if self.store.delete(endpoint, body) is None:
                return set()
            self.parse_errors.pop(request, None)
            self.suspects.discard(request)
            if kind is Kind.AGENT:
                self.on_agent_gone(ref.key)
                # Its own request too: a hold still naming it is released by its "gone" pass.
                return {request, *self._requests(self._forget(kind, ref))}
            return self._requests(self._forget(kind, ref))
        previous = self.store.put(endpoint, body)
        if previous is body:
            return set()
        if by is not None and _learned(previous) == _learned(body):
            return set()  # our own write: nothing the registry knows has changed
        # Parsed from the stored form (equal to ``body``): the registry's objects then share
        # its strings instead of holding copies of their own.
        stored = self.store.get(endpoint, ref.key) or body
        return {request, *self._requests(self._learn(kind, ref, stored))}

    def _learn(self, kind: Kind, ref: Ref, body: Body) -> Affected:
        """Parse a body into the registry; a spec the models reject is recorded, not raised:
        whatever parsing raises (pydantic's errors, or anything a value the schema let through
        makes a parser raise) refuses that spec, with the field and the reason, and nothing
        else (the one rule: see :mod:`controller.domain.status.failure`)."""
        try:
            obj = parse_grant(body) if kind is Kind.GRANT else parse_object(kind.kind_name, body)
        except Exception as exc:
            if not isinstance(exc, ValidationError):
                log.warning(
                    "a spec the models could not parse is refused",
                    object=f"{kind.kind_name} {ref.key}",
                    error=failure.one_line(f"{type(exc).__name__}: {exc}"),
                    exc_info=exc,
                )
            self.parse_errors[Request(kind, ref)] = parse_error(exc)
            return self._forget(kind, ref)
        self.parse_errors.pop(Request(kind, ref), None)
        affected = self.registry.upsert(obj)
        if isinstance(obj, AgentObject):
            # An agent being deleted leaves the line for its work URI at once: the claimants
            # behind it must not wait for an agent that will never hold.
            deleting = bool((body.get("metadata") or {}).get("deletionTimestamp"))
            affected |= self._file_work(ref, None if deleting else obj)
        return affected

    def _forget(self, kind: Kind, ref: Ref) -> Affected:
        match kind:
            case Kind.TYPE:
                return self.registry.delete_type(ref.name)
            case Kind.RESOURCE:
                return self.registry.delete_resource(ref.namespace, ref.name)
            case Kind.TOOL:
                return self.registry.delete_tool(ref.namespace, ref.name)
            case Kind.AGENT:
                return self.registry.delete_agent(ref.namespace, ref.name) | self._file_work(
                    ref, None
                )
            case Kind.GRANT:
                return self.registry.delete_grant(ref.namespace, ref.name)

    def _file_work(self, ref: Ref, agent: AgentObject | None) -> Affected:
        """Index the work URI ``agent`` asks for; the claimants of a URI it stopped asking for
        may now go ahead."""
        old = self.wanted.update(ref.namespace, ref.key, agent)
        if old is None or (agent is not None and old == self.wanted.work_of.get(ref.key)):
            return Affected()
        return Affected(agents=frozenset(self.wanted.line(ref.namespace, old)))

    @staticmethod
    def _requests(affected: Affected) -> set[Request]:
        requests = {Request(Kind.AGENT, Ref.parse(k)) for k in affected.agents}
        requests.update(Request(Kind.TOOL, Ref.parse(k)) for k in affected.tools)
        requests.update(Request(Kind.RESOURCE, Ref.parse(k)) for k in affected.resources)
        requests.update(Request(Kind.TYPE, Ref("", k)) for k in affected.types)
        return requests

    # ------------------------------------------------------------------ namespaces

    def _namespace(self, body: Body, deleted: bool) -> set[Request]:
        """A Namespace's labels (read by grants' namespaceSelector); nothing else of it is kept."""
        md = body.get("metadata") or {}
        name = str(md.get("name") or "")
        if not name:
            return set()
        if deleted:
            return self._requests(self.registry.delete_namespace(name))
        labels = {str(k): str(v) for k, v in (md.get("labels") or {}).items()}
        return self._requests(self.registry.upsert_namespace(name, labels))

    # ------------------------------------------------------------------ owned objects

    def _ignore(self, ref: Ref, problem: str) -> None:
        if self.holds.ignored.get((ref.namespace, ref.name)) != problem:
            metrics.IGNORED_HOLDS.inc()
            log.warning("ignoring a Lease that poses as a work hold", lease=ref.key, why=problem)
        self.holds.ignored[(ref.namespace, ref.name)] = problem

    def _owned(
        self, endpoint: api.Endpoint, body: Body, deleted: bool, by: Request | None
    ) -> set[Request]:
        ref = Ref.of(body)
        if deleted:
            if self.store.delete(endpoint, body) is None:
                return set()
        elif self.store.put(endpoint, body) is body:
            return set()  # stale
        if endpoint is api.PODS:
            self.session_pods.file(ref.key, self.store.get(api.PODS, ref.key))
        if by is not None and not deleted:
            return set()  # the response to our own write
        agent = ((body.get("metadata") or {}).get("labels") or {}).get(builders.AGENT_LABEL)
        if not agent:
            return set()
        request = Request(Kind.AGENT, Ref(ref.namespace, agent))
        if endpoint is api.PODS or _acknowledgement(body):
            # A session pod or its acknowledgement changed: the holds an agent of that name that
            # is gone left wait for it, and so do the claimants of their URIs.
            return {request, *self._claimants_of_gone(request.ref.key)}
        if deleted and by is None and self._owned_by_viewed_agent(body, request):
            self.suspects.add(request)
        return {request}

    def _claimants_of_gone(self, key: str) -> set[Request]:
        """The claimants of the URIs held by an agent ``key`` that is no longer in view (or
        by an earlier agent of that name)."""
        viewed = self.store.get(api.AGENTS, key)
        uid = ((viewed or {}).get("metadata") or {}).get("uid")
        return {
            Request.agent(k)
            for hold in self.holds.named(key)
            if hold.holder_uid != uid
            for k in self.wanted.everywhere(hold.uri)
        }

    def _owned_by_viewed_agent(self, body: Body, request: Request) -> bool:
        """Whether ``body``'s controlling owner is the agent in view under ``request`` (by uid:
        an object of an earlier agent of the same name says nothing about this one)."""
        owner = builders.owner_of(body)
        viewed = self.store.get(api.AGENTS, request.ref.key)
        uid = ((viewed or {}).get("metadata") or {}).get("uid")
        return owner is not None and owner[0] == "AgentSpec" and bool(uid) and owner[2] == uid

    def _hold(self, body: Body, deleted: bool) -> set[Request]:
        """A hold changed: its holder, the URI's claimants and the Resources with that URI.

        A Lease that only poses as a hold (see :func:`hold_problem`), or a hold whose holder
        changed (Bindery never hands a hold over: it deletes and creates), is not filed: it is
        recorded as ignored, and the next claimant removes it.
        """
        previous = None
        if deleted:
            if self.store.delete(api.LEASES, body) is None:
                return set()
        else:
            previous = self.store.put(api.LEASES, body)
            if previous is body:
                return set()
        hold = Hold.from_lease(body)
        ref = Ref.of(body)
        problem = "" if deleted else hold_problem(body, hold, self.hold_namespace)
        if not problem and _handed_over(Hold.from_lease(previous), hold):
            # Someone rewrote the holder. The hold stays its first holder's, as filed, so that
            # holder withdraws the URI from its bindings before anyone else can acquire it.
            self._ignore(ref, f"its holder was changed to {hold.holder if hold else ''}")
            return set()
        if problem:
            self._ignore(ref, problem)
        else:
            self.holds.ignored.pop((ref.namespace, ref.name), None)
        if hold is None:
            return set()
        ns = ref.namespace
        self.holds.file(ns, hold, present=not deleted and not problem)
        requests = {Request.agent(hold.holder)}
        # Every claimant of the URI, whatever its namespace: a hold in the other location (a
        # scope switch) or in the cluster location counts for agents of other namespaces too.
        requests.update(Request.agent(k) for k in self.wanted.everywhere(hold.uri))
        holder_ns = hold.holder.rpartition("/")[0]
        requests.update(
            Request(Kind.RESOURCE, Ref.parse(r.meta.key))
            for where in {ns, holder_ns}
            for r in self.registry.resources_with_uri(where, hold.uri)
        )
        return requests
