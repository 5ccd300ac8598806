"""What `make run` runs, read from make itself (its variables and the manifests it applies): the
ports a second checkout can change, the banner's word on the fake node, and the examples the real
node can run. No cluster: the manifests' acceptance by the API server is tests/integration's."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

REPO = Path(__file__).resolve().parents[2]

pytestmark = pytest.mark.skipif(shutil.which("make") is None, reason="needs GNU make")


def make(*args: str) -> str:
    proc = subprocess.run(
        ["make", "-s", "--no-print-directory", "--eval", "print-%: ; @echo '$($*)'", *args],
        cwd=REPO,
        capture_output=True,
        text=True,
        check=True,
    )
    return proc.stdout.strip()


def docs(text: str) -> list[dict[str, Any]]:
    return [d for d in yaml.safe_load_all(text) if isinstance(d, dict)]


def test_the_ports_are_variables_with_the_documented_defaults() -> None:
    default = make("print-RUN_CONTROLLER")
    assert "--liveness=http://127.0.0.1:8080/healthz --metrics-port 9090" in default
    moved = make("print-RUN_CONTROLLER", "LIVENESS_PORT=18080", "METRICS_PORT=19090")
    assert "--liveness=http://127.0.0.1:18080/healthz --metrics-port 19090" in moved
    readme = (REPO / "README.md").read_text()
    assert "make run LIVENESS_PORT=18080 METRICS_PORT=19090" in readme


def test_the_banner_says_what_the_fake_node_hides_and_points_to_the_real_one() -> None:
    note = make("print-RUN_NOTE")
    assert "no process runs" in note
    assert "handoffs are immediate" in note
    assert "kubectl logs" in note
    assert "make run KUBELET=1" in note
    assert "--unacknowledged-release-seconds 0" in make("print-RUN_CONTROLLER")
    assert make("print-RUN_NOTE", "KUBELET=1") == ""


def test_the_real_node_runs_the_examples_on_the_image_it_has() -> None:
    plain = docs(make("run-examples"))
    files = [d for f in sorted((REPO / "examples/manifests").glob("*.yaml")) for d in docs(
        f.read_text()
    )]  # fmt: skip
    assert plain == files  # on the fake node: the examples as they are
    real = docs(make("run-examples", "KUBELET=1"))
    assert len(real) == len(plain)
    runtimes = [d["spec"]["runtime"] for d in real if d["kind"] == "AgentSpec" and "runtime" in (
        d["spec"]
    )]  # fmt: skip
    assert runtimes, "no example agent has a runtime"
    assert {r["image"] for r in runtimes} == {"localhost/bindery:dev"}
    # Nothing else changes: the plain examples stay valid for real clusters.
    for before, after in zip(plain, real, strict=True):
        same = after
        if before["kind"] == "AgentSpec" and "runtime" in before["spec"]:
            same = {**after, "spec": {**after["spec"], "runtime": before["spec"]["runtime"]}}
        assert same == before
