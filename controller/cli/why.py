"""``bindery why AGENT`` (also ``kubectl bindery why AGENT``): why an agent is, or is not, Ready.

Reads the live objects the controller's decision depends on (every ResourceType, Resource and
ResourceGrant, the Tools and AgentSpecs of the agent's namespace, its Namespace's labels, its
work holds, its session StatefulSet and pod, and the events about it) and explains them with the
controller's own engine (:mod:`controller.domain.explain`). Read-only: it never writes to the API
server.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from kubernetes import config

from controller.cli import why_rollout
from controller.cli.exits import Exit
from controller.cli.parsers import add_why_parser
from controller.cli.why_text import render_text, to_json
from controller.domain.delivery import BINDINGS_FILE
from controller.domain.explain import Observed, explain
from controller.domain.names import ack_lease_name, bindings_config_map_name
from controller.domain.work import Hold, WorkScope
from controller.k8s.api import (
    AGENTS,
    CONFIG_MAPS,
    CORE_EVENTS,
    LEASES,
    NAMESPACES,
    PODS,
    RESOURCE_GRANTS,
    RESOURCE_TYPES,
    RESOURCES,
    STATEFUL_SETS,
    TOOLS,
    ApiError,
    Endpoint,
    ImpersonatingClient,
    Impersonation,
    KubeApi,
)
from controller.k8s.builders import (
    COMPONENT_LABEL,
    MANAGED_BY,
    MANAGER,
    has_delivery_sidecar,
    session_name,
    session_pod_of,
)
from controller.reconcile.index import hold_problem
from controller.runtime import logs
from controller.runtime.preflight import PreflightError, load_client


@dataclass(frozen=True)
class Scope:
    """The controller's work scope, as ``why`` is told it (the controller's own flags), or as
    it reads it from the holds."""

    work: WorkScope | None = None
    """None: inferred from the holds (see :func:`inferred`)."""
    hold_namespace: str = ""
    """Where cluster-scope holds live ("": accept a hold anywhere its holder's namespace is
    not, as the controller accepts them in its hold namespace)."""

    def inferred(self, holds: list[Hold]) -> Scope:
        """The scope, inferred when it was not given: the controller creates a hold outside
        its holder's namespace only in the cluster scope (in its hold namespace), so a hold
        there says the scope is ``cluster`` (until a switch back has moved every hold)."""
        if self.work is not None:
            return self
        away = sorted(h.namespace for h in holds if h.namespace != h.holder.rpartition("/")[0])
        if not away:
            return Scope(WorkScope.NAMESPACE, self.hold_namespace)
        return Scope(WorkScope.CLUSTER, self.hold_namespace or max(set(away), key=away.count))


async def _everywhere(kube: KubeApi, endpoint: Endpoint, namespace: str) -> list[dict[str, Any]]:
    """Every object of ``endpoint``: static slots, parameters and selectors may reach another
    namespace's Resource, by its grant. Only the agent's namespace when listing all is
    forbidden."""
    try:
        return await kube.list_all(endpoint)
    except ApiError as exc:
        if exc.status != 403:
            raise
        return await kube.list_all(endpoint, namespace)


async def _namespace_labels(kube: KubeApi, namespace: str) -> dict[str, str] | None:
    """The labels of the agent's Namespace; None when reading it is forbidden."""
    try:
        body = await kube.get(NAMESPACES, "", namespace)
    except ApiError as exc:
        if exc.status != 403:
            raise
        return None
    labels = ((body or {}).get("metadata") or {}).get("labels") or {}
    return {str(k): str(v) for k, v in labels.items()}


def _counts(body: dict[str, Any], hold: Hold | None, scope: Scope) -> bool:
    """Whether the controller counts this Lease as a hold (as its intake does)."""
    if hold is None:
        return False
    if scope.hold_namespace:
        return not hold_problem(body, hold, scope.hold_namespace)
    # The hold namespace was not given: a hold outside its holder's namespace is taken to be
    # in it (only the controller creates holds there).
    return not hold_problem(body, hold, hold.namespace)


async def _holds(kube: KubeApi, namespace: str, scope: Scope) -> list[Hold]:
    """The work holds that can concern an agent of ``namespace``: every hold the controller
    counts (its namespace's when listing all is forbidden)."""
    selector = f"{MANAGED_BY}={MANAGER},{COMPONENT_LABEL}=work-hold"
    leases = await _listed(kube, LEASES, namespace, selector)
    holds = []
    for body in leases:
        hold = Hold.from_lease(body)
        if hold is not None and _counts(body, hold, scope):
            holds.append(hold)
    return holds


async def _listed(
    kube: KubeApi, endpoint: Endpoint, namespace: str, selector: str = ""
) -> list[dict[str, Any]]:
    try:
        return await kube.list_all(endpoint, label_selector=selector)
    except ApiError as exc:
        if exc.status != 403:
            raise
        return await kube.list_all(endpoint, namespace, label_selector=selector)


async def _bindings(kube: KubeApi, namespace: str, name: str) -> str | None:
    """The document in the agent's bindings ConfigMap ("" without one; None when this user may
    not read ConfigMaps there)."""
    try:
        config_map = await kube.get(CONFIG_MAPS, namespace, bindings_config_map_name(name))
    except ApiError as exc:
        if exc.status != 403:
            raise
        return None
    data = (config_map or {}).get("data") or {}
    return str(data.get(BINDINGS_FILE, ""))


async def gather(
    kube: KubeApi, namespace: str, name: str, scope: Scope = Scope()
) -> Observed | None:
    """The live objects ``bindery why`` explains; None when the agent does not exist."""
    agent = await kube.get(AGENTS, namespace, name)
    if agent is None:
        return None
    agent.setdefault("apiVersion", "bindery.dev/v1alpha1")
    agent.setdefault("kind", "AgentSpec")
    session = session_name(name)
    holds = await _holds(kube, namespace, scope)
    scope = scope.inferred(holds)
    # The agent's line: its namespace's agents, or (cluster scope) every namespace's it can read.
    line = (
        _listed(kube, AGENTS, namespace)
        if scope.work is WorkScope.CLUSTER
        else kube.list_all(AGENTS, namespace)
    )
    types, resources, grants, tools, agents = await asyncio.gather(
        kube.list_all(RESOURCE_TYPES),
        _everywhere(kube, RESOURCES, namespace),
        _everywhere(kube, RESOURCE_GRANTS, namespace),
        kube.list_all(TOOLS, namespace),
        line,
    )
    workload = await kube.get(STATEFUL_SETS, namespace, session)
    pod = await kube.get(PODS, namespace, f"{session}-0")
    if pod is not None and not session_pod_of(pod, name):
        pod = None  # a pod by that name that the session's StatefulSet did not make
    ack_lease = await kube.get(LEASES, namespace, ack_lease_name(name))
    bindings = await _bindings(kube, namespace, name)
    labels = await _namespace_labels(kube, namespace)
    events = await kube.request(
        "GET",
        CORE_EVENTS.path(namespace),
        query=[("fieldSelector", f"involvedObject.name={name},involvedObject.kind=AgentSpec")],
    )
    me = (agent.get("metadata") or {}).get("uid")
    return Observed(
        agent=agent,
        types=types,
        resources=resources,
        tools=tools,
        agents=[a for a in agents if (a.get("metadata") or {}).get("uid") != me],
        holds=holds,
        session=workload,
        pod=pod,
        acknowledging=pod is not None and has_delivery_sidecar(pod),
        ack_lease=ack_lease,
        bindings=bindings,
        events=list(events.get("items") or []),
        grants=grants,
        namespace_labels=labels,
        scope=scope.work or WorkScope.NAMESPACE,
        hold_namespace=scope.hold_namespace,
        now=datetime.now(UTC),
    )


def impersonate(api: ImpersonatingClient, user: str | None, groups: Sequence[str] | None) -> None:
    """``--as``/``--as-group`` over the kubeconfig's ``as``/``as-groups`` (as kubectl does: the
    flags replace it); without flags, ``api`` keeps the kubeconfig user's own impersonation."""
    if user:
        api.impersonation = Impersonation(user=user, groups=tuple(groups or ()))
    elif groups:
        raise ValueError("--as-group needs --as (the user to impersonate)")


def _namespace(explicit: str | None) -> str:
    if explicit:
        return explicit
    try:
        _, active = config.list_kube_config_contexts()
    except (config.ConfigException, OSError):
        return "default"
    return str((active or {}).get("context", {}).get("namespace") or "default")


def run_why(args: argparse.Namespace) -> int:
    """``why AGENT``, or ``why KIND/NAME`` for an object agents depend on (its rollout)."""
    try:
        other = why_rollout.target(args.agent)
    except ValueError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return Exit.USAGE
    if other is None:
        return _why_agent(args)
    kind, name = other
    api = _client(args)
    if isinstance(api, int):
        return api
    return why_rollout.run(api, kind, _namespace(args.namespace), name, args.output)


def _client(args: argparse.Namespace) -> ImpersonatingClient | int:
    """The kubeconfig's client as ``--as``/``--as-group`` impersonate it, or the exit code of
    why it could not be made (the reason printed)."""
    try:
        api = load_client()
        impersonate(api, args.impersonate, args.impersonate_groups)
    except PreflightError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return exc.code
    except ValueError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return Exit.USAGE
    return api


def _why_agent(args: argparse.Namespace) -> int:
    namespace = _namespace(args.namespace)
    api = _client(args)
    if isinstance(api, int):
        return api
    given = WorkScope(args.work_scope) if args.work_scope else None
    scope = Scope(given, args.work_hold_namespace or "")

    async def main() -> Observed | None:
        kube = KubeApi(api, connections=8)
        try:
            return await gather(kube, namespace, args.agent, scope)
        finally:
            await kube.close()

    try:
        observed = asyncio.run(main())
    except ApiError as exc:
        print(f"error: reading the agent's objects failed: {exc}", file=sys.stderr)
        return Exit.FAILURE
    if observed is None:
        print(
            f"error: AgentSpec {namespace}/{args.agent} not found; list the agents with "
            f"'kubectl get agentspecs.bindery.dev -n {namespace}'",
            file=sys.stderr,
        )
        return Exit.FAILURE
    doc = explain(observed)
    sys.stdout.write(to_json(doc) if args.output == "json" else render_text(doc))
    return 0


def kubectl_main(argv: list[str] | None = None) -> int:
    """``kubectl-bindery``: kubectl runs it for ``kubectl bindery ...``."""
    logs.configure()
    parser = argparse.ArgumentParser(
        prog="kubectl bindery", description="Bindery's kubectl plugin."
    )
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    add_why_parser(sub, run_why)
    args = parser.parse_args(argv)
    return int(args.func(args))


if __name__ == "__main__":
    sys.exit(kubectl_main())
