"""Session pods where Pod Security is enforced, against the real control plane (issue 15.2, 20.5).

The namespace is labelled ``pod-security.kubernetes.io/enforce=restricted``, so the API server's
PodSecurity admission refuses any pod that does not meet the ``restricted`` profile: a session
pod exists and runs only if the pod template the controller wrote passes. The kwok node runs the
pods; nothing fakes a pod's status.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
import yaml

from tests.integration.kube import agent, apply, must_get, ready, settle, wait_status
from tests.integration.sessions_helpers import (
    IMAGE_A,
    apply_types,
    launched,
    pod_name,
    running_pod,
    runtime,
    session_name,
)
from tests.support import Cluster, ControllerProcess, wait_for

pytestmark = pytest.mark.integration

NOTES = {"name": "notes", "tag": "axe-worklog", "uri": "axe-worklog://example/project/7"}

RESTRICTED_POD = {"runAsNonRoot": True, "seccompProfile": {"type": "RuntimeDefault"}}
RESTRICTED_CONTAINER = {"allowPrivilegeEscalation": False, "capabilities": {"drop": ["ALL"]}}

# Everything a user may set on a session that Pod Security restricted still allows.
TUNED = runtime(
    resources={"requests": {"cpu": "100m", "memory": "64Mi"}, "limits": {"memory": "128Mi"}},
    securityContext={"runAsUser": 10001, "runAsGroup": 10001, "fsGroup": 10001},
    containerSecurityContext={
        "readOnlyRootFilesystem": True,
        "capabilities": {"add": ["NET_BIND_SERVICE"]},
    },
    serviceAccountName="agent-runner",
    nodeSelector={"type": "kwok"},
    tolerations=[{"key": "dedicated", "operator": "Equal", "value": "agents"}],
    imagePullSecrets=[{"name": "registry-creds"}],
    volumes=[
        {"name": "scratch", "emptyDir": {"sizeLimit": "64Mi"}},
        {"name": "config", "configMap": {"name": "agent-config", "optional": True}},
        {"name": "key", "secret": {"secretName": "agent-key", "optional": True}},
    ],
    volumeMounts=[
        {"name": "scratch", "mountPath": "/scratch"},
        {"name": "config", "mountPath": "/etc/agent", "readOnly": True},
        {"name": "key", "mountPath": "/var/run/secrets/agent", "readOnly": True},
    ],
)


def _restrict(cluster: Cluster, namespace: str) -> None:
    cluster.kubectl(
        "label",
        "namespace",
        namespace,
        "pod-security.kubernetes.io/enforce=restricted",
        "pod-security.kubernetes.io/enforce-version=latest",
    )


def _pod_refused(cluster: Cluster, namespace: str, spec: dict[str, Any]) -> str:
    """Server-side dry-run of a bare pod: the PodSecurity refusal message, or '' if admitted."""
    pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "probe"}, "spec": spec}
    proc = cluster.kubectl(
        "apply", "--dry-run=server", "-n", namespace, "-f", "-",
        input=yaml.safe_dump(pod), check=False,
    )  # fmt: skip
    return "" if proc.returncode == 0 else proc.stderr


def _failed_creates(cluster: Cluster, namespace: str) -> list[str]:
    out = cluster.kubectl(
        "get", "events", "-n", namespace, "--field-selector", "reason=FailedCreate", "-o", "json"
    ).stdout
    return [str(e.get("message", "")) for e in json.loads(out)["items"]]


def test_the_policy_is_enforced_in_the_test_namespace(cluster: Cluster, namespace: str) -> None:
    """The control: without the restricted settings a pod is refused, with them admitted."""
    _restrict(cluster, namespace)
    container = {"name": "agent", "image": IMAGE_A}
    refused = _pod_refused(cluster, namespace, {"containers": [container]})
    assert 'violates PodSecurity "restricted:latest"' in refused, refused
    for needed in ("allowPrivilegeEscalation", "capabilities", "runAsNonRoot", "seccompProfile"):
        assert needed in refused, refused
    admitted = {
        "securityContext": RESTRICTED_POD,
        "containers": [{**container, "securityContext": RESTRICTED_CONTAINER}],
    }
    assert _pod_refused(cluster, namespace, admitted) == ""


def test_sessions_run_in_a_namespace_enforcing_restricted(
    cluster: Cluster, namespace: str, controller: ControllerProcess
) -> None:
    _restrict(cluster, namespace)
    cluster.kubectl("create", "serviceaccount", "agent-runner", "-n", namespace)
    apply_types(cluster)
    apply(
        cluster,
        namespace,
        agent("bare", resources=[NOTES], runtime=runtime(), relaunch=1),
        agent("tuned", resources=[NOTES], runtime=TUNED, relaunch=1),
    )
    for name in ("bare", "tuned"):
        obj = wait_status(cluster, "agentspec", namespace, name, launched(1))
        assert ready(obj), obj["status"]
    bare = running_pod(cluster, namespace, "bare")
    tuned = running_pod(cluster, namespace, "tuned")
    assert _failed_creates(cluster, namespace) == []

    # The bare runtime: the restricted defaults, no ServiceAccount named, so no token.
    spec = bare["spec"]
    (container,) = spec["containers"]
    assert spec["securityContext"] == RESTRICTED_POD
    assert container["securityContext"] == RESTRICTED_CONTAINER
    assert spec["automountServiceAccountToken"] is False
    assert spec.get("serviceAccountName", "default") == "default"  # none named

    # The tuned runtime: every setting reached the pod, merged over the defaults.
    spec = tuned["spec"]
    (container,) = spec["containers"]
    assert spec["securityContext"] == {
        **RESTRICTED_POD,
        "runAsUser": 10001,
        "runAsGroup": 10001,
        "fsGroup": 10001,
    }
    assert container["securityContext"] == {
        "allowPrivilegeEscalation": False,
        "capabilities": {"drop": ["ALL"], "add": ["NET_BIND_SERVICE"]},
        "readOnlyRootFilesystem": True,
    }
    assert container["resources"] == {
        "requests": {"cpu": "100m", "memory": "64Mi"},
        "limits": {"memory": "128Mi"},
    }
    assert spec["serviceAccountName"] == "agent-runner"
    assert "automountServiceAccountToken" not in spec  # the ServiceAccount decides
    assert spec["nodeSelector"] == {"type": "kwok"}
    assert {"key": "dedicated", "operator": "Equal", "value": "agents"} in spec["tolerations"]
    assert spec["imagePullSecrets"] == [{"name": "registry-creds"}]
    volumes = {v["name"]: v for v in spec["volumes"]}
    assert volumes["bindings"]["configMap"]["name"] == "tuned-bindings"
    assert volumes["scratch"]["emptyDir"] == {"sizeLimit": "64Mi"}
    assert volumes["config"]["configMap"]["name"] == "agent-config"
    assert volumes["key"]["secret"]["secretName"] == "agent-key"
    assert [(m["name"], m["mountPath"]) for m in container["volumeMounts"]] == [
        ("bindings", "/var/run/bindery"),
        ("scratch", "/scratch"),
        ("config", "/etc/agent"),
        ("key", "/var/run/secrets/agent"),
    ]


def test_a_runtime_that_breaks_the_policy_gets_no_pod(
    cluster: Cluster, namespace: str, controller: ControllerProcess
) -> None:
    """User settings really replace the defaults, and the namespace's policy has the last word:
    Bindery gives no way around it (the pod is refused, never created)."""
    _restrict(cluster, namespace)
    apply_types(cluster)
    escalating = runtime(containerSecurityContext={"allowPrivilegeEscalation": True})
    apply(cluster, namespace, agent("loose", resources=[NOTES], runtime=escalating, relaunch=1))
    sts = wait_for(
        lambda: (
            must_get(cluster, "statefulset", namespace, session_name("loose"))
            if _failed_creates(cluster, namespace)
            else None
        ),
        timeout=60,
        what="the StatefulSet controller to report the refused pod",
    )
    template = sts["spec"]["template"]["spec"]["containers"][0]["securityContext"]
    assert template["allowPrivilegeEscalation"] is True
    (message, *_) = _failed_creates(cluster, namespace)
    assert 'violates PodSecurity "restricted:latest"' in message, message
    assert "allowPrivilegeEscalation != false" in message, message
    settle(cluster, namespace)
    pods = cluster.kubectl("get", "pod", pod_name("loose"), "-n", namespace, check=False)
    assert pods.returncode != 0
    assert "NotFound" in pods.stderr
