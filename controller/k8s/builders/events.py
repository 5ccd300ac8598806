"""Events: the `events.k8s.io/v1` Event Bindery posts about an object."""

from __future__ import annotations

from typing import Any


def event(
    regarding: dict[str, Any],
    *,
    reason: str,
    note: str,
    warning: bool,
    instance: str,
    event_time: str,
    suffix: str,
) -> dict[str, Any]:
    """An ``events.k8s.io/v1`` Event about ``regarding`` (an object body), as Bindery posts it."""
    md = regarding.get("metadata") or {}
    return {
        "apiVersion": "events.k8s.io/v1",
        "kind": "Event",
        "metadata": {
            "name": f"{md.get('name')}.{suffix}",
            "namespace": md.get("namespace") or "default",
        },
        "eventTime": event_time,
        "reportingController": "bindery.dev/controller",
        "reportingInstance": instance,
        "action": "Reconcile",
        "reason": reason,
        "note": note[:1024],
        "type": "Warning" if warning else "Normal",
        "regarding": {
            "apiVersion": regarding.get("apiVersion"),
            "kind": regarding.get("kind"),
            "name": md.get("name"),
            "namespace": md.get("namespace", ""),
            "uid": md.get("uid"),
        },
    }
