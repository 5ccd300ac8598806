"""The objects of the end-to-end benchmark: a registry of Resources and Tools, and agents.

At ``--scale 1`` a namespace holds 5,000 Resources (1,000 repositories, 1,000 documents, one
issue per team of 50 agents, 5 configurations, the rest unrelated "filler" of another type with
labels nobody selects), 10 Tools and 1,000 AgentSpecs. Every agent has:

* 3 direct bindings: ``repo`` and ``docs`` (URIs of registered Resources, so each is checked
  against the Resource's type) and ``notes`` (an unregistered URI);
* 2 tools: ``tool-a-K`` (a contextual slot asking for a parent type of the repo's type, a static
  slot naming a configuration Resource, a parameter slot given a value by half of the agents)
  and ``tool-b-K`` (a contextual slot filled by the team's issue, which the agent's
  ``resourceSelector`` selects, and an optional contextual slot filled by the ``docs`` binding);
* a ``resourceSelector`` for its team's label, so each team issue has 50 dependents.

No agent has a ``work`` binding or a ``runtime``: they are Idle agents with a bindings ConfigMap
(holds and sessions are other benchmarks' subjects). The latency anchor's Deployments, and the
predicates the benchmark's watches wait for, are here too.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

GROUP = "bindery.dev"
VERSION = "v1alpha1"
API_VERSION = f"{GROUP}/{VERSION}"
TEAM_SIZE = 50
TOOL_PAIRS = 5

Body = dict[str, Any]


def path(plural: str, namespace: str = "", name: str = "", sub: str = "") -> str:
    core = plural in ("configmaps", "namespaces", "events")
    base = "/api/v1" if core else f"/apis/{GROUP}/{VERSION}"
    if namespace:
        base += f"/namespaces/{namespace}"
    base += f"/{plural}"
    if name:
        base += f"/{name}"
    if sub:
        base += f"/{sub}"
    return base


@dataclass(frozen=True)
class Shape:
    agents: int
    resources: int

    @property
    def repos(self) -> int:
        return max(1, min(self.agents, self.resources // 5))

    @property
    def teams(self) -> int:
        return max(1, self.agents // TEAM_SIZE)

    @classmethod
    def at(cls, scale: float) -> Shape:
        return cls(
            agents=max(TEAM_SIZE, round(1000 * scale)), resources=max(100, round(5000 * scale))
        )


def resource_types() -> list[Body]:
    def rt(name: str, parents: list[str] | None = None) -> Body:
        return {
            "apiVersion": API_VERSION,
            "kind": "ResourceType",
            "metadata": {"name": name},
            "spec": {"description": f"benchmark type {name}", "parentTypes": parents or []},
        }

    return [
        rt("bench-source"),
        rt("bench-repo", ["bench-source"]),
        rt("bench-doc"),
        rt("bench-issue"),
        rt("bench-config"),
        rt("bench-notes"),
        rt("bench-filler", ["bench-doc"]),
    ]


def _resource(
    ns: str, name: str, rtype: str, uri: str, *, labels: dict[str, str], alias: str = ""
) -> Body:
    spec: Body = {"type": rtype, "uri": uri, "attributes": {"owner": "bench"}}
    if alias:
        spec["alias"] = alias
    return {
        "apiVersion": API_VERSION,
        "kind": "Resource",
        "metadata": {"name": name, "namespace": ns, "labels": labels},
        "spec": spec,
    }


def team_issue_name(team: int) -> str:
    return f"team-{team}-issue"


def team_issue_uri(team: int) -> str:
    return f"issue://bench/team-{team}"


def team_issue(ns: str, team: int, alias: str = "issue-v0") -> Body:
    return _resource(
        ns,
        team_issue_name(team),
        "bench-issue",
        team_issue_uri(team),
        labels={"team": f"t{team}"},
        alias=alias,
    )


def resources(ns: str, shape: Shape) -> list[Body]:
    out = [team_issue(ns, t) for t in range(shape.teams)]
    out += [
        _resource(
            ns, f"config-{k}", "bench-config", f"cfg://bench/config-{k}", labels={"kind": "config"}
        )
        for k in range(TOOL_PAIRS)
    ]
    for i in range(shape.repos):
        out.append(
            _resource(
                ns, f"repo-{i}", "bench-repo", f"git://bench/repo-{i}", labels={"kind": "repo"}
            )
        )
        out.append(
            _resource(ns, f"doc-{i}", "bench-doc", f"doc://bench/doc-{i}", labels={"kind": "doc"})
        )
    j = 0
    while len(out) < shape.resources:
        labels = {"team": f"none-{j % 50}", "group": f"g{j % 100}"}
        out.append(
            _resource(ns, f"filler-{j}", "bench-filler", f"filler://bench/{j}", labels=labels)
        )
        j += 1
    return out


def tools(ns: str) -> list[Body]:
    def tool(name: str, slots: list[Body]) -> Body:
        return {
            "apiVersion": API_VERSION,
            "kind": "Tool",
            "metadata": {"name": name, "namespace": ns},
            "spec": {"description": f"benchmark tool {name}", "resourceSlots": slots},
        }

    out = []
    for k in range(TOOL_PAIRS):
        out.append(
            tool(
                f"tool-a-{k}",
                [
                    {"name": "repo", "resourceType": "bench-source", "access": "read_write"},
                    {
                        "name": "config",
                        "resourceType": "bench-config",
                        "access": "read_only",
                        "binding": "static",
                        "staticResource": f"config-{k}",
                    },
                    {
                        "name": "out",
                        "resourceType": "bench-doc",
                        "access": "write_only",
                        "binding": "parameter",
                    },
                ],
            )
        )
        out.append(
            tool(
                f"tool-b-{k}",
                [
                    {"name": "issue", "resourceType": "bench-issue", "access": "read_write"},
                    {
                        "name": "docs",
                        "resourceType": "bench-doc",
                        "access": "read_only",
                        "required": False,
                    },
                ],
            )
        )
    return out


def team_of(i: int, shape: Shape) -> int:
    return (i // TEAM_SIZE) % shape.teams


def agent_name(i: int) -> str:
    return f"agent-{i}"


def notes_uri(i: int, version: int) -> str:
    return f"notes://bench/agent-{i}/v{version}"


def agent(ns: str, i: int, shape: Shape) -> Body:
    k = i % TOOL_PAIRS
    repo = i % shape.repos
    tool_a: Body = {"name": f"tool-a-{k}"}
    if i % 2 == 0:
        tool_a["params"] = {"out": f"doc-{(i + 1) % shape.repos}"}
    return {
        "apiVersion": API_VERSION,
        "kind": "AgentSpec",
        "metadata": {"name": agent_name(i), "namespace": ns, "labels": {"bench": "e2e"}},
        "spec": {
            "resources": [
                {"name": "repo", "tag": "bench-repo", "uri": f"git://bench/repo-{repo}"},
                {"name": "docs", "tag": "bench-doc", "uri": f"doc://bench/doc-{repo}"},
                {"name": "notes", "tag": "bench-notes", "uri": notes_uri(i, 0)},
            ],
            "tools": [tool_a, {"name": f"tool-b-{k}"}],
            "resourceSelector": {"matchLabels": {"team": f"t{team_of(i, shape)}"}},
        },
    }


def agents(ns: str, shape: Shape, start: int = 0, stop: int | None = None) -> list[Body]:
    return [agent(ns, i, shape) for i in range(start, shape.agents if stop is None else stop)]


def team_members(team: int, shape: Shape) -> list[str]:
    """The agents whose selector picks the team's issue: its dependents."""
    return [agent_name(i) for i in range(shape.agents) if team_of(i, shape) == team]


def namespace(name: str) -> Body:
    return {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}}


# ------------------------------------------------------------------------ the latency anchor

ANCHOR_ANNOTATION = "bench.bindery.dev/revision"


def deployments_path(namespace: str) -> str:
    return f"/apis/apps/v1/namespaces/{namespace}/deployments"


def anchor_name(k: int) -> str:
    return f"anchor-{k}"


def anchor_deployment(namespace: str, k: int, replicas: int) -> Body:
    """A Deployment for the latency anchor; its template changes by an annotation."""
    labels = {"app": anchor_name(k)}
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": anchor_name(k), "namespace": namespace},
        "spec": {
            "replicas": replicas,
            "selector": {"matchLabels": labels},
            "template": {
                "metadata": {"labels": labels, "annotations": {ANCHOR_ANNOTATION: "0"}},
                "spec": {"containers": [{"name": "c", "image": "registry.k8s.io/pause:3.10"}]},
            },
        },
    }


# ------------------------------------------------------------------------ predicates on status


def _conditions(body: Body) -> list[Body]:
    return list(((body.get("status") or {}).get("conditions")) or [])


def ready_current(body: Body) -> bool:
    """Ready=True and status.observedGeneration == metadata.generation."""
    st = body.get("status") or {}
    gen = (body.get("metadata") or {}).get("generation")
    return st.get("observedGeneration") == gen and any(
        c.get("type") == "Ready" and c.get("status") == "True" for c in _conditions(body)
    )


def current(body: Body) -> bool:
    """status.observedGeneration == metadata.generation (whatever the conditions say)."""
    st = body.get("status") or {}
    return st.get("observedGeneration") == (body.get("metadata") or {}).get("generation")


def current_at(body: Body, *, gen: int) -> bool:
    return current(body) and body["metadata"]["generation"] == gen


def observed_at_least(body: Body, *, gen: int) -> bool:
    observed = (body.get("status") or {}).get("observedGeneration")
    return isinstance(observed, int) and observed >= gen


def status_has_uri(body: Body, uri: str) -> bool:
    return current(body) and any(
        row.get("uri") == uri for row in (body.get("status") or {}).get("bindings") or []
    )


def status_has_alias(body: Body, uri: str, alias: str) -> bool:
    return any(
        (row.get("resource") or {}).get("uri") == uri
        and (row.get("resource") or {}).get("alias") == alias
        for row in (body.get("status") or {}).get("bindings") or []
    )


def cm_contains(needle: str) -> Callable[[Body], bool]:
    """A bindings ConfigMap whose ``bindings.json`` contains ``needle``."""

    def pred(cm: Body) -> bool:
        return needle in ((cm.get("data") or {}).get("bindings.json") or "")

    return pred
