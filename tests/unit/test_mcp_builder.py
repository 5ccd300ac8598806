"""The session pod with the MCP adapter (``spec.runtime.mcp``): its sidecar, the runtime's
``BINDERY_MCP_URL``, and the trajectory (pure builders; the pod is pinned by a golden file).

Regenerate the golden file after an intended change with::

    BINDERY_UPDATE_GOLDEN=1 .venv/bin/pytest tests/unit/test_mcp_builder.py
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest
from pydantic import ValidationError

from controller.domain.launch import Launched, plan_launch, trajectory_hash
from controller.domain.models import AgentObject, AgentSpecSpec, McpSettings, ObjectMeta, Runtime
from controller.k8s import builders
from controller.k8s.builders.mcp import MCP_CONTAINER, MCP_URL_ENV, mcp_url

GOLDEN = Path(__file__).parent / "golden" / "session_workload_mcp.json"
UPDATE = os.environ.get("BINDERY_UPDATE_GOLDEN") == "1"
IMAGE = "localhost/bindery:dev"
RUNTIME = Runtime.model_validate(
    {"image": "ghcr.io/example/agent:1.4.2", "model": "claude-sonnet", "mcp": {}}
)
AGENT = AgentObject(
    meta=ObjectMeta(name="coder", namespace="team-a", uid="6f1c2a9e-3b1d-4c55-9a7e-0d2f5b8c1e44"),
    spec=AgentSpecSpec.model_validate({"runtime": RUNTIME.model_dump(by_alias=True)}),
)


def workload(runtime: Runtime = RUNTIME, *, delivery: bool = True) -> dict[str, Any]:
    return builders.session_workload(
        AGENT,
        runtime,
        launch_generation=1,
        trajectory_hash=trajectory_hash(runtime),
        launched_at="2026-12-01T06:30:00Z",
        delivery=builders.SessionDelivery(image=IMAGE) if delivery else None,
    )


def pod(runtime: Runtime = RUNTIME, *, delivery: bool = True) -> dict[str, Any]:
    spec: dict[str, Any] = workload(runtime, delivery=delivery)["spec"]["template"]["spec"]
    return spec


def sidecar(spec: dict[str, Any]) -> dict[str, Any]:
    found: list[dict[str, Any]] = [
        c for c in spec.get("initContainers", []) if c["name"] == MCP_CONTAINER
    ]
    assert len(found) == 1, found
    return found[0]


def env(container: dict[str, Any]) -> dict[str, Any]:
    return {e["name"]: e.get("value", e.get("valueFrom")) for e in container["env"]}


def test_golden() -> None:
    actual = builders.canonical(workload())
    if UPDATE:
        GOLDEN.write_text(actual, encoding="utf-8")
    assert GOLDEN.exists(), f"{GOLDEN} is missing; regenerate with BINDERY_UPDATE_GOLDEN=1"
    assert actual == GOLDEN.read_text(encoding="utf-8"), (
        "the session workload with mcp differs from its golden file; if the change is intended, "
        "regenerate with BINDERY_UPDATE_GOLDEN=1 and review the diff"
    )


def test_the_adapter_is_a_native_sidecar_after_delivery_on_the_loopback() -> None:
    spec = pod()
    names = [c["name"] for c in spec["initContainers"]]
    assert names == [builders.DELIVERY_CONTAINER, MCP_CONTAINER]
    container = sidecar(spec)
    assert container["restartPolicy"] == "Always"
    assert container["image"] == IMAGE
    assert container["command"] == ["python", "-m", "controller.mcp", "serve"]
    assert "--listen=127.0.0.1:7411" in container["args"]
    assert "hostNetwork" not in spec
    probe = " ".join(container["startupProbe"]["exec"]["command"])
    assert "('127.0.0.1', 7411)" in probe


def test_the_runtime_gets_the_url() -> None:
    (runtime,) = pod()["containers"]
    assert env(runtime)[MCP_URL_ENV] == "http://127.0.0.1:7411/mcp"
    moved = Runtime.model_validate({"image": "img", "mcp": {"port": 9000}})
    (runtime,) = pod(moved)["containers"]
    assert (
        env(runtime)[MCP_URL_ENV] == mcp_url(McpSettings(port=9000)) == "http://127.0.0.1:9000/mcp"
    )
    assert "--listen=127.0.0.1:9000" in sidecar(pod(moved))["args"]


def test_a_user_variable_of_the_same_name_does_not_replace_it() -> None:
    runtime = Runtime.model_validate(
        {"image": "img", "mcp": {}, "env": [{"name": MCP_URL_ENV, "value": "http://elsewhere"}]}
    )
    (container,) = pod(runtime)["containers"]
    values = [e["value"] for e in container["env"] if e["name"] == MCP_URL_ENV]
    assert values == ["http://127.0.0.1:7411/mcp"]


def test_it_mounts_the_document_read_only_the_ack_directory_and_the_pod_bound_token() -> None:
    mounts = {m["name"]: m for m in sidecar(pod())["volumeMounts"]}
    assert mounts["bindings"]["readOnly"] is True
    assert mounts["bindery-ack"].get("readOnly") is not True
    assert mounts["bindery-token"] == {
        "name": "bindery-token",
        "mountPath": "/var/run/secrets/kubernetes.io/serviceaccount",
        "readOnly": True,
    }
    volumes = {v["name"] for v in pod()["volumes"]}
    assert set(mounts) <= volumes


def test_it_runs_restricted_like_the_delivery_sidecar() -> None:
    spec = pod()
    (delivery,) = [c for c in spec["initContainers"] if c["name"] == builders.DELIVERY_CONTAINER]
    assert sidecar(spec)["securityContext"] == delivery["securityContext"]
    security = sidecar(spec)["securityContext"]
    assert security["allowPrivilegeEscalation"] is False
    assert security["capabilities"] == {"drop": ["ALL"]}
    assert security["runAsNonRoot"] is True
    assert security["seccompProfile"] == {"type": "RuntimeDefault"}
    assert security["readOnlyRootFilesystem"] is True


def test_it_tells_the_adapter_where_it_runs() -> None:
    values = env(sidecar(pod()))
    assert values["POD_IP"] == {"fieldRef": {"fieldPath": "status.podIP"}}
    assert values["HOST_IP"] == {"fieldRef": {"fieldPath": "status.hostIP"}}


def test_without_mcp_or_without_delivery_there_is_no_adapter() -> None:
    plain = Runtime(image="img")
    assert [c["name"] for c in pod(plain)["initContainers"]] == [builders.DELIVERY_CONTAINER]
    assert MCP_URL_ENV not in env(pod(plain)["containers"][0])
    bare = pod(delivery=False)
    assert "initContainers" not in bare
    assert MCP_URL_ENV not in env(bare["containers"][0])


@pytest.mark.parametrize("port", [0, 80, 1023, 65536])
def test_a_port_outside_1024_to_65535_is_refused(port: int) -> None:
    with pytest.raises(ValidationError, match="port"):
        Runtime.model_validate({"image": "img", "mcp": {"port": port}})


def test_mcp_is_part_of_the_trajectory() -> None:
    plain = Runtime(image="img")
    on = Runtime.model_validate({"image": "img", "mcp": {}})
    default_port = Runtime.model_validate({"image": "img", "mcp": {"port": 7411}})
    moved = Runtime.model_validate({"image": "img", "mcp": {"port": 7412}})
    hashes = {trajectory_hash(r) for r in (plain, on, moved)}
    assert len(hashes) == 3
    assert trajectory_hash(on) == trajectory_hash(default_port)


def test_enabling_it_is_drift_until_a_relaunch() -> None:
    plain = Runtime(image="img")
    on = Runtime.model_validate({"image": "img", "mcp": {}})
    launched = Launched(generation=0, trajectory_hash=trajectory_hash(plain))
    assert plan_launch(on, 0, launched).drift
    assert not plan_launch(plain, 0, launched).drift
    assert plan_launch(on, 1, launched).action.value == "Relaunch"
