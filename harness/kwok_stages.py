"""The Stages kwok's fake node plays: kwok's ``fast`` set, with a pod-delete stage that deletes
each terminating pod once.

kwok's own ``pod/fast/pod-delete`` stage matches every pod with a ``deletionTimestamp`` and
deletes it by name with grace period 0, without a UID precondition. That delete is itself a
write the stage matches again: the API server first shortens the pod's grace period to 0 (a
MODIFIED event, the pod still terminating) and only then removes it, so kwok queues a second
delete of the same name. When the pod's StatefulSet recreates it (same name, new UID) before
that second delete reaches the API server, the delete lands on the successor: a StatefulSet
pod replaced once is replaced twice, and a second successor is created (the audit log of issue
25's flaky revert test shows exactly this, kwok's user agent deleting the new pod).

The stage here matches only a pod whose grace period is not yet 0. A pod whose grace period is
0 needs nothing from a node: the API server removes it as soon as it has no finalizers (at once,
or when the last finalizer goes).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

POD_DELETE = "pod-delete"

POD_DELETE_STAGE: dict[str, Any] = {
    "apiVersion": "kwok.x-k8s.io/v1alpha1",
    "kind": "Stage",
    "metadata": {"name": POD_DELETE},
    "spec": {
        "resourceRef": {"apiGroup": "v1", "kind": "Pod"},
        "selector": {
            "matchExpressions": [
                {"key": ".metadata.deletionTimestamp", "operator": "Exists"},
                # Not the pod once kwok's own delete (grace 0) has been applied to it.
                {
                    "key": ".metadata.deletionGracePeriodSeconds != 0",
                    "operator": "In",
                    "values": ["true"],
                },
            ]
        },
        "next": {"delete": True},
    },
}


def stages(shipped: str) -> list[dict[str, Any]]:
    """``shipped`` (the build cache's ``kwok-stages.yaml``) with its pod-delete stage replaced."""
    kept = [
        doc
        for doc in yaml.safe_load_all(shipped)
        if doc and (doc.get("metadata") or {}).get("name") != POD_DELETE
    ]
    return [*kept, POD_DELETE_STAGE]


def write_config(bin_dir: Path, data_dir: Path) -> Path:
    """Write the fake node's stages into ``data_dir``; the path to pass as kwok's ``--config``."""
    path = data_dir / "kwok-stages.yaml"
    shipped = (bin_dir / "kwok-stages.yaml").read_text()
    path.write_text(yaml.safe_dump_all(stages(shipped), sort_keys=False))
    return path
