"""End to end in kind: the image built from the Dockerfile, installed with the Helm chart.

Builds the image, creates a kind cluster, loads the image, `helm install`s the chart (with the
starter ResourceTypes), applies the examples, and checks that the agents become Ready, that a
work URI moves from one agent to another (handoff) and that raising relaunchGeneration
relaunches a session.

Needs Docker (a reachable daemon) and kind; kubectl and helm come from PATH or from the local
control-plane build (harness/tools/build.sh). Where Docker or kind is missing the test is skipped
with the reason, unless BINDERY_E2E_REQUIRED=1 (set in CI), which turns the skip into a
failure.
BINDERY_E2E_KEEP=1 leaves the kind cluster running for a look afterwards.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from controller.domain.work import hold_name
from harness.cluster import build_script

pytestmark = pytest.mark.e2e

REPO = Path(__file__).resolve().parents[2]
EXAMPLES = REPO / "examples" / "manifests"
CLUSTER_NAME = "bindery-e2e"
IMAGE = f"bindery:e2e-{uuid.uuid4().hex[:8]}"
RELEASE_NS = "bindery-system"
DEMO_NS = "demo"
DEV_WORK = "github-issue://example/project/123"
DEV_NEXT_WORK = "github-issue://example/project/124"


def _missing(reason: str) -> None:
    if os.environ.get("BINDERY_E2E_REQUIRED") == "1":
        pytest.fail(f"BINDERY_E2E_REQUIRED=1 but {reason}")
    pytest.skip(reason)


def _tool(name: str) -> str | None:
    found = shutil.which(name)
    if found:
        return found
    proc = subprocess.run(
        ["bash", str(build_script()), "--print"],
        capture_output=True,
        text=True,
        check=False,
    )
    candidate = Path(proc.stdout.strip()) / name
    return str(candidate) if proc.returncode == 0 and candidate.exists() else None


def _docker_reachable(docker: str) -> bool:
    proc = subprocess.run([docker, "info"], capture_output=True, text=True, check=False)
    return proc.returncode == 0


@dataclass
class Kind:
    """A kind cluster and the tools that talk to it."""

    kubeconfig: Path
    kubectl_bin: str
    helm_bin: str

    def run(self, *argv: str, input: str | None = None, timeout: float = 600) -> str:
        proc = subprocess.run(
            list(argv),
            input=input,
            capture_output=True,
            text=True,
            check=False,
            timeout=timeout,
            env={**os.environ, "KUBECONFIG": str(self.kubeconfig)},
        )
        if proc.returncode != 0:
            raise AssertionError(
                f"{' '.join(argv)} exited {proc.returncode}:\n{proc.stdout[-3000:]}"
                f"\n{proc.stderr[-3000:]}"
            )
        return proc.stdout

    def kubectl(self, *args: str, input: str | None = None) -> str:
        return self.run(self.kubectl_bin, *args, input=input)

    def get(self, kind: str, name: str, namespace: str = DEMO_NS) -> dict[str, Any]:
        obj: dict[str, Any] = json.loads(
            self.kubectl("get", kind, name, "-n", namespace, "-o", "json")
        )
        return obj

    def wait_for(self, what: str, check: Any, timeout: float = 180.0) -> Any:
        deadline = time.monotonic() + timeout
        last: Any = None
        while time.monotonic() < deadline:
            try:
                last = check()
            except AssertionError as exc:  # not there yet
                last = str(exc)[:300]
            else:
                if last:
                    return last
            time.sleep(1)
        logs = self.run(
            self.kubectl_bin, "logs", "-n", RELEASE_NS, "deployment/bindery", "--tail=100"
        )
        raise AssertionError(f"timed out waiting for {what} (last: {last!r})\n{logs}")


@pytest.fixture(scope="module")
def kind_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Kind]:
    docker, kind = shutil.which("docker"), shutil.which("kind")
    if docker is None:
        _missing("Docker is not installed: the kind end-to-end test builds the image with it")
    assert docker is not None
    if not _docker_reachable(docker):
        _missing("the Docker daemon is not reachable (`docker info` failed)")
    if kind is None:
        _missing("kind is not installed (https://kind.sigs.k8s.io)")
    assert kind is not None
    kubectl, helm = _tool("kubectl"), _tool("helm")
    if kubectl is None or helm is None:
        _missing("kubectl and helm are needed (on PATH, or built by `make control-plane`)")
    assert kubectl is not None
    assert helm is not None

    kubeconfig = tmp_path_factory.mktemp("kind") / "kubeconfig"
    subprocess.run([kind, "delete", "cluster", "--name", CLUSTER_NAME], check=False)
    subprocess.run(
        [
            kind,
            "create",
            "cluster",
            "--name",
            CLUSTER_NAME,
            "--kubeconfig",
            str(kubeconfig),
            "--wait",
            "180s",
        ],
        check=True,
    )
    try:
        subprocess.run([docker, "build", "-t", IMAGE, str(REPO)], check=True)
        subprocess.run([kind, "load", "docker-image", IMAGE, "--name", CLUSTER_NAME], check=True)
        yield Kind(kubeconfig, kubectl, helm)
    finally:
        if os.environ.get("BINDERY_E2E_KEEP") != "1":
            subprocess.run([kind, "delete", "cluster", "--name", CLUSTER_NAME], check=False)


@pytest.fixture(scope="module")
def installed(kind_cluster: Kind) -> Kind:
    repository, tag = IMAGE.split(":")
    kind_cluster.run(
        kind_cluster.helm_bin, "install", "bindery", str(REPO / "helm" / "bindery"),
        "--namespace", RELEASE_NS, "--create-namespace",
        "--set", f"image.repository={repository}", "--set", f"image.tag={tag}",
        "--set", "image.pullPolicy=Never",
        "--set", "defaultResourceTypes.enabled=true",
        "--set", "logLevel=DEBUG",
        "--wait", "--timeout", "5m",
    )  # fmt: skip
    kind_cluster.kubectl("create", "namespace", DEMO_NS)
    for name in ("10-resources.yaml", "20-tools.yaml", "30-agents.yaml"):
        kind_cluster.kubectl("apply", "-n", DEMO_NS, "-f", str(EXAMPLES / name))
    return kind_cluster


def _state(obj: dict[str, Any]) -> str:
    st = obj.get("status") or {}
    if st.get("observedGeneration") != obj["metadata"]["generation"]:
        return ""
    return str(st.get("state", ""))


def _in_state(k: Kind, agent: str, expected: str) -> dict[str, Any] | None:
    obj = k.get("agentspec", agent)
    return obj if _state(obj) == expected else None


def _resources(obj: dict[str, Any]) -> list[dict[str, str]]:
    return list(obj["spec"].get("resources") or [])


def _patch_resources(k: Kind, agent: str, resources: list[dict[str, str]]) -> None:
    patch = json.dumps({"spec": {"resources": resources}})
    k.kubectl("patch", "agentspec", agent, "-n", DEMO_NS, "--type=merge", "-p", patch)


def test_the_chart_runs_the_image_and_the_examples_become_ready(installed: Kind) -> None:
    k = installed
    deployment = k.get("deployment", "bindery", RELEASE_NS)
    pod_spec = deployment["spec"]["template"]["spec"]
    assert pod_spec["containers"][0]["image"] == IMAGE
    assert pod_spec["securityContext"]["runAsNonRoot"] is True
    k.kubectl(
        "wait", "-n", DEMO_NS, "agentspec", "--all", "--for=condition=Ready", "--timeout=180s"
    )
    for name in ("dev", "reviewer"):
        assert _state(k.get("agentspec", name)) == "Working"
    assert k.get("lease", hold_name(DEV_WORK))["spec"]["holderIdentity"] == f"{DEMO_NS}/dev"
    session = k.get("statefulset", "reviewer-session")
    assert (
        session["spec"]["template"]["metadata"]["annotations"]["bindery.dev/launch-generation"]
        == "1"
    )


def test_a_work_uri_is_handed_off_from_one_agent_to_another(installed: Kind) -> None:
    k = installed
    k.wait_for("dev to hold its work", lambda: _state(k.get("agentspec", "dev")) == "Working")
    reviewer = k.get("agentspec", "reviewer")
    asks = [r for r in _resources(reviewer) if r["name"] != "work"]
    asks.append({"name": "work", "tag": "github-issue", "uri": DEV_WORK})
    _patch_resources(k, "reviewer", asks)
    waiting = k.wait_for(
        "reviewer to wait for dev",
        lambda: _in_state(k, "reviewer", "Waiting"),
    )
    assert waiting["status"]["work"]["waitingFor"] == {"namespace": DEMO_NS, "name": "dev"}

    # dev moves on to another issue: it lets go of its old work URI, and only then does the
    # reviewer acquire it (A -> no holder -> B).
    dev = k.get("agentspec", "dev")
    moved = [r for r in _resources(dev) if r["name"] != "work"]
    moved.append({"name": "work", "tag": "github-issue", "uri": DEV_NEXT_WORK})
    _patch_resources(k, "dev", moved)
    taken = k.wait_for(
        "reviewer to take the work",
        lambda: _in_state(k, "reviewer", "Working"),
    )
    assert taken["status"]["work"]["uri"] == DEV_WORK
    lease = k.get("lease", hold_name(DEV_WORK))
    assert lease["spec"]["holderIdentity"] == f"{DEMO_NS}/reviewer"
    k.wait_for("dev to hold its next work", lambda: _state(k.get("agentspec", "dev")) == "Working")
    bindings = json.loads(k.get("configmap", "dev-bindings")["data"]["bindings.json"])
    assert DEV_WORK not in json.dumps(bindings)


def test_raising_relaunch_generation_relaunches_the_session(installed: Kind) -> None:
    k = installed
    k.kubectl(
        "patch", "agentspec", "reviewer", "-n", DEMO_NS, "--type=merge",
        "-p", json.dumps({"spec": {"relaunchGeneration": 2}}),
    )  # fmt: skip

    def relaunched() -> dict[str, Any] | None:
        obj = k.get("agentspec", "reviewer")
        st = obj.get("status") or {}
        return obj if st.get("observedLaunchGeneration") == 2 else None

    obj = k.wait_for("the reviewer's session to be relaunched", relaunched)
    assert obj["status"]["desiredLaunchGeneration"] == 2
    session = k.get("statefulset", "reviewer-session")
    assert (
        session["spec"]["template"]["metadata"]["annotations"]["bindery.dev/launch-generation"]
        == "2"
    )
    logs = k.kubectl("logs", "-n", RELEASE_NS, "deployment/bindery")
    assert "Forbidden" not in logs, "the chart's RBAC refused a call:\n" + logs[-3000:]
