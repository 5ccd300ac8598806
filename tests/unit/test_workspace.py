"""The session's workspace: its spec's rules, and what the controller may change on its claim."""

from __future__ import annotations

from typing import Any

import pytest
from pydantic import ValidationError

from controller.domain import rules
from controller.domain import workspace as ws
from controller.domain.models import Runtime, Workspace


def runtime(**workspace: Any) -> Runtime:
    return Runtime.model_validate({"image": "x", "workspace": {"size": "1Gi", **workspace}})


def claim(size: str = "1Gi", storage_class: str = "standard", **status: Any) -> dict[str, Any]:
    return {
        "metadata": {"name": "coder-workspace"},
        "spec": {"storageClassName": storage_class, "resources": {"requests": {"storage": size}}},
        "status": status,
    }


def test_defaults() -> None:
    workspace = runtime().workspace
    assert workspace is not None
    assert (workspace.mount_path, workspace.reclaim_policy, workspace.storage_class_name) == (
        "/workspace",
        "Delete",
        None,
    )


@pytest.mark.parametrize(
    ("field", "value", "says"),
    [
        ("size", "0", "above zero"),
        ("size", "-1Gi", "above zero"),
        ("size", "lots", "above zero"),
        ("mountPath", "workspace", "absolute path"),
        ("mountPath", "/var/run/bindery", "reads its bindings"),
        ("mountPath", "/var/run/bindery/work", "reads its bindings"),
        ("mountPath", "/var/run/bindery-ack", "reads its bindings"),
        ("mountPath", "/a/../b", "'..'"),
        ("storageClassName", "Fast_SSD", "StorageClass name"),
        ("reclaimPolicy", "Recycle", "'Delete' or 'Retain'"),
    ],
)
def test_refused(field: str, value: str, says: str) -> None:
    with pytest.raises(ValidationError, match=says):
        runtime(**{field: value})


def test_the_workspace_cannot_share_a_mount_path_with_a_volume() -> None:
    with pytest.raises(ValidationError, match="also a volumeMounts path"):
        Runtime.model_validate(
            {
                "image": "x",
                "workspace": {"size": "1Gi", "mountPath": "/data"},
                "volumes": [{"name": "tmp", "emptyDir": {}}],
                "volumeMounts": [{"name": "tmp", "mountPath": "/data"}],
            }
        )


@pytest.mark.parametrize(
    ("value", "number"),
    [("1Gi", 2**30), ("500Mi", 500 * 2**20), ("1G", 10**9), ("1.5Gi", 3 * 2**29), ("1e3", 1000)],
)
def test_quantity_value(value: str, number: int) -> None:
    assert rules.quantity_value(value) == number


@pytest.mark.parametrize(
    ("have", "want", "change"),
    [
        ("1Gi", "1024Mi", ws.SizeChange.SAME),
        ("1Gi", "2Gi", ws.SizeChange.GROW),
        ("2Gi", "1Gi", ws.SizeChange.SHRINK),
    ],
)
def test_size_change(have: str, want: str, change: ws.SizeChange) -> None:
    assert ws.size_change(claim(have), Workspace(size=want)) is change


def test_a_shrink_and_a_changed_class_are_reported_never_applied() -> None:
    workspace = Workspace(size="1Gi", storage_class_name="fast")
    message = ws.unchangeable(claim("2Gi"), workspace, ws.SizeChange.SHRINK)
    assert "never shrinks" in message
    assert "class cannot change" in message
    assert ws.unchangeable(claim(), Workspace(size="1Gi"), ws.SizeChange.SAME) == ""


def test_status() -> None:
    bound = claim(phase="Bound", capacity={"storage": "1Gi"})
    view = ws.WorkspaceView(bound, Workspace(size="1Gi"))
    assert view.as_status() == {
        "claimName": "coder-workspace",
        "phase": "Bound",
        "capacity": "1Gi",
        "reclaimPolicy": "Delete",
    }
    retained = ws.WorkspaceView(claim(), Workspace(size="1Gi", reclaim_policy="Retain"))
    st = retained.as_status()
    assert st["phase"] == "Pending"
    assert "left when the agent is deleted" in st["message"]


def test_a_resize_asks_for_the_desired_size() -> None:
    patch = ws.resize_patch(Workspace(size="5Gi"))
    assert patch == {"spec": {"resources": {"requests": {"storage": "5Gi"}}}}


def test_a_growth_the_class_cannot_expand_is_reported_with_the_class() -> None:
    message = ws.not_expandable(claim("1Gi"), Workspace(size="5Gi"), "standard")
    assert message.startswith("claim coder-workspace requests 1Gi; growing it to 5Gi")
    assert message.endswith("and standard does not")
    assert "and (none) does not" in ws.not_expandable(claim(), Workspace(size="5Gi"), "")


def test_an_integer_size_counts_bytes() -> None:
    assert rules.quantity_value(2**31) == 2**31
    workspace = runtime(size=2**31).workspace
    assert workspace is not None
    assert ws.size_change(claim("2Gi"), workspace) is ws.SizeChange.SAME
    assert ws.size_change(claim("1Gi"), workspace) is ws.SizeChange.GROW
    with pytest.raises(ValidationError, match="above zero"):
        runtime(size=0)
