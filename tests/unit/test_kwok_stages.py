"""The fake node's stages: kwok's fast set, with a pod-delete stage that deletes a pod once."""

from __future__ import annotations

from pathlib import Path

import yaml

from harness import kwok_stages

SHIPPED = """\
---
apiVersion: kwok.x-k8s.io/v1alpha1
kind: Stage
metadata:
  name: pod-ready
spec:
  resourceRef: {apiGroup: v1, kind: Pod}
  next: {statusTemplate: "phase: Running"}
---
apiVersion: kwok.x-k8s.io/v1alpha1
kind: Stage
metadata:
  name: pod-delete
spec:
  resourceRef: {apiGroup: v1, kind: Pod}
  selector:
    matchExpressions:
    - key: '.metadata.deletionTimestamp'
      operator: 'Exists'
  next:
    delete: true
"""


def test_the_shipped_pod_delete_stage_is_replaced_and_the_others_kept() -> None:
    out = kwok_stages.stages(SHIPPED)
    assert [s["metadata"]["name"] for s in out] == ["pod-ready", "pod-delete"]
    assert out[0]["spec"]["next"] == {"statusTemplate": "phase: Running"}
    assert out[1] == kwok_stages.POD_DELETE_STAGE


def test_the_pod_delete_stage_skips_a_pod_kwok_already_deleted() -> None:
    """kwok's own delete (grace 0) is a MODIFIED event of a still-terminating pod: matching it
    again queued a second delete by name, which could land on the StatefulSet's new pod."""
    selector = kwok_stages.POD_DELETE_STAGE["spec"]["selector"]["matchExpressions"]
    assert {"key": ".metadata.deletionTimestamp", "operator": "Exists"} in selector
    assert {
        "key": ".metadata.deletionGracePeriodSeconds != 0",
        "operator": "In",
        "values": ["true"],
    } in selector
    assert kwok_stages.POD_DELETE_STAGE["spec"]["next"] == {"delete": True}


def test_the_config_is_written_beside_the_cluster_data(tmp_path: Path) -> None:
    bin_dir, data_dir = tmp_path / "bin", tmp_path / "data"
    bin_dir.mkdir()
    data_dir.mkdir()
    (bin_dir / "kwok-stages.yaml").write_text(SHIPPED)
    path = kwok_stages.write_config(bin_dir, data_dir)
    assert path.parent == data_dir
    assert list(yaml.safe_load_all(path.read_text())) == kwok_stages.stages(SHIPPED)
    assert (bin_dir / "kwok-stages.yaml").read_text() == SHIPPED  # the cache is left as built
