"""Upgrading a running installation with Helm, as docs/install.md tells a user to, while agents
hold work and their sessions run as real processes on the real node.

The previous release is this repository at ``PREVIOUS``: its chart and CRDs (``git archive``) and
its controller image, built here from that commit's Dockerfile (cached by commit). It is the last
commit before ResourceGrants, so the upgrade also brings a kind the new controller cannot start
without. The controllers run in the cluster, as the chart deploys them, under the chart's
ServiceAccount, RBAC and admission policies.

Across the upgrade a watcher replays every work hold and every delivered bindings document of the
namespace in the API server's order (as in the work-scope tests): no URI may have two holders, or
be delivered to two agents, at any instant.
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path
from typing import Any

import pytest

from harness import images, node
from tests.integration.kube import agent, apply, condition, get, ready, state, wait_status, work
from tests.integration.sessions_helpers import apply_types, launched, running_pod
from tests.integration.test_work_scope import HOLDS, HoldWatcher
from tests.support import REPO_ROOT, Cluster, wait_for

pytestmark = [pytest.mark.node]

PREVIOUS = "6307502"
"""The previous release: the last commit before ResourceGrants (0.1.0)."""
PREVIOUS_IMAGE = "localhost/bindery:previous"
CURRENT_IMAGE = images.PROJECT_IMAGE
RELEASE = "bindery"
SLEEPER = {
    "image": CURRENT_IMAGE,
    "command": ["python", "-c", "import time\nwhile True:\n    time.sleep(3600)"],
}
"""A session process that runs until it is stopped (it reads nothing, so any restart is the
kubelet's or the controller's doing)."""


def helm(cluster: Cluster, *args: str) -> subprocess.CompletedProcess[str]:
    proc = subprocess.run(
        [str(cluster.bin_dir / "helm"), *args],
        capture_output=True,
        text=True,
        check=False,
        env={**os.environ, "KUBECONFIG": str(cluster.kubeconfig)},
        timeout=600,
    )
    if proc.returncode != 0:
        raise AssertionError(f"helm {' '.join(args)} exited {proc.returncode}:\n{proc.stderr}")
    return proc


def containers(cluster: Cluster, namespace: str, name: str) -> dict[str, str]:
    """The session pod's uid and each container's ID (the delivery sidecar's included)."""
    pod = running_pod(cluster, namespace, name, timeout=180)
    status = pod["status"]
    ids = {"pod": pod["metadata"]["uid"]}
    for c in [*(status.get("initContainerStatuses") or []), *status["containerStatuses"]]:
        ids[c["name"]] = c.get("containerID", "")
        ids[f"{c['name']}.restarts"] = str(c.get("restartCount", 0))
    return ids


def holds(cluster: Cluster, namespace: str) -> dict[str, tuple[str, str]]:
    """Work-hold Lease name -> (holder identity, the Lease's uid: the same hold, not a new one)."""
    out = cluster.kubectl("get", "lease", "-n", namespace, "-l", HOLDS, "-o", "json").stdout
    return {
        lease["metadata"]["name"]: (
            lease["spec"].get("holderIdentity", ""),
            lease["metadata"]["uid"],
        )
        for lease in json.loads(out)["items"]
    }


def controller_pod(cluster: Cluster, namespace: str) -> dict[str, Any]:
    out = cluster.kubectl(
        "get", "pod", "-n", namespace, "-l", f"app.kubernetes.io/instance={RELEASE}", "-o", "json"
    ).stdout
    (pod,) = json.loads(out)["items"]
    return dict(pod)


def controller_log(cluster: Cluster, namespace: str) -> str:
    proc = cluster.kubectl(
        "logs", "-n", namespace, f"deployment/{RELEASE}", "--tail=60", check=False
    )
    return proc.stdout + proc.stderr


@pytest.fixture
def previous_release(cluster: Cluster) -> Path:
    """The previous release's tree, its image on the node, and its CRDs on the cluster."""
    source = images.release_source(PREVIOUS, REPO_ROOT)
    image = images.project_image(source, ref=PREVIOUS_IMAGE)
    node.import_image(node.NodePaths(Path(cluster.state.node_root)), image.archive)
    # The CRDs as that release left them: its own versions, and no ResourceGrant.
    cluster.kubectl("delete", "crd", "resourcegrants.bindery.dev", "--ignore-not-found")
    cluster.kubectl("apply", "--server-side", "--force-conflicts", "-f", str(source / "crds"))
    return source


def test_a_helm_upgrade_keeps_every_session_and_every_hold(
    cluster: Cluster, namespace: str, previous_release: Path
) -> None:
    helm(
        cluster, "install", RELEASE, str(previous_release / "helm" / "bindery"),
        "--namespace", namespace, "--wait", "--timeout", "5m",
        "--set", "image.repository=localhost/bindery", "--set", "image.tag=previous",
        "--set", "image.pullPolicy=Never", "--set-json", f'watchNamespaces=["{namespace}"]',
    )  # fmt: skip
    try:
        upgraded_and_checked(cluster, namespace)
    finally:
        # Holders carry a finalizer only a controller removes: delete them while one runs.
        cluster.kubectl(
            "delete", "agentspec", "--all", "-n", namespace, "--timeout=120s", check=False
        )
        helm(cluster, "uninstall", RELEASE, "--namespace", namespace, "--wait")
    # The CRDs stay (helm.sh/resource-policy: keep), and so would everyone's objects.
    assert get(cluster, "crd", "", "resourcegrants.bindery.dev") is not None


def upgraded_and_checked(cluster: Cluster, namespace: str) -> None:
    apply_types(cluster)
    x, y = "github-issue://acme/app/1", "github-issue://acme/app/2"
    specs = {
        "a": agent("a", resources=[work(x)], runtime=SLEEPER),
        "b": agent("b", resources=[work(x)], runtime=SLEEPER),  # waits for a
        "c": agent("c", resources=[work(y)], runtime=SLEEPER),
        "d": agent("d", resources=[], runtime=SLEEPER),  # relaunched during the upgrade
    }
    apply(cluster, namespace, specs["a"], specs["c"], specs["d"])
    for name in ("a", "c"):
        wait_status(cluster, "agentspec", namespace, name, state("Working"), timeout=120)
    apply(cluster, namespace, specs["b"])
    wait_status(cluster, "agentspec", namespace, "b", state("Waiting"), timeout=120)
    before = {name: containers(cluster, namespace, name) for name in specs}
    held = holds(cluster, namespace)
    assert sorted(h for h, _ in held.values()) == [f"{namespace}/a", f"{namespace}/c"], held
    old_controller = controller_pod(cluster, namespace)

    with HoldWatcher(cluster, (namespace,), namespace) as watcher:
        specs["d"]["spec"]["relaunchGeneration"] = 1
        apply(cluster, namespace, specs["d"])
        # The upgrade as docs/install.md and the chart's README give it.
        helm(
            cluster, "upgrade", RELEASE, str(REPO_ROOT / "helm" / "bindery"),
            "--namespace", namespace, "--reset-then-reuse-values", "--take-ownership",
            "--set", "image.tag=dev", "--wait", "--timeout", "5m",
        )  # fmt: skip
        new_controller = controller_pod(cluster, namespace)
        assert new_controller["metadata"]["uid"] != old_controller["metadata"]["uid"]
        assert new_controller["spec"]["containers"][0]["image"] == CURRENT_IMAGE

        # Statuses converge on the new controller: it keeps the holders and the waiter, and
        # the relaunch asked for during the upgrade happens once.
        try:
            for name in ("a", "c"):
                wait_status(cluster, "agentspec", namespace, name, state("Working"), timeout=90)
            b = wait_status(cluster, "agentspec", namespace, "b", state("Waiting"), timeout=90)
            wait_status(cluster, "agentspec", namespace, "d", launched(1), timeout=180)
        except AssertionError as exc:
            log = controller_log(cluster, namespace)
            raise AssertionError(f"{exc}\ncontroller log:\n{log}") from exc
        assert f"{namespace}/a" in json.dumps(b["status"]), b["status"]

        # The kind the upgrade added works at once.
        grant = {
            "apiVersion": "bindery.dev/v1alpha1",
            "kind": "ResourceGrant",
            "metadata": {"name": "share"},
            "spec": {"from": [{"namespace": namespace}], "to": [{"name": "anything"}]},
        }
        apply(cluster, namespace, grant)
        wait_status(
            cluster, "resourcegrant", namespace, "share",
            lambda o: condition(o, "Ready") != {} and o["status"].get("observedGeneration") == 1,
            timeout=60,
        )  # fmt: skip
        d_after = containers(cluster, namespace, "d")
        after = {name: containers(cluster, namespace, name) for name in ("a", "b", "c")}
        wait_for(lambda: watcher.events > 0, timeout=10, what="the hold watcher's first event")

    assert watcher.violations == []
    for name, ids in after.items():
        assert ids == before[name], f"{name}'s session restarted across the upgrade"
    assert d_after["pod"] != before["d"]["pod"], "d's relaunch did not replace its session"
    assert holds(cluster, namespace) == held
    crd = get(cluster, "crd", "", "agentspecs.bindery.dev") or {}
    assert crd["metadata"]["annotations"]["helm.sh/resource-policy"] == "keep"
    assert crd["metadata"]["annotations"]["meta.helm.sh/release-name"] == RELEASE
    a = get(cluster, "agentspec", namespace, "a") or {}
    assert ready(a)
