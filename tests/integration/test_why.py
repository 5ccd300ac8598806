"""`bindery why` / `kubectl bindery why` against the real controller: what it explains agrees with
the status the controller wrote (state, every binding row with its candidates and messages, the
Ready condition, the work hold and the launch)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.integration.kube import (
    REPO_ROOT,
    agent,
    apply,
    apply_examples,
    condition,
    explained,
    must_get,
    settle,
    state,
    wait_status,
    why,
    work,
)
from tests.support import Cluster, ControllerProcess

pytestmark = pytest.mark.integration

DEV_WORK = "github-issue://example/project/123"
PLUGIN = Path(sys.executable).parent / "kubectl-bindery"


def _ready(conditions: list[dict[str, Any]]) -> tuple[str, str, str]:
    found = next(c for c in conditions if c["type"] == "Ready")
    return found["status"], found["reason"], found["message"]


def test_why_agrees_with_the_status_the_controller_wrote(
    cluster: Cluster, namespace: str, controller: ControllerProcess
) -> None:
    apply_examples(cluster, namespace)
    wait_status(cluster, "agentspec", namespace, "dev", state("Working"))
    apply(
        cluster,
        namespace,
        agent("rival", resources=[work(DEV_WORK)]),
        agent(
            "broken",
            resources=[
                work("github-issue://example/project/9"),
                work("github-issue://x/1") | {"name": "other"},
            ],
            tools=[{"name": "comment-on-issue"}, {"name": "no-such-tool"}],
        ),
    )
    wait_status(cluster, "agentspec", namespace, "rival", state("Waiting"))
    wait_status(cluster, "agentspec", namespace, "broken", state("Error"))
    wait_status(
        cluster, "agentspec", namespace, "reviewer",
        lambda o: (o.get("status") or {}).get("observedLaunchGeneration") == 1,
    )  # fmt: skip
    settle(cluster, namespace)

    for name in ("dev", "reviewer", "rival", "broken"):
        obj = must_get(cluster, "agentspec", namespace, name)
        st = obj["status"]
        doc = explained(cluster, namespace, name)
        assert doc["agent"] == f"{namespace}/{name}"
        assert doc["controller"]["observedGeneration"] == obj["metadata"]["generation"]
        assert doc["state"] == st["state"], name
        assert doc["bindings"] == st["bindings"], name
        assert doc["missingTools"] == st.get("missingTools", []), name
        assert _ready(doc["conditions"]) == _ready(st["conditions"]), name
        ready = condition(obj, "Ready")
        assert _ready(doc["controller"]["conditions"]) == (
            ready["status"], ready["reason"], ready["message"]
        )  # fmt: skip

    rival = explained(cluster, namespace, "rival")
    assert rival["work"]["holder"] == f"{namespace}/dev"
    assert rival["work"]["waitingFor"] == f"{namespace}/dev"
    rival_status = must_get(cluster, "agentspec", namespace, "rival")["status"]
    assert rival_status["work"]["waitingFor"] == {"namespace": namespace, "name": "dev"}
    dev = explained(cluster, namespace, "dev")
    assert [c["agent"] for c in dev["work"]["queue"]] == [f"{namespace}/rival"]

    reviewer = explained(cluster, namespace, "reviewer")
    rst = must_get(cluster, "agentspec", namespace, "reviewer")["status"]
    assert reviewer["session"]["launchedGeneration"] == rst["observedLaunchGeneration"]
    assert reviewer["session"]["launchedTrajectoryHash"] == rst["launchedTrajectoryHash"]
    assert reviewer["session"]["action"] == "Keep"
    assert any(e["reason"] == "Launched" for e in reviewer["events"])

    broken = explained(cluster, namespace, "broken")
    issue = next(b for b in broken["bindings"] if b["name"] == "comment-on-issue.issue")
    assert issue["state"] == "Error"
    assert {c["uri"] for c in issue["candidates"]} == {
        "github-issue://example/project/9", "github-issue://x/1",
    }  # fmt: skip
    text = why(cluster, namespace, "broken").stdout
    assert "candidate github-issue://x/1 (github-issue alias other)" in text
    assert "no-such-tool" in text
    assert "Last events" in text


def test_kubectl_plugin_and_a_missing_agent(
    cluster: Cluster, crds: list[str], namespace: str
) -> None:
    assert PLUGIN.exists(), f"{PLUGIN} is missing: reinstall the package (make venv)"
    apply(cluster, namespace, agent("idle"))
    env = {
        **os.environ,
        "KUBECONFIG": str(cluster.kubeconfig),
        "PATH": f"{PLUGIN.parent}:{os.environ.get('PATH', '')}",
    }
    proc = subprocess.run(
        [str(cluster.bin_dir / "kubectl"), "bindery", "why", "idle", "-n", namespace],
        capture_output=True, text=True, env=env, timeout=60, check=False,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    assert f"AgentSpec {namespace}/idle" in proc.stdout
    assert "Work: none (Idle)" in proc.stdout
    assert "controller: has not written a status yet" in proc.stdout  # no controller here

    missing = why(cluster, namespace, "nobody")
    assert missing.returncode == 1
    assert missing.stderr.strip() == (
        f"error: AgentSpec {namespace}/nobody not found; list the agents with "
        f"'kubectl get agentspecs.bindery.dev -n {namespace}'"
    )


READER_GROUP = "bindery-why-readers"
RBAC = "rbac.authorization.k8s.io"


def _reader_rbac(cluster: Cluster, namespace: str) -> str:
    """Group READER_GROUP may read everything in ``namespace`` (and the cluster's
    ResourceTypes); nothing elsewhere. The ClusterRole's name is returned, to be deleted."""
    role = f"why-reader-{namespace}"
    reads = {"apiGroups": ["*"], "resources": ["*"], "verbs": ["get", "list"]}
    types = {
        "apiGroups": ["bindery.dev"],
        "resources": ["resourcetypes"],
        "verbs": ["get", "list"],
    }
    group = {"kind": "Group", "name": READER_GROUP, "apiGroup": RBAC}
    rbac = f"{RBAC}/v1"
    docs = [
        {"apiVersion": rbac, "kind": "ClusterRole", "metadata": {"name": role}, "rules": [types]},
        {
            "apiVersion": rbac,
            "kind": "ClusterRoleBinding",
            "metadata": {"name": role},
            "roleRef": {
                "apiGroup": "rbac.authorization.k8s.io",
                "kind": "ClusterRole",
                "name": role,
            },
            "subjects": [group],
        },
        {
            "apiVersion": rbac,
            "kind": "Role",
            "metadata": {"name": "why-reader", "namespace": namespace},
            "rules": [reads],
        },
        {
            "apiVersion": rbac,
            "kind": "RoleBinding",
            "metadata": {"name": "why-reader", "namespace": namespace},
            "roleRef": {
                "apiGroup": "rbac.authorization.k8s.io",
                "kind": "Role",
                "name": "why-reader",
            },
            "subjects": [group],
        },
    ]
    cluster.kubectl(
        "apply", "-f", "-", input=json.dumps({"apiVersion": "v1", "kind": "List", "items": docs})
    )
    return role


def test_why_reads_as_the_impersonated_user(
    cluster: Cluster, crds: list[str], namespace: str, tmp_path: Path
) -> None:
    """`--as`/`--as-group` (also through kubectl's plugin) and the kubeconfig user's
    `as`/`as-groups` are honoured: a user who may read only its own team's namespace is refused
    another team's agent, and is shown its own."""
    other = f"{namespace}-other"
    cluster.kubectl("create", "namespace", other)
    role = _reader_rbac(cluster, namespace)
    try:
        apply(cluster, namespace, agent("mine"))
        apply(cluster, other, agent("theirs"))
        as_reader = ("--as", "alice", "--as-group", READER_GROUP)

        mine = why(cluster, namespace, "mine", *as_reader)
        assert mine.returncode == 0, mine.stderr
        assert f"AgentSpec {namespace}/mine" in mine.stdout
        theirs = why(cluster, other, "theirs", *as_reader)
        assert theirs.returncode == 1
        assert "forbidden" in theirs.stderr.lower()
        assert "alice" in theirs.stderr
        assert "Traceback" not in theirs.stderr
        assert "AgentSpec" not in theirs.stdout
        # The user alone (without the group) reads nothing: the group is sent too.
        alone = why(cluster, namespace, "mine", "--as", "alice")
        assert alone.returncode == 1
        assert "forbidden" in alone.stderr.lower()
        stray = why(cluster, namespace, "mine", "--as-group", READER_GROUP)
        assert stray.returncode == 2
        assert "--as-group needs --as" in stray.stderr

        # kubectl's plugin takes the same flags.
        env = {
            **os.environ,
            "KUBECONFIG": str(cluster.kubeconfig),
            "PATH": f"{PLUGIN.parent}:{os.environ.get('PATH', '')}",
        }
        kubectl = str(cluster.bin_dir / "kubectl")
        plugin = subprocess.run(
            [kubectl, "bindery", "why", "theirs", "-n", other, "--as=alice",
             f"--as-group={READER_GROUP}"],
            capture_output=True, text=True, env=env, timeout=60, check=False,
        )  # fmt: skip
        assert plugin.returncode == 1, plugin.stdout
        assert "forbidden" in plugin.stderr.lower()

        # The kubeconfig user's impersonation, as kubectl honours it.
        config = json.loads(cluster.kubeconfig.read_text())
        config["users"][0]["user"] |= {"as": "alice", "as-groups": [READER_GROUP]}
        impersonating = tmp_path / "kubeconfig"
        impersonating.write_text(json.dumps(config))
        by_config = {**os.environ, "KUBECONFIG": str(impersonating), "PYTHONPATH": str(REPO_ROOT)}
        for name, where, code in (("mine", namespace, 0), ("theirs", other, 1)):
            proc = subprocess.run(
                [sys.executable, "-m", "controller", "why", name, "-n", where],
                capture_output=True, text=True, env=by_config, timeout=60, check=False,
                cwd=REPO_ROOT,
            )  # fmt: skip
            assert proc.returncode == code, (name, proc.stdout, proc.stderr)
        kubectl_says = cluster.kubectl(
            "get", "agentspec", "theirs", "-n", other, f"--kubeconfig={impersonating}", check=False
        )
        assert kubectl_says.returncode != 0  # kubectl, given the same kubeconfig, agrees
    finally:
        cluster.kubectl("delete", "namespace", other, "--wait=false", check=False)
        cluster.kubectl("delete", "clusterrole,clusterrolebinding", role, check=False)
