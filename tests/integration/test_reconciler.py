"""The controller against the real API server: status, delivery, dependents, write economy."""

from __future__ import annotations

import time
from typing import Any

import pytest

from tests.integration.kube import (
    agent,
    apply,
    apply_examples,
    bindings_document,
    condition,
    get,
    must_get,
    ready,
    settle,
    state,
    wait_status,
)
from tests.support import Cluster, ControllerProcess, audit_mark, controller_writes, wait_for

pytestmark = pytest.mark.integration


def test_examples_reach_ready_and_bindings_are_delivered(
    cluster: Cluster, namespace: str, controller: ControllerProcess
) -> None:
    apply_examples(cluster, namespace)
    for name in ("dev", "reviewer"):
        obj = wait_status(cluster, "agentspec", namespace, name, ready, what=f"agent {name} Ready")
        assert obj["status"]["state"] == "Working"
        assert condition(obj, "Stalled")["status"] == "False"
    for name in ("apply-config", "comment-on-issue"):
        wait_status(cluster, "tool", namespace, name, ready)
    wait_status(cluster, "resourcetype", "", "fs-directory", ready)

    doc = bindings_document(cluster, namespace, "dev")
    assert doc is not None
    roles = {r["name"]: r["uri"] for r in doc["resources"]}
    assert roles["work"] == "github-issue://example/project/123"
    slots = {(t["name"], s["name"]): s for t in doc["tools"] for s in t["slots"]}
    assert slots["apply-config", "repo"]["resource"]["uri"] == "worktree://example/project/change"
    assert slots["apply-config", "output"]["state"] == "Deferred"
    assert slots["apply-config", "config"]["resource"]["name"] == "shared-config"

    cm = must_get(cluster, "configmap", namespace, "dev-bindings")
    owner = cm["metadata"]["ownerReferences"][0]
    assert (owner["kind"], owner["name"]) == ("AgentSpec", "dev")
    # `kubectl wait` reads the same condition Flux and Argo CD do.
    cluster.kubectl(
        "wait", "-n", namespace, "agentspec", "--all", "--for=condition=Ready", "--timeout=30s"
    )


def test_a_late_resource_type_repairs_the_agents_that_need_it(
    cluster: Cluster, namespace: str, controller: ControllerProcess
) -> None:
    late = f"late-{namespace}"
    apply(cluster, namespace, agent("a", resources=[{"name": "doc", "tag": late, "uri": "x://1"}]))
    broken = wait_status(cluster, "agentspec", namespace, "a", state("Pending"))
    assert late in condition(broken, "Ready")["message"]
    # A missing type is something a later apply brings: progress (kstatus InProgress), not Stalled.
    assert condition(broken, "Ready")["reason"] == "MissingDependency"
    assert condition(broken, "Reconciling")["status"] == "True"
    assert condition(broken, "Stalled")["status"] == "False"

    cluster.kubectl(
        "apply",
        "-f",
        "-",
        input=f"apiVersion: bindery.dev/v1alpha1\nkind: ResourceType\nmetadata:\n  name: {late}\n",
    )
    try:
        fixed = wait_status(cluster, "agentspec", namespace, "a", ready)
        assert fixed["status"]["state"] == "Idle"
        assert condition(fixed, "Stalled")["status"] == "False"
    finally:
        cluster.kubectl("delete", "resourcetype", late, "--wait=false")


def _resource(name: str, uri: str, team: str, alias: str = "") -> dict[str, Any]:
    spec: dict[str, Any] = {"type": "fs-directory", "uri": uri}
    if alias:
        spec["alias"] = alias
    return {
        "apiVersion": "bindery.dev/v1alpha1",
        "kind": "Resource",
        "metadata": {"name": name, "labels": {"team": team}},
        "spec": spec,
    }


def _lister_tool() -> dict[str, Any]:
    return {
        "apiVersion": "bindery.dev/v1alpha1",
        "kind": "Tool",
        "metadata": {"name": "lister"},
        "spec": {
            "resourceSlots": [
                {"name": "dir", "resourceType": "fs-directory", "access": "read_only"}
            ]
        },
    }


def test_editing_one_resource_updates_only_its_dependents(
    cluster: Cluster, namespace: str, controller: ControllerProcess
) -> None:
    apply_examples(cluster, namespace)
    apply(
        cluster,
        namespace,
        _resource("dir-red", "file:///red", "red"),
        _resource("dir-blue", "file:///blue", "blue"),
        _lister_tool(),
        agent("red", tools=[{"name": "lister"}], selector={"matchLabels": {"team": "red"}}),
        agent("blue", tools=[{"name": "lister"}], selector={"matchLabels": {"team": "blue"}}),
    )
    for name in ("red", "blue"):
        wait_status(cluster, "agentspec", namespace, name, ready)
    settle(cluster, namespace)
    blue_before = must_get(cluster, "configmap", namespace, "blue-bindings")
    mark = audit_mark(cluster)

    apply(cluster, namespace, _resource("dir-red", "file:///red", "red", alias="scratch"))

    def red_alias() -> bool:
        doc = bindings_document(cluster, namespace, "red") or {}
        slot = doc["tools"][0]["slots"][0]
        return bool(slot.get("resource", {}).get("alias") == "scratch")

    wait_for(red_alias, what="red's bindings to carry the new alias")
    settle(cluster, namespace)
    writes = controller_writes(cluster, namespace, mark)
    touched = {(w.resource, w.name) for w in writes}
    assert ("configmaps", "red-bindings") in touched
    assert not {name for _, name in touched} & {"blue", "blue-bindings", "dev", "dev-bindings"}
    blue_after = must_get(cluster, "configmap", namespace, "blue-bindings")
    assert blue_after["metadata"]["resourceVersion"] == blue_before["metadata"]["resourceVersion"]


def test_metadata_only_changes_write_nothing(
    cluster: Cluster, namespace: str, controller: ControllerProcess
) -> None:
    apply_examples(cluster, namespace)
    for name in ("dev", "reviewer"):
        wait_status(cluster, "agentspec", namespace, name, ready)
    settle(cluster, namespace)
    mark = audit_mark(cluster)
    for kind, name in (
        ("agentspec", "dev"),
        ("tool", "apply-config"),
        ("resource", "shared-config"),
    ):
        cluster.kubectl("label", "-n", namespace, kind, name, "touched=yes")
        cluster.kubectl("annotate", "-n", namespace, kind, name, "note=hello")
    time.sleep(3)
    assert controller_writes(cluster, namespace, mark) == []


def test_an_idle_controller_writes_nothing_and_a_restart_adopts_everything(
    cluster: Cluster, namespace: str, controller: ControllerProcess
) -> None:
    apply_examples(cluster, namespace)
    for name in ("dev", "reviewer"):
        wait_status(cluster, "agentspec", namespace, name, ready)
    settle(cluster, namespace)
    mark = audit_mark(cluster)
    time.sleep(3)
    assert controller_writes(cluster, namespace, mark) == []

    controller.stop()
    controller.start()
    time.sleep(4)
    assert controller_writes(cluster, namespace, mark) == []


def test_deleting_an_agent_cleans_up_what_it_owns(
    cluster: Cluster, namespace: str, controller: ControllerProcess
) -> None:
    apply_examples(cluster, namespace)
    wait_status(cluster, "agentspec", namespace, "dev", ready)
    assert get(cluster, "configmap", namespace, "dev-bindings") is not None
    cluster.kubectl("delete", "-n", namespace, "agentspec", "dev", "--timeout=30s")
    wait_for(
        lambda: get(cluster, "configmap", namespace, "dev-bindings") is None,
        timeout=60,
        what="the garbage collector to remove dev-bindings",
    )
    leases = cluster.kubectl("get", "lease", "-n", namespace, "-o", "name").stdout.split()
    assert len(leases) == 1, leases  # only the reviewer's hold remains


def test_a_broken_tool_is_reported_and_repaired(
    cluster: Cluster, namespace: str, controller: ControllerProcess
) -> None:
    apply_examples(cluster, namespace)
    tool = {
        "apiVersion": "bindery.dev/v1alpha1",
        "kind": "Tool",
        "metadata": {"name": "pinned"},
        "spec": {
            "resourceSlots": [
                {
                    "name": "cfg",
                    "resourceType": "fs-directory",
                    "access": "read_only",
                    "binding": "static",
                    "staticResource": "missing-dir",
                }
            ]
        },
    }
    apply(cluster, namespace, tool, agent("user", tools=[{"name": "pinned"}]))
    bad_tool = wait_status(
        cluster,
        "tool",
        namespace,
        "pinned",
        lambda o: condition(o, "Ready").get("reason") == "MissingDependency",
    )
    assert condition(bad_tool, "Reconciling")["status"] == "True"
    assert "missing-dir" in condition(bad_tool, "Ready")["message"]
    assert bad_tool["status"]["staticSlotsValid"] is False
    bad_agent = wait_status(cluster, "agentspec", namespace, "user", state("Pending"))
    assert "missing-dir" in condition(bad_agent, "Ready")["message"]
    events = cluster.kubectl(
        "get",
        "events",
        "-n",
        namespace,
        "--field-selector",
        "involvedObject.name=user",
        "-o",
        "jsonpath={.items[*].reason}",
    ).stdout.split()
    assert "MissingDependency" in events  # the Ready reason it is not Ready for

    apply(cluster, namespace, _resource("missing-dir", "file:///now-here", "none"))
    wait_status(cluster, "tool", namespace, "pinned", ready)
    fixed = wait_status(cluster, "agentspec", namespace, "user", ready)
    slot = next(b for b in fixed["status"]["bindings"] if b.get("slot") == "cfg")
    assert slot["resource"]["uri"] == "file:///now-here"
