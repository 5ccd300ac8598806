"""The store's one freshness rule, for watch events and write responses alike."""

from __future__ import annotations

from typing import Any

from controller.k8s.api import LEASES
from controller.reconcile.store import Store


def lease(rv: int, uid: str = "u1") -> dict[str, Any]:
    return {"metadata": {"name": "h", "namespace": "ns", "uid": uid, "resourceVersion": str(rv)}}


def test_only_a_newer_version_is_stored() -> None:
    s = Store()
    first = lease(5)
    assert s.put(LEASES, first) is None  # nothing was stored before
    older, same = lease(4), lease(5)
    assert s.put(LEASES, older) is older  # rejected: returned as is
    assert s.put(LEASES, same) is same
    assert s.put(LEASES, lease(6)) == first
    assert s.get(LEASES, "ns/h")["metadata"]["resourceVersion"] == "6"  # type: ignore[index]


def test_a_deleted_incarnation_never_comes_back_but_a_new_one_does() -> None:
    s = Store()
    s.put(LEASES, lease(5))
    assert s.delete(LEASES, lease(6)) is not None
    assert s.get(LEASES, "ns/h") is None
    stale = lease(5)
    assert s.put(LEASES, stale) is stale
    assert s.get(LEASES, "ns/h") is None
    s.put(LEASES, lease(7, uid="u2"))
    assert s.get(LEASES, "ns/h") is not None


def test_deleting_one_incarnation_keeps_the_next_of_the_same_name() -> None:
    s = Store()
    s.put(LEASES, lease(8, uid="u2"))
    assert s.delete(LEASES, lease(5, uid="u1")) is None
    assert s.get(LEASES, "ns/h")["metadata"]["uid"] == "u2"  # type: ignore[index]


def test_managed_fields_are_dropped() -> None:
    s = Store()
    body = lease(1)
    body["metadata"]["managedFields"] = [{"manager": "kubectl"}]
    s.put(LEASES, body)
    assert "managedFields" not in s.get(LEASES, "ns/h")["metadata"]  # type: ignore[index]
