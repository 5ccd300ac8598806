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
from typing import Any

from kubernetes import config

from controller.cli.exits import Exit
from controller.cli.parsers import add_why_parser
from controller.domain.explain import Observed, explain, render_text, to_json
from controller.domain.work import Hold
from controller.k8s.api import (
    AGENTS,
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
    KubeApi,
)
from controller.k8s.builders import (
    AGENT_LABEL,
    COMPONENT_LABEL,
    HOLDER_UID_ANNOTATION,
    MANAGED_BY,
    MANAGER,
    URI_ANNOTATION,
    session_name,
)
from controller.runtime import logs
from controller.runtime.preflight import PreflightError, load_client


def _hold(body: dict[str, Any]) -> Hold | None:
    md = body.get("metadata") or {}
    ann = md.get("annotations") or {}
    uri, holder_uid = ann.get(URI_ANNOTATION), ann.get(HOLDER_UID_ANNOTATION)
    holder = (body.get("spec") or {}).get("holderIdentity")
    if not uri or not holder_uid or not holder:
        return None
    return Hold(
        uri=uri,
        holder=holder,
        holder_uid=holder_uid,
        name=md.get("name", ""),
        resource_version=md.get("resourceVersion", ""),
        uid=md.get("uid", ""),
    )


async def _everywhere(kube: KubeApi, endpoint: Endpoint, namespace: str) -> list[dict[str, Any]]:
    """Every Resource (or ResourceGrant): static slots, parameters and selectors may reach
    another namespace's, by its grant. Only the agent's namespace when listing all is forbidden."""
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


async def _holds(kube: KubeApi, namespace: str) -> list[Hold]:
    """The work holds that can concern an agent of ``namespace``: those in its namespace, and
    those of the cluster-wide work scope (a hold in the controller's namespace whose holder is
    in another namespace); only the agent's namespace when listing all is forbidden."""
    selector = f"{MANAGED_BY}={MANAGER},{COMPONENT_LABEL}=work-hold"
    try:
        leases = await kube.list_all(LEASES, label_selector=selector)
    except ApiError as exc:
        if exc.status != 403:
            raise
        leases = await kube.list_all(LEASES, namespace, label_selector=selector)
    holds = []
    for body in leases:
        hold = _hold(body)
        where = (body.get("metadata") or {}).get("namespace", "")
        if hold is not None and (where == namespace or not hold.holder.startswith(f"{where}/")):
            holds.append(hold)
    return holds


async def gather(kube: KubeApi, namespace: str, name: str) -> Observed | None:
    """The live objects ``bindery why`` explains; None when the agent does not exist."""
    agent = await kube.get(AGENTS, namespace, name)
    if agent is None:
        return None
    agent.setdefault("apiVersion", "bindery.dev/v1alpha1")
    agent.setdefault("kind", "AgentSpec")
    session = session_name(name)
    types, resources, grants, tools, agents, pods = await asyncio.gather(
        kube.list_all(RESOURCE_TYPES),
        _everywhere(kube, RESOURCES, namespace),
        _everywhere(kube, RESOURCE_GRANTS, namespace),
        kube.list_all(TOOLS, namespace),
        kube.list_all(AGENTS, namespace),
        kube.list_all(PODS, namespace, label_selector=f"{AGENT_LABEL}={name}"),
    )
    holds = await _holds(kube, namespace)
    workload = await kube.get(STATEFUL_SETS, namespace, session)
    labels = await _namespace_labels(kube, namespace)
    events = await kube.request(
        "GET",
        CORE_EVENTS.path(namespace),
        query=[("fieldSelector", f"involvedObject.name={name},involvedObject.kind=AgentSpec")],
    )
    pod = next(
        (p for p in pods if (p.get("metadata") or {}).get("name", "").startswith(session)), None
    )
    return Observed(
        agent=agent,
        types=types,
        resources=resources,
        tools=tools,
        agents=[a for a in agents if (a.get("metadata") or {}).get("name") != name],
        holds=holds,
        session=workload,
        pod=pod,
        events=list(events.get("items") or []),
        grants=grants,
        namespace_labels=labels,
    )


def _namespace(explicit: str | None) -> str:
    if explicit:
        return explicit
    try:
        _, active = config.list_kube_config_contexts()
    except (config.ConfigException, OSError):
        return "default"
    return str((active or {}).get("context", {}).get("namespace") or "default")


def run_why(args: argparse.Namespace) -> int:
    namespace = _namespace(args.namespace)
    try:
        api = load_client()
    except PreflightError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return exc.code

    async def main() -> Observed | None:
        kube = KubeApi(api, connections=8)
        try:
            return await gather(kube, namespace, args.agent)
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
