"""`bindery why` / `kubectl bindery why` against the real controller: what it explains agrees with
the status the controller wrote (state, every binding row with its candidates and messages, the
Ready condition, the work hold and the launch)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.integration.kube import (
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
