"""A rollout on the real node: ``kubectl wait --for=condition=Delivered`` on a Resource returns
once the last of the sessions bound to it has applied its change, as the processes themselves log
it (the session library's watcher, acknowledging what it applies)."""

from __future__ import annotations

import time

import pytest

from controller.domain.acknowledgement import digest
from harness import probe
from tests.integration.kube import agent, apply, get, must_get
from tests.integration.sessions_helpers import apply_types, pod_name, running_pod
from tests.support import Cluster, ControllerProcess

pytestmark = [pytest.mark.node]

URI = "file:///srv/rollout/shared"
SESSIONS = ("s1", "s2", "s3")


def shared(note: str) -> dict[str, object]:
    return {
        "apiVersion": "bindery.dev/v1alpha1",
        "kind": "Resource",
        "metadata": {"name": "shared"},
        "spec": {"type": "fs-directory", "uri": URI, "attributes": {"note": note}},
    }


def document_digest(cluster: Cluster, namespace: str, name: str) -> str:
    cm = must_get(cluster, "configmap", namespace, f"{name}-bindings")
    return digest(cm["data"]["bindings.json"])


def applied_at(cluster: Cluster, namespace: str, name: str, wanted: str) -> float | None:
    """When the process in ``name``'s session logged applying the document ``wanted``."""
    lines = probe.applied(cluster.kubectl, namespace, pod_name(name))
    return next((line.t for line in lines if line.fields.get("digest") == wanted), None)


def test_kubectl_wait_for_delivered_returns_once_the_last_session_applied_the_change(
    cluster: Cluster, controller: ControllerProcess, namespace: str
) -> None:
    apply_types(cluster)
    binding = {"name": "shared", "tag": "fs-directory", "uri": URI}
    apply(
        cluster,
        namespace,
        shared("1"),
        *(agent(name, resources=[binding], runtime=probe.runtime()) for name in SESSIONS),
    )
    for name in SESSIONS:
        running_pod(cluster, namespace, name, timeout=180)
    cluster.kubectl(
        "wait", "--for=condition=Delivered", "resource/shared", "-n", namespace, "--timeout=180s"
    )
    first = must_get(cluster, "resource", namespace, "shared")
    assert first["status"]["delivered"] == "3/3"

    apply(cluster, namespace, shared("2"))
    generation = int(must_get(cluster, "resource", namespace, "shared")["metadata"]["generation"])
    assert generation == 2
    cluster.kubectl(
        "wait", "--for=condition=Delivered", "resource/shared", "-n", namespace, "--timeout=180s"
    )
    returned = time.time()

    done = must_get(cluster, "resource", namespace, "shared")
    assert done["status"]["rollout"]["generation"] == 2
    assert done["status"]["delivered"] == "3/3"
    times = {}
    for name in SESSIONS:
        wanted = document_digest(cluster, namespace, name)
        text = must_get(cluster, "configmap", namespace, f"{name}-bindings")["data"]
        assert '"note": "2"' in text["bindings.json"], f"{name}'s document is not generation 2's"
        seen = applied_at(cluster, namespace, name, wanted)
        assert seen is not None, f"{name}'s process never logged applying {wanted}"
        times[name] = seen
    last = max(times.values())
    print(f"\nsessions applied at +{sorted(t - min(times.values()) for t in times.values())} s; "
          f"kubectl wait returned {returned - last:.2f} s after the last")  # fmt: skip
    assert last <= returned, "kubectl wait returned before the last session applied the change"
    for name in SESSIONS:
        status = (get(cluster, "agentspec", namespace, name) or {}).get("status") or {}
        assert status["delivery"]["appliedDigest"] == document_digest(cluster, namespace, name)
