"""The session's workspace on a real kubelet: a file a process wrote is there for the next one.

The local control plane's default class is kube-controller-manager's host-path provisioner: the
claim is a directory on this host (root's, mode 0750), so the runtime here runs as root. Nothing
is faked: the containers are real processes, the claim is really provisioned and mounted.
"""

from __future__ import annotations

from typing import Any

import pytest

from harness import probe
from tests.integration.kube import agent, apply, get, must_get, wait_status
from tests.integration.sessions_helpers import apply_types, launched, pod_name, running_pod
from tests.support import Cluster, ControllerProcess, wait_for

pytestmark = [pytest.mark.node]

WRITER = r"""
import json, os, pathlib, time
note = pathlib.Path(os.environ["BINDERY_WORKSPACE"]) / "note.txt"
if note.exists():
    print(json.dumps({"t": time.time(), "event": "found", "text": note.read_text()}), flush=True)
else:
    note.write_text("written by a session process " + os.urandom(8).hex())
    print(json.dumps({"t": time.time(), "event": "wrote", "text": note.read_text()}), flush=True)
while True:
    time.sleep(3600)
"""


def container_id(pod: dict[str, Any]) -> str:
    statuses: list[dict[str, Any]] = (pod.get("status") or {}).get("containerStatuses") or []
    agent_status = next((c for c in statuses if c["name"] == "agent"), {})
    return str(agent_status.get("containerID") or "")


def diagnosis(cluster: Cluster, namespace: str) -> str:
    """What the pod, the claim, the volume and the namespace's events say (for a failure)."""
    out = []
    for args in (
        ("describe", "pod", "-n", namespace),
        ("get", "pvc,events", "-n", namespace, "-o", "wide"),
        ("get", "pv,storageclass", "-o", "wide"),
        ("get", "agentspec", "ws", "-n", namespace, "-o", "jsonpath={.status}"),
    ):
        proc = cluster.kubectl(*args, check=False)
        out.append(f"$ kubectl {' '.join(args)}\n{proc.stdout}{proc.stderr}")
    return "\n".join(out)


def said(cluster: Cluster, namespace: str, event: str) -> probe.Line:
    line: probe.Line = wait_for(
        lambda: next(
            (
                line
                for line in probe.lines(cluster.kubectl, namespace, pod_name("ws"))
                if line.event == event
            ),
            None,
        ),
        timeout=120,
        interval=0.5,
        what=f"the session process to say {event!r}",
    )
    return line


def test_a_relaunched_process_finds_the_file_the_previous_one_wrote(
    cluster: Cluster, controller: ControllerProcess, namespace: str
) -> None:
    apply_types(cluster)
    root = {"runAsUser": 0, "runAsNonRoot": False}
    spec = agent(
        "ws",
        runtime=probe.runtime(
            WRITER,
            workspace={"size": "64Mi", "mountPath": "/work"},
            containerSecurityContext=root,  # the agent container only: the sidecar stays non-root
        ),
        relaunch=1,
    )
    apply(cluster, namespace, spec)
    try:
        first = running_pod(cluster, namespace, "ws", timeout=180)
    except AssertionError as exc:
        raise AssertionError(f"{exc}\n{diagnosis(cluster, namespace)}") from exc
    wrote = said(cluster, namespace, "wrote")
    assert wrote.fields["text"].startswith("written by a session process ")
    first_container = wait_for(
        lambda: container_id(get(cluster, "pod", namespace, pod_name("ws")) or {}),
        what="the first container's ID",
    )
    claim = must_get(cluster, "persistentvolumeclaim", namespace, "ws-workspace")
    assert claim["status"]["phase"] == "Bound"

    spec["spec"]["relaunchGeneration"] = 2
    apply(cluster, namespace, spec)
    wait_status(cluster, "agentspec", namespace, "ws", launched(2), timeout=180)
    second = running_pod(cluster, namespace, "ws", not_uid=first["metadata"]["uid"], timeout=180)
    found = said(cluster, namespace, "found")
    assert found.fields["text"] == wrote.fields["text"]
    second_container = container_id(second) or container_id(
        must_get(cluster, "pod", namespace, pod_name("ws"))
    )
    assert second_container
    assert second_container != first_container
    after = must_get(cluster, "persistentvolumeclaim", namespace, "ws-workspace")
    assert after["metadata"]["uid"] == claim["metadata"]["uid"]
    assert after["spec"]["volumeName"] == claim["spec"]["volumeName"]
