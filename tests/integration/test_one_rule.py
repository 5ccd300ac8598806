"""One rule for every pass, on the real API server: what wedged one agent before (a time in its
status that held its timeouts off for ever, a session reason the status schema refuses, a status
the cluster's admission refuses) now leaves that agent with a truthful status, and the other
agents of the namespace converge all the same.
"""

from __future__ import annotations

import json
import re
from datetime import UTC, datetime
from typing import Any

import pytest
import yaml

from tests.integration.kube import agent, apply, condition, get, must_get, ready, wait_status
from tests.integration.sessions_helpers import apply_types, running_pod, runtime
from tests.support import Cluster, ControllerProcess, wait_for

pytestmark = pytest.mark.integration

NOTES = {"name": "notes", "tag": "axe-worklog", "uri": "axe-worklog://example/project/9"}
REASON = re.compile(r"^[A-Za-z]([A-Za-z0-9_,:]*[A-Za-z0-9_])?$")
"""The CRDs' pattern for a condition reason."""


def _patch_status(cluster: Cluster, namespace: str, name: str, status: dict[str, Any]) -> None:
    """Write into an agent's status as anyone allowed the status subresource can."""
    cluster.kubectl(
        "patch", "agentspec", name, "-n", namespace, "--subresource=status", "--type=merge",
        "-p", json.dumps({"status": status}),
    )  # fmt: skip


def test_a_time_in_status_the_pass_cannot_count_from_is_counted_from_now(
    cluster: Cluster, namespace: str, controller: ControllerProcess
) -> None:
    apply(cluster, namespace, agent("a"))
    before = wait_status(cluster, "agentspec", namespace, "a", ready)
    digest = before["status"]["delivery"]["digest"]

    # The API's date-time format refuses what Python cannot read (no offset, no such day).
    refused = cluster.kubectl(
        "patch", "agentspec", "a", "-n", namespace, "--subresource=status", "--type=merge",
        "-p", json.dumps({"status": {"delivery": {"writtenAt": "2026-01-01T00:00:00"}}}),
        check=False,
    )  # fmt: skip
    assert refused.returncode != 0
    assert "date-time" in refused.stderr

    # In the future: every timeout counted from it (acknowledgement, release grace) was held
    # off for ever. It is counted from now instead, and said so in status.
    _patch_status(cluster, namespace, "a", {"delivery": {"writtenAt": "9999-01-01T00:00:00Z"}})

    def counted_from_now(obj: dict[str, Any]) -> bool:
        stamp = ((obj.get("status") or {}).get("delivery") or {}).get("writtenAt", "")
        return bool(stamp) and not stamp.startswith("9999")

    fixed = wait_status(cluster, "agentspec", namespace, "a", counted_from_now)
    assert fixed["status"]["delivery"]["digest"] == digest
    written = datetime.fromisoformat(
        fixed["status"]["delivery"]["writtenAt"].replace("Z", "+00:00")
    )
    assert abs((datetime.now(UTC) - written).total_seconds()) < 120

    apply(cluster, namespace, agent("b"))
    wait_status(cluster, "agentspec", namespace, "b", ready)


def test_a_session_reason_the_status_schema_would_refuse_is_reported(
    cluster: Cluster, namespace: str, controller: ControllerProcess
) -> None:
    """A pod's reasons are anyone's words who may write pod status (a runtime, a scheduler): one
    with spaces made every status write of its agent fail (422), so status went on saying the
    session ran."""
    apply_types(cluster)
    apply(cluster, namespace, agent("s", resources=[NOTES], runtime=runtime()))
    wait_status(cluster, "agentspec", namespace, "s", ready)
    pod = running_pod(cluster, namespace, "s")
    current = must_get(cluster, "pod", namespace, pod["metadata"]["name"])
    conditions = [
        {**c, "status": "False"} if c["type"] in ("Ready", "ContainersReady") else c
        for c in current["status"]["conditions"]
    ]
    crashed = {"terminated": {"exitCode": 3, "reason": "exit code 3 (custom runtime)"}}
    containers = [
        {**c, "ready": False, "started": False, "restartCount": 2, "state": crashed}
        for c in current["status"]["containerStatuses"]
    ]
    cluster.kubectl(
        "patch", "pod", "-n", namespace, pod["metadata"]["name"], "--subresource=status",
        "--type=merge",
        "-p", json.dumps({"status": {"conditions": conditions, "containerStatuses": containers}}),
    )  # fmt: skip

    def failing(obj: dict[str, Any]) -> bool:
        return condition(obj, "Stalled").get("status") == "True"

    obj = wait_status(cluster, "agentspec", namespace, "s", failing)
    reason = condition(obj, "Ready")["reason"]
    assert REASON.match(reason), reason
    assert reason == "ExitCode3CustomRuntime"
    assert obj["status"]["session"]["reason"] == "exit code 3 (custom runtime)"  # as it was
    assert obj["status"]["observedGeneration"] == obj["metadata"]["generation"]


def _status_policy(namespace: str) -> list[dict[str, Any]]:
    """An admission policy that refuses agent ``refused``'s status unless its state is Error,
    as a cluster's own policy might, and refuses creating ``policy-probe`` (to know it acts)."""
    name = f"bindery-test-status-{namespace}"
    refuse = (
        "object.metadata.name != 'refused' || !has(request.subResource) || "
        "request.subResource != 'status' || "
        "(has(object.status) && has(object.status.state) && object.status.state == 'Error')"
    )
    return [
        {
            "apiVersion": "admissionregistration.k8s.io/v1",
            "kind": "ValidatingAdmissionPolicy",
            "metadata": {"name": name},
            "spec": {
                "failurePolicy": "Fail",
                "matchConstraints": {
                    "resourceRules": [
                        {
                            "apiGroups": ["bindery.dev"],
                            "apiVersions": ["*"],
                            "operations": ["CREATE", "UPDATE"],
                            "resources": ["agentspecs", "agentspecs/status"],
                        }
                    ]
                },
                "validations": [
                    {"expression": refuse, "message": "this cluster refuses that status"},
                    {"expression": "object.metadata.name != 'policy-probe'", "message": "probe"},
                ],
            },
        },
        {
            "apiVersion": "admissionregistration.k8s.io/v1",
            "kind": "ValidatingAdmissionPolicyBinding",
            "metadata": {"name": name},
            "spec": {
                "policyName": name,
                "validationActions": ["Deny"],
                "matchResources": {
                    "namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": namespace}}
                },
            },
        },
    ]


def test_a_status_the_api_server_refuses_is_reported_and_the_others_converge(
    cluster: Cluster, namespace: str, controller: ControllerProcess
) -> None:
    """Before the rule, the refused status write was retried for ever and the agent kept the
    CRD's default status (observedGeneration -1, no condition, no event)."""
    policy = _status_policy(namespace)
    doc = "\n---\n".join(yaml.safe_dump(o) for o in policy)
    cluster.kubectl("apply", "-f", "-", input=doc)
    try:
        probe = yaml.safe_dump({**agent("policy-probe"), "metadata": {"name": "policy-probe"}})

        def acting() -> bool | None:
            proc = cluster.kubectl(
                "create", "--dry-run=server", "-n", namespace, "-f", "-", input=probe, check=False
            )
            return True if proc.returncode != 0 and "probe" in proc.stderr else None

        wait_for(acting, timeout=30, interval=0.5, what="the admission policy in effect")
        apply(cluster, namespace, agent("refused"), agent("other"))
        wait_status(cluster, "agentspec", namespace, "other", ready)

        def reported(obj: dict[str, Any]) -> bool:
            return condition(obj, "Stalled").get("reason") == "ReconcileFailed"

        obj = wait_status(cluster, "agentspec", namespace, "refused", reported)
        st = obj["status"]
        assert st["observedGeneration"] == -1  # generation 1 was never reconciled
        assert st["state"] == "Error"
        stalled = condition(obj, "Stalled")
        assert stalled["status"] == "True"
        assert condition(obj, "Ready")["status"] == "False"
        assert stalled["message"].startswith("AgentSpec ")
        assert "status: " in stalled["message"]  # the field
        assert "this cluster refuses that status" in stalled["message"]  # the reason
        assert "Fix: " in stalled["message"]

        def warned() -> bool | None:
            events = json.loads(
                cluster.kubectl(
                    "get", "events", "-n", namespace, "-o", "json",
                    "--field-selector", "involvedObject.name=refused,reason=ReconcileFailed",
                ).stdout
            )["items"]  # fmt: skip
            return True if any(e.get("type") == "Warning" for e in events) else None

        wait_for(warned, timeout=30, interval=0.5, what="a ReconcileFailed Warning event")
    finally:
        cluster.kubectl("delete", "-f", "-", "--wait=false", input=doc, check=False)
    # The policy gone, the next retry (with backoff) reconciles it.
    healed = wait_status(cluster, "agentspec", namespace, "refused", ready, timeout=90)
    assert condition(healed, "Stalled")["status"] == "False"
    assert get(cluster, "agentspec", namespace, "other") is not None
