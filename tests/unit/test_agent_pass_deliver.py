"""Agent pass step 3 (deliver): the bindings ConfigMap, written, adopted, or taken over."""

from __future__ import annotations

from controller.domain.refs import Request
from controller.k8s import api
from tests.unit.agent_pass_world import (
    NS,
    X,
    agent,
    run,
    world,
)


async def test_a_write_response_carrying_a_newer_spec_is_not_lost() -> None:
    """A user's edit lands between the pass's read and its status write; the write's response
    carries the new spec and its watch event looks stale: the response must be learned."""
    c, fake = world(agent("a"))
    stored = fake.objects[("agentspecs", NS, "a")]
    stored["spec"] = {"resources": [{"name": "work", "tag": "issue", "uri": X}]}
    stored["metadata"]["generation"] = 2
    await run(c, "a")
    agent_now = c.registry.agent(f"{NS}/a")
    assert agent_now is not None
    assert agent_now.spec.work() is not None
    assert Request.agent(agent_now.meta.key) in c.queue.drain()


async def test_an_orphan_left_by_an_earlier_agent_of_the_same_name_is_adopted() -> None:
    """`kubectl delete --cascade=orphan` keeps the bindings ConfigMap without an owner; an
    agent created again under that name adopts it (as a ReplicaSet adopts orphaned pods)."""
    c, fake = world(agent("a"))
    orphan = fake.seed(
        api.CONFIG_MAPS,
        {
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {
                "name": "a-bindings",
                "namespace": NS,
                "labels": {"app.kubernetes.io/managed-by": "bindery", "bindery.dev/agent": "a"},
            },
            "data": {"bindings.json": "{}"},
        },
    )
    c.observe(api.CONFIG_MAPS, orphan)
    c.queue.drain()
    await run(c, "a")
    adopted = fake.objects[("configmaps", NS, "a-bindings")]
    (owner,) = adopted["metadata"]["ownerReferences"]
    assert (owner["kind"], owner["name"], owner["uid"]) == ("AgentSpec", "a", "a-uid")
    assert '"agent"' in adopted["data"]["bindings.json"]  # then delivered as usual
    assert c.store.status(api.AGENTS, f"{NS}/a")["state"] == "Idle"


async def test_what_an_earlier_agent_of_the_same_name_left_is_taken_over_at_once() -> None:
    """After an API-server restart the garbage collector can take a while to remove a deleted
    agent's ConfigMap; the agent created again under the name takes it over instead of waiting."""
    c, fake = world(agent("a"))
    left = fake.seed(
        api.CONFIG_MAPS,
        {
            "metadata": {
                "name": "a-bindings",
                "namespace": NS,
                "labels": {"app.kubernetes.io/managed-by": "bindery", "bindery.dev/agent": "a"},
                "ownerReferences": [
                    {"apiVersion": "bindery.dev/v1alpha1", "kind": "AgentSpec", "name": "a",
                     "uid": "earlier-uid", "controller": True, "blockOwnerDeletion": True}
                ],
            },
            "data": {"bindings.json": "{}"},
        },
    )  # fmt: skip
    c.observe(api.CONFIG_MAPS, left)
    c.queue.drain()
    await run(c, "a")
    (owner,) = fake.objects[("configmaps", NS, "a-bindings")]["metadata"]["ownerReferences"]
    assert owner["uid"] == "a-uid"
    assert c.store.status(api.AGENTS, f"{NS}/a")["state"] == "Idle"
