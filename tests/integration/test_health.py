"""The status semantics table on the real API server: for each row, the conditions the real
controller writes on a live object, what kstatus (sigs.k8s.io/cli-utils) computes for it, and the
health the shipped Argo CD script gives it; plus the REASON and MESSAGE printer columns.

Rows that need a running session (starting, refused by policy) and the invalid-spec row (the CRD
schema refuses every spec the controller's models would) are checked on the builders' statuses:
``test_kstatus_of_every_row`` runs the real kstatus on every row of the table.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pytest

from tests.argocd_health import argo_health
from tests.health_rows import KIND_PLURALS, rows
from tests.integration.kstatus import kstatus, kstatus_of
from tests.integration.kube import (
    AGENT_COLUMNS,
    agent,
    apply,
    condition,
    must_get,
    wait_status,
    work,
)
from tests.support import Cluster, ControllerProcess, wait_for

pytestmark = pytest.mark.integration

API_VERSION = "bindery.dev/v1alpha1"


def test_kstatus_of_every_row() -> None:
    table = rows()
    results = kstatus_of([row.object() for row in table])
    got = {row.id: result["status"] for row, result in zip(table, results, strict=True)}
    assert got == {row.id: row.kstatus for row in table}


def _obj(kind: str, name: str, spec: dict[str, Any]) -> dict[str, Any]:
    return {"apiVersion": API_VERSION, "kind": kind, "metadata": {"name": name}, "spec": spec}


def _static_tool(name: str, resource_type: str, static_resource: str) -> dict[str, Any]:
    slot = {
        "name": "cfg",
        "resourceType": resource_type,
        "access": "read_only",
        "binding": "static",
        "staticResource": static_resource,
    }
    return _obj("Tool", name, {"resourceSlots": [slot]})


@dataclass(frozen=True)
class Live:
    kind: str
    name: str
    reason: str
    kstatus: str
    argo: str


@pytest.fixture
def types(cluster: Cluster, namespace: str) -> Iterator[dict[str, str]]:
    """Cluster-scoped ResourceTypes named after the test's namespace, deleted afterwards."""
    names = {key: f"{key}-{namespace}" for key in ("doc", "issue", "cycle-a", "cycle-b", "orphan")}
    yield names
    cluster.kubectl("delete", "resourcetype", *names.values(), "--wait=false", check=False)


def test_each_row_on_live_objects(
    cluster: Cluster, namespace: str, controller: ControllerProcess, types: dict[str, str]
) -> None:
    doc, issue = types["doc"], types["issue"]
    ghost = f"ghost-{namespace}"
    apply(  # cluster-scoped: the namespace does not apply to them
        cluster,
        namespace,
        _obj("ResourceType", doc, {"uriSchemes": ["file"]}),
        _obj("ResourceType", issue, {}),
        _obj("ResourceType", types["cycle-a"], {"parentTypes": [types["cycle-b"]]}),
        _obj("ResourceType", types["cycle-b"], {"parentTypes": [types["cycle-a"]]}),
        _obj("ResourceType", types["orphan"], {"parentTypes": [ghost]}),
    )
    apply(
        cluster,
        namespace,
        _obj("Resource", "doc", {"type": doc, "uri": "file:///doc"}),
        _obj("Resource", "bad-scheme", {"type": doc, "uri": "http://example/doc"}),
        _obj("Resource", "untyped", {"type": ghost, "uri": "file:///untyped"}),
        _obj("Tool", "plain", {}),
        _obj("ResourceGrant", "share", {"from": [{"namespace": "x"}], "to": [{"name": "doc"}]}),
        _static_tool("pinned-to-nothing", doc, "nowhere"),
        _static_tool("pinned-to-wrong-type", issue, "doc"),
        agent("plain"),
        agent("needs-tool", tools=[{"name": "not-yet"}]),
        agent("incompatible", resources=[{"name": "spec", "tag": issue, "uri": "file:///doc"}]),
        agent("holder", resources=[work("issue://1", tag=issue)]),
    )
    wait_status(
        cluster, "agentspec", namespace, "holder", lambda o: o["status"].get("state") == "Working"
    )
    apply(cluster, namespace, agent("waiter", resources=[work("issue://1", tag=issue)]))

    table = [
        Live("ResourceType", doc, "Valid", "Current", "Healthy"),
        Live("ResourceType", types["orphan"], "UnknownParentType", "InProgress", "Progressing"),
        Live("ResourceType", types["cycle-a"], "ParentCycle", "Failed", "Degraded"),
        Live("Resource", "doc", "Valid", "Current", "Healthy"),
        Live("Resource", "untyped", "MissingDependency", "InProgress", "Progressing"),
        Live("Resource", "bad-scheme", "InvalidResource", "Failed", "Degraded"),
        Live("Tool", "plain", "Valid", "Current", "Healthy"),
        Live("Tool", "pinned-to-nothing", "MissingDependency", "InProgress", "Progressing"),
        Live("Tool", "pinned-to-wrong-type", "InvalidStaticSlot", "Failed", "Degraded"),
        Live("AgentSpec", "plain", "BindingsDelivered", "Current", "Healthy"),
        Live("AgentSpec", "needs-tool", "MissingDependency", "InProgress", "Progressing"),
        Live("AgentSpec", "incompatible", "BindingError", "Failed", "Degraded"),
        Live("AgentSpec", "waiter", "WaitingForWork", "InProgress", "Progressing"),
        Live("ResourceGrant", "share", "Observed", "Current", "Healthy"),
    ]
    seen = {}
    for row in table:
        ns = "" if row.kind == "ResourceType" else namespace
        plural = KIND_PLURALS[row.kind]

        def settled(o: dict[str, Any], reason: str = row.reason) -> bool:
            observed = (o.get("status") or {}).get("observedGeneration")
            return observed == o["metadata"]["generation"] and (
                condition(o, "Ready").get("reason") == reason
            )

        obj = wait_status(cluster, plural, ns, row.name, settled, what=f"{row}")
        got = (kstatus(cluster, plural, ns, row.name)["status"], argo_health(obj)["status"])
        seen[row.kind, row.name] = got
        assert got == (row.kstatus, row.argo), f"{row}: Ready {condition(obj, 'Ready')}"
        stalled = condition(obj, "Stalled").get("status") == "True"
        reconciling = condition(obj, "Reconciling").get("status") == "True"
        assert (stalled, reconciling) == (row.kstatus == "Failed", row.kstatus == "InProgress")

    # What GitOps ordering needs: the Tool applied a moment late clears the agent's error.
    apply(cluster, namespace, _obj("Tool", "not-yet", {}))
    fixed = wait_status(
        cluster, "agentspecs", namespace, "needs-tool", lambda o: _ready_reason(o) == "True"
    )
    assert kstatus(cluster, "agentspecs", namespace, "needs-tool")["status"] == "Current"
    assert argo_health(fixed)["status"] == "Healthy"


def _ready_reason(obj: dict[str, Any]) -> str:
    observed = (obj.get("status") or {}).get("observedGeneration")
    if observed != obj["metadata"]["generation"]:
        return ""
    return str(condition(obj, "Ready").get("status", ""))


def test_an_object_the_controller_has_not_seen_is_never_current(
    cluster: Cluster, crds: list[str], namespace: str
) -> None:
    """No controller runs here: every new object reads as InProgress / Progressing."""
    rtype = f"unseen-{namespace}"
    apply(cluster, namespace, _obj("ResourceType", rtype, {}))
    try:
        apply(
            cluster,
            namespace,
            _obj("Resource", "r", {"type": rtype, "uri": "file:///r"}),
            _obj("Tool", "t", {}),
            agent("a"),
        )
        for plural, ns, name in (
            ("resourcetypes", "", rtype),
            ("resources", namespace, "r"),
            ("tools", namespace, "t"),
            ("agentspecs", namespace, "a"),
        ):
            obj = must_get(cluster, plural, ns, name)
            assert obj["status"] == {"observedGeneration": -1}, plural
            result = kstatus(cluster, plural, ns, name)
            assert result["status"] == "InProgress", result
            assert "observed generation is -1" in result["message"]
            assert argo_health(obj)["status"] == "Progressing"
    finally:
        cluster.kubectl("delete", "resourcetype", rtype, "--wait=false", check=False)


def test_printer_columns_show_why_an_agent_is_not_ready(
    cluster: Cluster, namespace: str, controller: ControllerProcess
) -> None:
    apply(
        cluster,
        namespace,
        agent("needs-tool", tools=[{"name": "not-yet"}]),
        _static_tool("pinned", "no-such-type", "nowhere"),
    )
    wait_status(
        cluster,
        "agentspecs",
        namespace,
        "needs-tool",
        lambda o: condition(o, "Ready").get("reason") == "MissingDependency",
    )
    plain = cluster.kubectl("get", "agentspecs", "-n", namespace).stdout.splitlines()
    assert plain[0].split() == AGENT_COLUMNS
    assert plain[1].split()[:5] == ["needs-tool", "Pending", "true", "False", "MissingDependency"]
    wide = cluster.kubectl("get", "agentspecs", "-n", namespace, "-o", "wide").stdout.splitlines()
    header = wide[0].split()
    assert header[header.index("REASON") + 1] == "MESSAGE"
    assert "tool 'not-yet' is not registered" in wide[1]
    tool = wait_status(cluster, "tools", namespace, "pinned", lambda o: bool(condition(o, "Ready")))
    tools = cluster.kubectl("get", "tools", "-n", namespace, "-o", "wide").stdout.splitlines()
    assert tools[0].split()[:6] == ["NAME", "SLOTS", "STATIC-VALID", "READY", "REASON", "MESSAGE"]
    assert tools[1].split()[:5] == ["pinned", "1", "false", "False", "MissingDependency"]
    assert condition(tool, "Ready")["message"][:40] in tools[1]


def _event_types(cluster: Cluster, namespace: str, name: str, reason: str) -> list[str]:
    return cluster.kubectl(
        "get", "events", "-n", namespace, "--field-selector",
        f"involvedObject.name={name},reason={reason}", "-o", "jsonpath={.items[*].type}",
    ).stdout.split()  # fmt: skip


def _row(cluster: Cluster, kind: str, namespace: str, name: str) -> list[str]:
    return cluster.kubectl("get", kind, name, "-n", namespace).stdout.splitlines()[1].split()


def test_waiting_reads_pending_and_normal_while_failing_reads_error_and_warning(
    cluster: Cluster, namespace: str, controller: ControllerProcess
) -> None:
    """STATE and the event's type tell "wait" from "fix me" as kstatus does; a Tool whose
    contextual slot asks for a type nobody registered waits for it, and is Ready once it is."""
    late, kind, other = (f"{x}-{namespace}" for x in ("late", "kind", "other"))
    types = [_obj("ResourceType", t, {}) for t in (kind, other)]
    cluster.kubectl(
        "apply", "--server-side", "-f", "-",
        input="\n---\n".join(json.dumps(t) for t in types),
    )  # fmt: skip
    try:
        apply(
            cluster,
            namespace,
            _obj("Tool", "lint", {"resourceSlots": [{"name": "repo", "resourceType": late}]}),
            _obj("Resource", "doc", {"type": kind, "uri": "x://doc"}),
            agent("waits", tools=[{"name": "not-yet"}]),
            # The registered Resource with this URI is of a type the tag does not accept.
            agent("fails", resources=[{"name": "doc", "tag": other, "uri": "x://doc"}]),
        )
        tool = wait_status(
            cluster, "tools", namespace, "lint",
            lambda o: condition(o, "Ready").get("reason") == "MissingDependency",
        )  # fmt: skip
        assert condition(tool, "Reconciling")["status"] == "True"
        assert condition(tool, "Stalled")["status"] == "False"
        assert (
            f"its resourceType {late!r} is not a registered ResourceType"
            in (condition(tool, "Ready")["message"])
        )
        assert _row(cluster, "tools", namespace, "lint")[:4] == [
            "lint", "1", "False", "MissingDependency",
        ]  # fmt: skip

        wait_status(cluster, "agentspecs", namespace, "waits", lambda o: bool(o.get("status")))
        failing = wait_status(
            cluster, "agentspecs", namespace, "fails",
            lambda o: condition(o, "Stalled").get("status") == "True",
        )  # fmt: skip
        reason = condition(failing, "Ready")["reason"]
        assert _row(cluster, "agentspecs", namespace, "waits")[1] == "Pending"
        assert _row(cluster, "agentspecs", namespace, "fails")[1] == "Error"
        assert wait_for(
            lambda: _event_types(cluster, namespace, "waits", "MissingDependency") or None,
            what="the waiting agent's event",
        ) == ["Normal"]
        assert wait_for(
            lambda: _event_types(cluster, namespace, "fails", reason) or None,
            what="the failing agent's event",
        ) == ["Warning"]

        cluster.kubectl(
            "apply", "--server-side", "-f", "-",
            input=json.dumps(_obj("ResourceType", late, {})),
        )  # fmt: skip
        ready = wait_status(
            cluster, "tools", namespace, "lint",
            lambda o: condition(o, "Ready").get("status") == "True",
        )  # fmt: skip
        assert condition(ready, "Ready")["reason"] == "Valid"
    finally:
        cluster.kubectl(
            "delete", "resourcetype", late, kind, other, "--ignore-not-found", check=False
        )
