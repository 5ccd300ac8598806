"""Work holds cannot be forged, handed over or removed by namespace users (real API server).

The chart's ValidatingAdmissionPolicy reserves Leases named ``bindery-work-*`` to the
controller's ServiceAccount. A user holding only the built-in ``edit`` role in the namespace
(which grants Lease writes) is refused every attempt; the controller's ServiceAccount is not;
other Leases stay the user's to write.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from controller.domain.work import hold_name
from harness.cluster import ensure_binaries
from tests.integration.test_chart import render, to_yaml
from tests.support import Cluster, wait_for

pytestmark = [pytest.mark.integration, pytest.mark.compat]

ATTEMPTS = 20
USER = "mallory"


@pytest.fixture(scope="module")
def helm_bin() -> Path:
    return ensure_binaries() / "helm"


def lease(name: str, holder: str, uid: str = "forged-uid") -> dict[str, Any]:
    return {
        "apiVersion": "coordination.k8s.io/v1",
        "kind": "Lease",
        "metadata": {
            "name": name,
            "labels": {"app.kubernetes.io/managed-by": "bindery"},
            "annotations": {"bindery.dev/uri": "github-issue://x/1", "bindery.dev/holder-uid": uid},
        },
        "spec": {"holderIdentity": holder},
    }


@pytest.fixture
def protected(cluster: Cluster, helm_bin: Path, namespace: str) -> Iterator[str]:
    """The chart's hold policy applied for real (its controller ServiceAccount lives in the
    test's namespace); mallory has the built-in ``edit`` role there; the ServiceAccount may
    write Leases there as the controller's RBAC allows."""
    release = f"hp-{uuid.uuid4().hex[:6]}"
    policy = [
        o
        for o in render(helm_bin, release, namespace)
        if o["kind"].startswith("ValidatingAdmissionPolicy")
        and o["metadata"]["labels"].get("app.kubernetes.io/component") == "hold-protection"
    ]
    assert {o["kind"] for o in policy} == {
        "ValidatingAdmissionPolicy",
        "ValidatingAdmissionPolicyBinding",
    }
    cluster.kubectl("apply", "--server-side", "-f", "-", input=to_yaml(policy))
    sa = f"{release}-bindery"
    cluster.kubectl("create", "serviceaccount", sa, "-n", namespace)
    cluster.kubectl(
        "create", "role", "leases", "--verb=get,list,watch,create,update,patch,delete",
        "--resource=leases.coordination.k8s.io", "-n", namespace,
    )  # fmt: skip
    cluster.kubectl(
        "create", "rolebinding", "controller-leases", "--role=leases",
        f"--serviceaccount={namespace}:{sa}", "-n", namespace,
    )  # fmt: skip
    cluster.kubectl(
        "create", "rolebinding", f"{USER}-edit", "--clusterrole=edit", f"--user={USER}",
        "-n", namespace,
    )  # fmt: skip
    try:
        yield f"system:serviceaccount:{namespace}:{sa}"
    finally:
        cluster.kubectl(
            "delete", "validatingadmissionpolicy,validatingadmissionpolicybinding",
            f"{release}-bindery-work-holds", "--ignore-not-found", check=False,
        )  # fmt: skip


def as_(cluster: Cluster, who: str, namespace: str, *args: str, doc: Any = None) -> Any:
    return cluster.kubectl(
        *args, f"--as={who}", "-n", namespace, input=json.dumps(doc) if doc else None, check=False
    )


def test_namespace_users_cannot_forge_hand_over_or_remove_a_hold(
    cluster: Cluster, namespace: str, protected: str
) -> None:
    name = hold_name("github-issue://x/1")
    # The policy takes a moment to be enforced: probe with throwaway names until it is.
    probes = iter(range(1000))

    def enforced() -> bool:
        probe = lease(f"bindery-work-probe-{next(probes)}", "x/y")
        out = as_(cluster, USER, namespace, "create", "-f", "-", doc=probe)
        return out.returncode != 0 and "only by the Bindery controller" in out.stderr

    wait_for(enforced, timeout=30, interval=0.5, what="the hold policy to be enforced")
    refused = {"create": 0, "update": 0, "delete": 0}
    for attempt in range(ATTEMPTS):
        forged = lease(name, f"{namespace}/mine-{attempt}")
        out = as_(cluster, USER, namespace, "create", "-f", "-", doc=forged)
        refused["create"] += out.returncode != 0 and "only by the Bindery controller" in out.stderr
    # A real hold, made by the controller's ServiceAccount.
    made = as_(
        cluster, protected, namespace, "create", "-f", "-", doc=lease(name, f"{namespace}/a")
    )
    assert made.returncode == 0, made.stderr
    for attempt in range(ATTEMPTS):
        patch = json.dumps({"spec": {"holderIdentity": f"{namespace}/mine-{attempt}"}})
        out = as_(cluster, USER, namespace, "patch", "lease", name, "--type=merge", "-p", patch)
        refused["update"] += out.returncode != 0 and "only by the Bindery controller" in out.stderr
        out = as_(cluster, USER, namespace, "delete", "lease", name)
        refused["delete"] += out.returncode != 0 and "only by the Bindery controller" in out.stderr
    assert refused == {"create": ATTEMPTS, "update": ATTEMPTS, "delete": ATTEMPTS}
    held = json.loads(cluster.kubectl("get", "lease", name, "-n", namespace, "-o", "json").stdout)
    assert held["spec"]["holderIdentity"] == f"{namespace}/a"
    # The controller itself releases it; mallory's own Leases stay hers to write.
    gone = as_(cluster, protected, namespace, "delete", "lease", name)
    assert gone.returncode == 0, gone.stderr
    own = as_(cluster, USER, namespace, "create", "-f", "-", doc=lease("my-lock", "me"))
    assert own.returncode == 0, own.stderr
