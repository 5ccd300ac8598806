"""Bindings documents for the MCP adapter's tests, delivered as the delivery sidecar does."""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path
from typing import Any

AGENT = {"namespace": "a", "name": "dev"}
WORK_URI = "github-issue://acme/app/123"
FENCE = {"uid": "3f1c7c51-0c4e-4f7a-9a43-9a2b3c4d5e6f", "resourceVersion": "4711"}


def document(n: int, *, work: bool = True, tools: list[dict[str, Any]] | None = None) -> str:
    """The n-th document of a series (each with other bytes): a ``src`` binding whose URI
    changes with n, a ``notes`` binding that never changes, and, with ``work``, the work item
    held under :data:`FENCE`."""
    resources: list[dict[str, Any]] = [
        {"name": "src", "tag": "vcs", "uri": f"git://acme/app/r{n}", "state": "Bound"},
        {
            "name": "notes",
            "tag": "notes",
            "uri": "worktree://acme/app",
            "state": "Bound",
            "resource": {"uri": "worktree://acme/app", "type": "worktree", "name": "app-tree"},
        },
    ]
    if work:
        resources.append(
            {
                "name": "work",
                "tag": "issue",
                "uri": WORK_URI,
                "state": "Bound",
                "resource": {
                    "uri": WORK_URI,
                    "type": "github-issue",
                    "alias": "login-bug",
                    "name": "issue-123",
                    "namespace": "a",
                },
                "hold": FENCE,
            }
        )
    doc = {
        "apiVersion": "bindery.dev/v1alpha1",
        "kind": "Bindings",
        "agent": AGENT,
        "resources": resources,
        "tools": tools or [],
    }
    return json.dumps(doc, indent=2, sort_keys=True, ensure_ascii=False) + "\n"


def deliver(path: Path, text: str) -> None:
    """Replace the bindings file as the delivery sidecar does: temp file, then rename."""
    temp = path.with_name(f".{path.name}.tmp")
    temp.write_text(text, encoding="utf-8")
    os.replace(temp, path)


def sha(text: str) -> str:
    return "sha256:" + hashlib.sha256(text.encode()).hexdigest()


def read_ack(path: Path) -> dict[str, Any]:
    record: dict[str, Any] = json.loads(path.read_text())
    return record
