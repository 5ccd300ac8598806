"""The session's workspace (spec.runtime.workspace), against the real control plane.

The local control plane's default StorageClass ``standard`` is kube-controller-manager's
host-path provisioner, so every claim here is really provisioned and Bound; the kwok node runs
the session pods. Every check reads the world: the claim, the StatefulSet, the pod, the status.
"""

from __future__ import annotations

import time
from typing import Any

import pytest

from tests.integration.kube import agent, apply, condition, get, must_get, settle, wait_status
from tests.integration.sessions_helpers import (
    apply_types,
    drifted,
    launched,
    pods,
    running_pod,
    runtime,
    session_name,
    uid,
)
from tests.support import Cluster, ControllerProcess, audit_mark, controller_writes, wait_for

pytestmark = pytest.mark.integration

NOTES = {"name": "notes", "tag": "axe-worklog", "uri": "axe-worklog://example/project/7"}


def _agent(name: str = "w", *, relaunch: int = 1, **workspace: Any) -> dict[str, Any]:
    spec = {"size": "1Gi", **workspace}
    return agent(name, resources=[NOTES], runtime=runtime(workspace=spec), relaunch=relaunch)


def claim_of(cluster: Cluster, namespace: str, name: str = "w") -> dict[str, Any] | None:
    return get(cluster, "persistentvolumeclaim", namespace, f"{name}-workspace")


def bound(obj: dict[str, Any]) -> bool:
    return ((obj.get("status") or {}).get("workspace") or {}).get("phase") == "Bound"


def _launched(cluster: Cluster, namespace: str, spec: dict[str, Any]) -> dict[str, Any]:
    apply_types(cluster)
    apply(cluster, namespace, spec)
    name = spec["metadata"]["name"]
    wait_status(cluster, "agentspec", namespace, name, launched(spec["spec"]["relaunchGeneration"]))
    running_pod(cluster, namespace, name)
    return wait_status(cluster, "agentspec", namespace, name, bound, what=f"{name}'s claim Bound")


def _mounts(sts: dict[str, Any]) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    pod = sts["spec"]["template"]["spec"]
    agent_container = next(c for c in pod["containers"] if c["name"] == "agent")
    return pod["volumes"], agent_container["volumeMounts"]


def test_the_session_gets_an_owned_claim_mounted_at_its_path(
    cluster: Cluster, namespace: str, controller: ControllerProcess
) -> None:
    obj = _launched(cluster, namespace, _agent(mountPath="/home/agent"))
    claim = must_get(cluster, "persistentvolumeclaim", namespace, "w-workspace")
    owners = claim["metadata"]["ownerReferences"]
    assert [(o["kind"], o["name"], o["uid"], o["controller"]) for o in owners] == [
        ("AgentSpec", "w", obj["metadata"]["uid"], True)
    ]
    assert claim["spec"]["storageClassName"] == "standard"  # the cluster's default
    assert claim["spec"]["resources"]["requests"]["storage"] == "1Gi"
    st = obj["status"]["workspace"]
    assert st == {
        "claimName": "w-workspace",
        "phase": "Bound",
        "capacity": "1Gi",
        "reclaimPolicy": "Delete",
    }
    volumes, mounts = _mounts(must_get(cluster, "statefulset", namespace, session_name("w")))
    assert {"name": "bindery-workspace", "persistentVolumeClaim": {"claimName": "w-workspace"}} in (
        volumes
    )
    assert {"name": "bindery-workspace", "mountPath": "/home/agent"} in mounts
    pod = running_pod(cluster, namespace, "w")
    assert any(
        (v.get("persistentVolumeClaim") or {}).get("claimName") == "w-workspace"
        for v in pod["spec"]["volumes"]
    )


def test_the_claim_survives_a_relaunch_and_its_size_is_no_trajectory(
    cluster: Cluster, namespace: str, controller: ControllerProcess
) -> None:
    _launched(cluster, namespace, _agent())
    before = must_get(cluster, "persistentvolumeclaim", namespace, "w-workspace")
    pod = running_pod(cluster, namespace, "w")

    apply(cluster, namespace, _agent(relaunch=2))
    wait_status(cluster, "agentspec", namespace, "w", launched(2), what="w relaunched")
    new = running_pod(cluster, namespace, "w", not_uid=uid(pod))
    after = must_get(cluster, "persistentvolumeclaim", namespace, "w-workspace")
    assert uid(after) == uid(before)
    assert after["spec"]["volumeName"] == before["spec"]["volumeName"]  # the same volume
    claims = [v.get("persistentVolumeClaim") for v in new["spec"]["volumes"]]
    assert {"claimName": "w-workspace"} in claims

    # Growing the size is the claim's business: no drift, no relaunch. The host-path class
    # cannot expand: status says so and the claim is not written.
    settle(cluster, namespace)
    mark = audit_mark(cluster)
    apply(cluster, namespace, _agent(relaunch=2, size="2Gi"))
    obj = wait_status(
        cluster,
        "agentspec",
        namespace,
        "w",
        lambda o: "allows volume expansion" in o["status"]["workspace"].get("message", ""),
        what="the refused growth reported",
    )
    assert condition(obj, "RelaunchRequired")["status"] == "False"
    assert [uid(p) for p in pods(cluster, namespace, "w")] == [uid(new)]
    grown = must_get(cluster, "persistentvolumeclaim", namespace, "w-workspace")
    assert grown["spec"]["resources"]["requests"]["storage"] == "1Gi"
    written = {w.resource for w in controller_writes(cluster, namespace, mark)}
    assert "persistentvolumeclaims" not in written
    assert "statefulsets" not in written

    # Moving the mount is a runtime change: drift, until a relaunch.
    apply(cluster, namespace, _agent(relaunch=2, size="2Gi", mountPath="/data"))
    wait_status(cluster, "agentspec", namespace, "w", drifted, what="w drifted")


def test_a_restarted_controller_adopts_the_claim_and_writes_nothing(
    cluster: Cluster, namespace: str, controller: ControllerProcess
) -> None:
    _launched(cluster, namespace, _agent())
    settle(cluster, namespace)
    claim = must_get(cluster, "persistentvolumeclaim", namespace, "w-workspace")

    controller.kill()
    mark = audit_mark(cluster)
    controller.start()
    time.sleep(4)
    assert controller_writes(cluster, namespace, mark) == []
    after = must_get(cluster, "persistentvolumeclaim", namespace, "w-workspace")
    assert after["metadata"]["resourceVersion"] == claim["metadata"]["resourceVersion"]
    assert bound(must_get(cluster, "agentspec", namespace, "w"))


def test_the_claim_is_deleted_with_the_agent(
    cluster: Cluster, namespace: str, controller: ControllerProcess
) -> None:
    _launched(cluster, namespace, _agent())
    cluster.kubectl("delete", "agentspec", "w", "-n", namespace, "--wait=false")
    wait_for(
        lambda: claim_of(cluster, namespace) is None,
        timeout=90,
        what="the claim garbage-collected with its agent",
    )


def test_a_retained_claim_has_no_owner_and_outlives_the_agent(
    cluster: Cluster, namespace: str, controller: ControllerProcess
) -> None:
    obj = _launched(cluster, namespace, _agent(reclaimPolicy="Retain"))
    claim = must_get(cluster, "persistentvolumeclaim", namespace, "w-workspace")
    assert "ownerReferences" not in claim["metadata"]
    st = obj["status"]["workspace"]
    assert st["reclaimPolicy"] == "Retain"
    assert "left when the agent is deleted" in st["message"]

    cluster.kubectl("delete", "agentspec", "w", "-n", namespace, "--wait=true", "--timeout=60s")
    wait_for(
        lambda: get(cluster, "statefulset", namespace, session_name("w")) is None,
        timeout=60,
        what="the session gone with its agent",
    )
    time.sleep(2)
    left = must_get(cluster, "persistentvolumeclaim", namespace, "w-workspace")
    assert uid(left) == uid(claim)
    assert not left["metadata"].get("deletionTimestamp")

    # An agent of the same name finds it again: the same claim, no second one.
    again = _launched(cluster, namespace, _agent(reclaimPolicy="Retain"))
    assert again["status"]["workspace"]["claimName"] == "w-workspace"
    assert uid(must_get(cluster, "persistentvolumeclaim", namespace, "w-workspace")) == uid(claim)


def test_a_foreign_claim_of_the_same_name_is_never_written_nor_mounted(
    cluster: Cluster, namespace: str, controller: ControllerProcess
) -> None:
    foreign = {
        "apiVersion": "v1",
        "kind": "PersistentVolumeClaim",
        "metadata": {"name": "w-workspace"},
        "spec": {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Gi"}}},
    }
    apply(cluster, namespace, foreign)
    before = must_get(cluster, "persistentvolumeclaim", namespace, "w-workspace")
    apply_types(cluster)
    apply(cluster, namespace, _agent())

    def refused(o: dict[str, Any]) -> bool:
        return condition(o, "Ready").get("reason") == "ForeignObject"

    obj = wait_status(cluster, "agentspec", namespace, "w", refused, what="the foreign claim")
    message = condition(obj, "Ready")["message"]
    assert "PersistentVolumeClaim" in message
    assert "w-workspace" in message
    assert condition(obj, "Stalled").get("status") == "True"
    settle(cluster, namespace)
    assert get(cluster, "statefulset", namespace, session_name("w")) is None
    after = must_get(cluster, "persistentvolumeclaim", namespace, "w-workspace")
    assert after["metadata"]["resourceVersion"] == before["metadata"]["resourceVersion"]
