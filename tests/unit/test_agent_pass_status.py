"""Agent pass steps 7 and 8 (status, events): status says what the pass saw, even when the API
server refused it, and the gauges follow."""

from __future__ import annotations

import pytest
from prometheus_client import REGISTRY

from controller.domain.refs import Request
from controller.k8s import api
from controller.k8s.api import ApiError
from controller.reconcile.writer import ForeignObjectError
from tests.unit.agent_pass_world import (
    NS,
    agent,
    run,
    world,
)


async def test_a_pass_the_api_server_refuses_still_writes_status() -> None:
    c, fake = world(agent("a"))
    fake.refuse = {("create", "configmaps", "a-bindings"): 422}
    with pytest.raises(ApiError):
        await c.process(Request.agent(f"{NS}/a"))
    st = c.store.status(api.AGENTS, f"{NS}/a")
    stalled = next(x for x in st["conditions"] if x["type"] == "Stalled")
    assert stalled["status"] == "True"
    assert stalled["reason"] == "ApiRejected"
    assert "configmaps" in stalled["message"]
    assert "HTTP 422" in stalled["message"]


async def test_an_object_that_is_not_bindery_s_is_never_written() -> None:
    c, fake = world(agent("a"))
    fake.seed(
        api.CONFIG_MAPS,
        {"metadata": {"name": "a-bindings", "namespace": NS}, "data": {"theirs": "1"}},
    )
    with pytest.raises(ForeignObjectError):
        await c.process(Request.agent(f"{NS}/a"))
    assert fake.objects[("configmaps", NS, "a-bindings")]["data"] == {"theirs": "1"}
    ready = next(
        x for x in c.store.status(api.AGENTS, f"{NS}/a")["conditions"] if x["type"] == "Ready"
    )
    assert ready["reason"] == "ForeignObject"


async def test_the_state_gauges_carry_the_namespace() -> None:
    def idle_here() -> float:
        value = REGISTRY.get_sample_value("bindery_agents", {"namespace": NS, "state": "Idle"})
        return value or 0.0

    before = idle_here()
    c, fake = world(agent("a"))
    await run(c, "a")
    assert idle_here() == before + 1
    c.observe(api.AGENTS, fake.objects[("agentspecs", NS, "a")], deleted=True)
    assert idle_here() == before


def _owned_by(uid: str, name: str = "a") -> dict[str, object]:
    return {"kind": "AgentSpec", "name": name, "uid": uid, "controller": True}


async def test_the_agents_own_object_without_its_labels_is_labelled_again() -> None:
    """Ownership is by uid: a ConfigMap the agent itself controls, whose labels were removed,
    is the agent's (not a transient object of an earlier agent), so it is labelled again and
    written."""
    c, fake = world(agent("a"))
    fake.seed(
        api.CONFIG_MAPS,
        {
            "metadata": {
                "name": "a-bindings",
                "namespace": NS,
                "ownerReferences": [_owned_by("a-uid")],
            },
            "data": {"bindings.json": "stale"},
        },
    )
    await run(c, "a")
    cm = fake.objects[("configmaps", NS, "a-bindings")]
    assert cm["metadata"]["labels"]["app.kubernetes.io/managed-by"] == "bindery"
    assert cm["metadata"]["labels"]["bindery.dev/agent"] == "a"
    assert cm["data"]["bindings.json"] != "stale"
    assert c.store.status(api.AGENTS, f"{NS}/a")["state"] == "Idle"


def test_only_another_uid_of_the_same_name_is_a_transient_owner() -> None:
    body = {"metadata": {"name": "a-bindings", "namespace": NS}}
    earlier = ForeignObjectError(
        "ConfigMap",
        {**body, "metadata": {**body["metadata"], "ownerReferences": [_owned_by("old")]}},
        "a",
        "a-uid",
    )
    assert earlier.transient
    assert "earlier AgentSpec" in str(earlier)
    own = ForeignObjectError(
        "ConfigMap",
        {**body, "metadata": {**body["metadata"], "ownerReferences": [_owned_by("a-uid")]}},
        "a",
        "a-uid",
    )
    assert not own.transient
    other = ForeignObjectError(
        "ConfigMap",
        {**body, "metadata": {**body["metadata"], "ownerReferences": [_owned_by("x", "b")]}},
        "a",
        "a-uid",
    )
    assert not other.transient
