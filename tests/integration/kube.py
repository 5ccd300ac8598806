"""Small helpers the integration tests share: apply, read and wait on real API objects."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import yaml

from tests.support import Cluster, audit_mark, controller_writes, wait_for

REPO_ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = REPO_ROOT / "examples" / "manifests"


AGENT_COLUMNS = ["NAME", "WORK", "STATE", "SYNCED", "LAUNCH", "DRIFT", "READY", "REASON", "AGE"]
"""What ``kubectl get agentspecs`` prints as its header (the CRD's default printer columns)."""


def apply(cluster: Cluster, namespace: str, *objects: dict[str, Any]) -> None:
    """Server-side apply, as a GitOps tool would."""
    doc = "\n---\n".join(yaml.safe_dump(o) for o in objects)
    cluster.kubectl("apply", "--server-side", "-n", namespace, "-f", "-", input=doc)


def apply_examples(cluster: Cluster, namespace: str) -> None:
    cluster.kubectl("apply", "--server-side", "-f", str(EXAMPLES / "00-resourcetypes.yaml"))
    cluster.kubectl("apply", "--server-side", "-n", namespace, "-f", str(EXAMPLES))


def get(cluster: Cluster, kind: str, namespace: str, name: str) -> dict[str, Any] | None:
    args = ["get", kind, name, "-o", "json"]
    if namespace:
        args += ["-n", namespace]
    proc = cluster.kubectl(*args, check=False)
    if proc.returncode != 0:
        if "NotFound" in proc.stderr:
            return None
        raise AssertionError(proc.stderr)
    obj: dict[str, Any] = json.loads(proc.stdout)
    return obj


def must_get(cluster: Cluster, kind: str, namespace: str, name: str) -> dict[str, Any]:
    obj = get(cluster, kind, namespace, name)
    assert obj is not None, f"{kind} {namespace}/{name} does not exist"
    return obj


def condition(obj: dict[str, Any] | None, type_: str) -> dict[str, Any]:
    for cond in ((obj or {}).get("status") or {}).get("conditions") or []:
        if cond.get("type") == type_:
            return dict(cond)
    return {}


def wait_status(
    cluster: Cluster,
    kind: str,
    namespace: str,
    name: str,
    check: Any,
    *,
    timeout: float = 30.0,
    what: str = "",
) -> dict[str, Any]:
    """Wait until ``check(obj)`` holds for the object's current state; return the object."""

    def probe() -> dict[str, Any] | None:
        obj = get(cluster, kind, namespace, name)
        return obj if obj is not None and check(obj) else None

    found: dict[str, Any] = wait_for(
        probe, timeout=timeout, interval=0.2, what=what or f"{kind} {namespace}/{name}"
    )
    return found


def ready(obj: dict[str, Any]) -> bool:
    """Ready=True for the object's current generation."""
    st = obj.get("status") or {}
    return (
        condition(obj, "Ready").get("status") == "True"
        and st.get("observedGeneration") == obj["metadata"]["generation"]
    )


def state(expected: str) -> Any:
    def check(obj: dict[str, Any]) -> bool:
        st = obj.get("status") or {}
        return bool(
            st.get("state") == expected
            and st.get("observedGeneration") == obj["metadata"]["generation"]
        )

    return check


def bindings_document(cluster: Cluster, namespace: str, agent: str) -> dict[str, Any] | None:
    cm = get(cluster, "configmap", namespace, f"{agent}-bindings")
    if cm is None:
        return None
    doc: dict[str, Any] = json.loads(cm["data"]["bindings.json"])
    return doc


def agent(
    name: str,
    *,
    resources: list[dict[str, str]] | None = None,
    tools: list[dict[str, Any]] | None = None,
    selector: dict[str, Any] | None = None,
    runtime: dict[str, Any] | None = None,
    relaunch: int | None = None,
) -> dict[str, Any]:
    spec: dict[str, Any] = {}
    if resources is not None:
        spec["resources"] = resources
    if tools is not None:
        spec["tools"] = tools
    if selector is not None:
        spec["resourceSelector"] = selector
    if runtime is not None:
        spec["runtime"] = runtime
    if relaunch is not None:
        spec["relaunchGeneration"] = relaunch
    return {
        "apiVersion": "bindery.dev/v1alpha1",
        "kind": "AgentSpec",
        "metadata": {"name": name},
        "spec": spec,
    }


def work(uri: str, tag: str = "github-issue") -> dict[str, str]:
    return {"name": "work", "tag": tag, "uri": uri}


def settle(cluster: Cluster, namespace: str, quiet: float = 2.0, timeout: float = 30.0) -> None:
    """Wait until the controller has made no write in ``namespace`` for ``quiet`` seconds."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        mark = audit_mark(cluster)
        time.sleep(quiet)
        if not controller_writes(cluster, namespace, mark):
            return
    raise AssertionError(f"the controller kept writing in {namespace} for {timeout}s")


def why(
    cluster: Cluster, namespace: str, name: str, *flags: str
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "controller", "why", name, "-n", namespace, *flags],
        capture_output=True,
        text=True,
        env={**os.environ, "KUBECONFIG": str(cluster.kubeconfig), "PYTHONPATH": str(REPO_ROOT)},
        cwd=REPO_ROOT,
        timeout=60,
        check=False,
    )


def explained(cluster: Cluster, namespace: str, name: str) -> dict[str, Any]:
    proc = why(cluster, namespace, name, "-o", "json")
    assert proc.returncode == 0, proc.stderr
    doc: dict[str, Any] = json.loads(proc.stdout)
    return doc
