"""Helpers for the session tests: agents with a runtime, their StatefulSet and pod, a pod watch.

Everything here reads the real world (the API server, the kwok node's pods); nothing fakes a
pod's status.
"""

from __future__ import annotations

import json
import threading
from types import TracebackType
from typing import Any

from kubernetes import client, watch

from tests.integration.kube import EXAMPLES, condition, get
from tests.support import Cluster, wait_for

AGENT_LABEL = "bindery.dev/agent"
LAUNCH_GENERATION = "bindery.dev/launch-generation"
TRAJECTORY_HASH = "bindery.dev/trajectory-hash"
LAUNCHED_AT = "bindery.dev/launched-at"
BINDINGS_MOUNT = "/var/run/bindery"
BINDINGS_ENV = "BINDERY_BINDINGS_FILE"
IMAGE_A = "busybox:1.36"
IMAGE_B = "busybox:1.37"

LAUNCH_FIELDS = (
    "launch",
    "desiredLaunchGeneration",
    "observedLaunchGeneration",
    "desiredTrajectoryHash",
    "launchedTrajectoryHash",
    "lastLaunchTime",
)


def apply_types(cluster: Cluster) -> None:
    """The examples' (cluster-scoped) ResourceTypes; idempotent across tests."""
    cluster.kubectl("apply", "--server-side", "-f", str(EXAMPLES / "00-resourcetypes.yaml"))


def runtime(image: str = IMAGE_A, **extra: Any) -> dict[str, Any]:
    return {
        "image": image,
        "command": ["sh", "-c"],
        "args": ["while true; do sleep 3600; done"],
        **extra,
    }


def resource(
    name: str,
    uri: str,
    *,
    type_: str = "fs-directory",
    labels: dict[str, str] | None = None,
    alias: str = "",
    attributes: dict[str, str] | None = None,
) -> dict[str, Any]:
    spec: dict[str, Any] = {"type": type_, "uri": uri}
    if alias:
        spec["alias"] = alias
    if attributes:
        spec["attributes"] = attributes
    return {
        "apiVersion": "bindery.dev/v1alpha1",
        "kind": "Resource",
        "metadata": {"name": name, "labels": labels or {}},
        "spec": spec,
    }


def tool(name: str, *slots: tuple[str, str]) -> dict[str, Any]:
    """A Tool with contextual, optional slots ``(name, resourceType)``."""
    return {
        "apiVersion": "bindery.dev/v1alpha1",
        "kind": "Tool",
        "metadata": {"name": name},
        "spec": {
            "resourceSlots": [
                {"name": s, "resourceType": t, "access": "read_only", "required": False}
                for s, t in slots
            ]
        },
    }


def session_name(agent: str) -> str:
    return f"{agent}-session"


def session_selector(agent: str) -> str:
    return f"{AGENT_LABEL}={agent},app.kubernetes.io/component=session"


def pod_name(agent: str) -> str:
    """The one pod of the agent's session StatefulSet (ordinal 0)."""
    return f"{session_name(agent)}-0"


def statefulset(cluster: Cluster, namespace: str, agent: str) -> dict[str, Any] | None:
    return get(cluster, "statefulset", namespace, session_name(agent))


WORKLOAD_KINDS = "statefulsets,deployments,replicasets,daemonsets"


def session_workloads(cluster: Cluster, namespace: str, agent: str) -> list[tuple[str, str]]:
    """(kind, name) of every workload labelled as the agent's: its session StatefulSet only."""
    out = cluster.kubectl(
        "get", WORKLOAD_KINDS, "-n", namespace, "-l", f"{AGENT_LABEL}={agent}", "-o", "json"
    ).stdout
    items: list[dict[str, Any]] = json.loads(out)["items"]
    return sorted((str(i["kind"]), str(i["metadata"]["name"])) for i in items)


def pods(cluster: Cluster, namespace: str, agent: str) -> list[dict[str, Any]]:
    out = cluster.kubectl(
        "get", "pods", "-n", namespace, "-l", session_selector(agent), "-o", "json"
    ).stdout
    items: list[dict[str, Any]] = json.loads(out)["items"]
    return items


def uid(obj: dict[str, Any]) -> str:
    return str(obj["metadata"]["uid"])


def image(pod_or_template: dict[str, Any]) -> str:
    return str(pod_or_template["spec"]["containers"][0]["image"])


def running_pod(
    cluster: Cluster,
    namespace: str,
    agent: str,
    *,
    not_uid: str = "",
    timeout: float = 60.0,
) -> dict[str, Any]:
    """Wait until the agent has exactly one session pod, Running and not terminating.

    Whatever pod is found must be the StatefulSet's ``<agent>-session-0``: a pod by any other
    name would be a second session.
    """

    def probe() -> dict[str, Any] | None:
        found = pods(cluster, namespace, agent)
        names = [p["metadata"]["name"] for p in found]
        assert set(names) <= {pod_name(agent)}, f"unexpected session pods: {names}"
        if len(found) != 1:
            return None
        pod = found[0]
        live = pod["status"].get("phase") == "Running" and not pod["metadata"].get(
            "deletionTimestamp"
        )
        return pod if live and uid(pod) != not_uid else None

    pod: dict[str, Any] = wait_for(
        probe, timeout=timeout, interval=0.2, what=f"one Running session pod of {agent}"
    )
    return pod


def launched(generation: int) -> Any:
    """Status check: the session runs generation ``generation`` with the current runtime."""

    def check(obj: dict[str, Any]) -> bool:
        st = obj.get("status") or {}
        return bool(
            st.get("observedGeneration") == obj["metadata"]["generation"]
            and st.get("launch") == f"{generation}/{generation}"
            and st.get("observedLaunchGeneration") == generation
            and st.get("desiredLaunchGeneration") == generation
            and st.get("desiredTrajectoryHash")
            and st.get("desiredTrajectoryHash") == st.get("launchedTrajectoryHash")
            and condition(obj, "RelaunchRequired").get("status") == "False"
        )

    return check


def drifted(obj: dict[str, Any]) -> bool:
    st = obj.get("status") or {}
    return bool(
        st.get("observedGeneration") == obj["metadata"]["generation"]
        and condition(obj, "RelaunchRequired").get("status") == "True"
    )


def events(cluster: Cluster, namespace: str, name: str, reason: str) -> int:
    """How many events with ``reason`` the agent ``name`` has."""
    reasons = cluster.kubectl(
        "get",
        "events",
        "-n",
        namespace,
        "--field-selector",
        f"involvedObject.name={name},reason={reason}",
        "-o",
        "jsonpath={.items[*].reason}",
    ).stdout.split()
    return len(reasons)


SLOW_EXIT = "bindery.test/slow-exit"


def hold_exit(cluster: Cluster, namespace: str, pod: dict[str, Any]) -> None:
    """Make ``pod`` terminate slowly, as a real kubelet's grace period would: while this
    finalizer is on, a deleted pod stays (terminating, phase Running) until ``release_exit``.

    kwok deletes a terminating pod at once, which would make every overlap check vacuous.
    """
    patch = {"metadata": {"finalizers": [SLOW_EXIT]}}
    cluster.kubectl(
        "patch", "pod", "-n", namespace, pod["metadata"]["name"], "--type=merge",
        "-p", json.dumps(patch),
    )  # fmt: skip


def release_exit(cluster: Cluster, namespace: str, pod: dict[str, Any]) -> None:
    """Let a pod held by ``hold_exit`` go (a no-op if it is already gone)."""
    current = get(cluster, "pod", namespace, pod["metadata"]["name"])
    if current is None or current["metadata"]["uid"] != pod["metadata"]["uid"]:
        return
    cluster.kubectl(
        "patch", "pod", "-n", namespace, pod["metadata"]["name"], "--type=merge",
        "-p", json.dumps({"metadata": {"finalizers": None}}),
    )  # fmt: skip


def terminating(cluster: Cluster, namespace: str, pod: dict[str, Any]) -> bool:
    """``pod`` itself (not a successor by the same name) exists and is being deleted."""
    current = get(cluster, "pod", namespace, pod["metadata"]["name"])
    return bool(
        current
        and current["metadata"]["uid"] == pod["metadata"]["uid"]
        and current["metadata"].get("deletionTimestamp")
    )


def crash_loop(cluster: Cluster, namespace: str, pod: dict[str, Any]) -> None:
    """Report ``pod`` as a real kubelet reports a crash-looping session: phase Running, its
    container waiting in CrashLoopBackOff, the pod not Ready.

    kwok sets a pod's status only while it is Pending, so this status stays as written.
    """
    current = get(cluster, "pod", namespace, pod["metadata"]["name"])
    assert current is not None, "the pod is gone"
    assert uid(current) == uid(pod), "the pod was replaced"
    conditions = [
        {**c, "status": "False"} if c["type"] in ("Ready", "ContainersReady") else c
        for c in current["status"]["conditions"]
    ]
    containers = [
        {
            **c,
            "ready": False,
            "started": False,
            "restartCount": 5,
            "state": {"waiting": {"reason": "CrashLoopBackOff"}},
        }
        for c in current["status"]["containerStatuses"]
    ]
    patch = {"status": {"conditions": conditions, "containerStatuses": containers}}
    cluster.kubectl(
        "patch", "pod", "-n", namespace, pod["metadata"]["name"], "--subresource=status",
        "--type=merge", "-p", json.dumps(patch),
    )  # fmt: skip


def pod_ready(pod: dict[str, Any]) -> bool:
    return any(
        c.get("type") == "Ready" and c.get("status") == "True"
        for c in (pod.get("status") or {}).get("conditions") or []
    )


class PodWatch:
    """Watches an agent's session pods and records every pod seen and every overlap.

    It lists once, then watches from the list's resourceVersion, so it sees every change of every
    session pod in order. After each event it records the set of pods whose phase is Running
    (terminating or not): two at once is an overlap.
    """

    def __init__(self, cluster: Cluster, namespace: str, agent: str) -> None:
        self._api = client.CoreV1Api(cluster.api_client())
        self._namespace = namespace
        self._selector = session_selector(agent)
        self._stop = threading.Event()
        self._lock = threading.Lock()
        self._thread: threading.Thread | None = None
        self._rv = ""
        self.error: BaseException | None = None
        self.live: dict[str, str] = {}
        """uid -> phase of the pods that exist now."""
        self.images: dict[str, str] = {}
        """uid -> image of every pod seen."""
        self.names: dict[str, str] = {}
        """uid -> name of every pod seen."""
        self.ran: list[str] = []
        """Every pod seen with phase Running, in the order first seen Running."""
        self.overlaps: list[list[str]] = []
        """Each moment more than one pod was Running at once."""

    def _record(self, kind: str, pod: Any) -> None:
        pod_uid = str(pod.metadata.uid)
        with self._lock:
            self.images.setdefault(pod_uid, str(pod.spec.containers[0].image))
            self.names.setdefault(pod_uid, str(pod.metadata.name))
            if kind == "DELETED":
                self.live.pop(pod_uid, None)
            else:
                self.live[pod_uid] = str(pod.status.phase if pod.status else "")
            running = sorted(u for u, phase in self.live.items() if phase == "Running")
            for u in running:
                if u not in self.ran:
                    self.ran.append(u)
            if len(running) > 1:
                self.overlaps.append(running)

    def running(self) -> set[str]:
        with self._lock:
            return {u for u, phase in self.live.items() if phase == "Running"}

    def _run(self) -> None:
        stream = watch.Watch()
        try:
            while not self._stop.is_set():
                for event in stream.stream(
                    self._api.list_namespaced_pod,
                    self._namespace,
                    label_selector=self._selector,
                    resource_version=self._rv,
                    timeout_seconds=1,
                ):
                    if event["type"] == "ERROR":
                        self.error = AssertionError(f"pod watch failed: {event['raw_object']}")
                        return
                    if event["type"] == "BOOKMARK":
                        continue
                    pod = event["object"]
                    self._rv = str(pod.metadata.resource_version)
                    self._record(str(event["type"]), pod)
                    if self._stop.is_set():
                        break
        except BaseException as exc:  # surfaced by __exit__
            self.error = exc
        finally:
            stream.stop()

    def __enter__(self) -> PodWatch:
        listing = self._api.list_namespaced_pod(self._namespace, label_selector=self._selector)
        for pod in listing.items:
            self._record("ADDED", pod)
        self._rv = str(listing.metadata.resource_version) if listing.metadata else ""
        assert self._rv, "the pod list carries no resourceVersion"
        self._thread = threading.Thread(target=self._run, name="pod-watch", daemon=True)
        self._thread.start()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=15)
        self._api.api_client.close()
        if exc is None and self.error is not None:
            raise AssertionError(f"the pod watch failed: {self.error!r}") from self.error
