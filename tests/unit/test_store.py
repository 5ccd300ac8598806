"""The store's one freshness rule, for watch events and write responses alike."""

from __future__ import annotations

import json
from typing import Any

import pytest

from controller.k8s.api import AGENTS, CONFIG_MAPS, LEASES, PODS
from controller.reconcile.compact import (
    SHARED_LENGTH,
    compact,
    data_of,
    freeze,
    status_of,
    thaw,
)
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


def agent_body(rv: int, status: dict[str, Any] | None = None) -> dict[str, Any]:
    """An agent as a watch delivers it: decoded from JSON, so no string is shared."""
    body = {
        "apiVersion": "bindery.dev/v1alpha1",
        "kind": "AgentSpec",
        "metadata": {
            "name": "a",
            "namespace": "ns",
            "uid": "u1",
            "resourceVersion": str(rv),
            "generation": 2,
            "labels": {"team": "t1"},
            "managedFields": [{"manager": "kubectl", "fieldsV1": {"f:spec": {}}}],
        },
        "spec": {"resources": [{"name": "repo", "uri": "git://example/repo"}]},
        "status": status
        if status is not None
        else {
            "observedGeneration": 2,
            "state": "Idle",
            "bindings": [{"name": "repo", "state": "Bound", "message": "é" + "x" * 300}],
            "conditions": [{"type": "Ready", "status": "True", "observedGeneration": 2}],
        },
    }
    return json.loads(json.dumps(body))  # type: ignore[no-any-return]


def test_a_stored_agent_keeps_its_status_frozen_equal_to_the_one_received() -> None:
    s = Store()
    body = agent_body(3)
    s.put(AGENTS, body)
    stored = s.get(AGENTS, "ns/a")
    assert stored is not None
    assert "status" not in stored
    assert isinstance(stored["status.z"], bytes)
    assert len(stored["status.z"]) < len(json.dumps(body["status"])) / 2
    assert s.status(AGENTS, "ns/a") == body["status"]
    assert status_of(stored) == body["status"]
    # everything else is as received, managedFields apart
    md = {k: v for k, v in body["metadata"].items() if k != "managedFields"}
    assert stored["metadata"] == md
    assert stored["spec"] == body["spec"]
    assert {k: v for k, v in stored.items() if k != "status.z"} == {
        **{k: v for k, v in body.items() if k != "status"},
        "metadata": md,
    }


def test_status_of_reads_a_received_body_and_nothing() -> None:
    body = agent_body(3)
    assert status_of(body) == body["status"]
    assert status_of(None) == {}
    assert status_of({"metadata": {}}) == {}
    assert status_of(compact({"metadata": {}, "status": {}}, frozen="status")) == {}
    assert Store().status(AGENTS, "ns/missing") == {}


def test_owned_kinds_keep_their_status_as_a_tree() -> None:
    s = Store()
    pod = {"metadata": {"name": "p", "namespace": "ns", "resourceVersion": "1"}}
    pod["status"] = {"phase": "Running"}
    s.put(PODS, pod)
    stored = s.get(PODS, "ns/p")
    assert stored is not None
    assert stored["status"] == {"phase": "Running"}
    assert s.status(PODS, "ns/p") == {"phase": "Running"}


def test_equal_short_strings_of_two_bodies_are_one_object_once_stored() -> None:
    s = Store()
    a, b = agent_body(3), agent_body(4)
    b["metadata"]["name"] = "b"
    assert a["spec"]["resources"][0]["uri"] is not b["spec"]["resources"][0]["uri"]
    s.put(AGENTS, a)
    s.put(AGENTS, b)
    first, second = s.get(AGENTS, "ns/a"), s.get(AGENTS, "ns/b")
    assert first is not None
    assert second is not None
    assert first["spec"]["resources"][0]["uri"] is second["spec"]["resources"][0]["uri"]
    assert first["metadata"]["labels"]["team"] is second["metadata"]["labels"]["team"]
    key_a = next(k for k in first["metadata"]["labels"])
    key_b = next(k for k in second["metadata"]["labels"])
    assert key_a is key_b


def test_a_long_string_is_kept_as_received() -> None:
    long = "y" * (SHARED_LENGTH + 1)
    body = json.loads(json.dumps({"metadata": {"name": "c"}, "data": {"f": long}}))
    out = compact(body)
    assert out["data"]["f"] is body["data"]["f"]
    assert out["data"]["f"] == long


def test_a_frozen_status_keeps_its_key_order_and_types() -> None:
    status = {"z": 1, "a": [True, None, 1.5, {"k": "v"}], "m": "ü"}
    assert thaw(freeze(status)) == status
    out = compact({"metadata": {"name": "x"}, "status": status}, frozen="status")
    back = status_of(out)
    assert back == status
    assert list(back) == ["z", "a", "m"]
    assert back["a"][0] is True
    assert isinstance(back["a"][2], float)


@pytest.mark.parametrize(
    "value",
    [
        {"n": 123456789012345678901234567890, "m": -(2**63) - 1, "i": 1, "f": 1.0},
        {"f": [0.1, 1e-300, 1.7976931348623157e308, -0.0, 2.5e-308, 1e22]},
        {"s": '\u00e9 \U0001f600 \\ " \n \t \x00 é', "": ""},
        {"empty": {}, "list": [], "deep": [[[{"a": [None]}]]]},
        {"x" * 200: "y" * 5000},
    ],
)
def test_a_frozen_value_thaws_equal_and_of_the_same_types(value: dict[str, Any]) -> None:
    back = thaw(freeze(value))
    assert back == value
    assert json.dumps(back) == json.dumps(value)  # int stays int, float float, order kept


def test_a_stored_config_map_keeps_its_data_frozen() -> None:
    s = Store()
    document = json.dumps({"bindings": [{"uri": f"git://example/{i}"} for i in range(50)]})
    cm = {
        "metadata": {"name": "a-bindings", "namespace": "ns", "resourceVersion": "3"},
        "data": {"bindings.json": document},
    }
    s.put(CONFIG_MAPS, cm)
    stored = s.get(CONFIG_MAPS, "ns/a-bindings")
    assert stored is not None
    assert "data" not in stored
    assert len(stored["data.z"]) < len(document) / 2
    assert data_of(stored) == {"bindings.json": document}
    assert data_of(cm) == cm["data"]
    assert data_of(None) == {}
