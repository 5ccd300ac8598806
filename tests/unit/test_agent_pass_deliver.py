"""Agent pass step 3 (deliver): the bindings ConfigMap, written, adopted, or taken over."""

from __future__ import annotations

import copy

from controller.domain.delivery import nonce_of
from controller.domain.refs import Request
from controller.k8s import api
from controller.reconcile import Controller
from harness.fakes import ScriptedApi
from tests.unit.agent_pass_world import (
    NS,
    X,
    agent,
    edit,
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


def _restarted(fake: ScriptedApi) -> Controller:
    """A new controller over what an earlier one wrote (a restart: nothing in memory)."""
    c = Controller(fake)  # type: ignore[arg-type]
    endpoints = {e.plural: e for e in (api.AGENTS, api.RESOURCE_TYPES, api.CONFIG_MAPS, api.LEASES)}
    for (plural, _, _), body in list(fake.objects.items()):
        if plural in endpoints:
            c.observe(endpoints[plural], copy.deepcopy(body))
    c.queue.drain()
    return c


def _document(fake: ScriptedApi) -> str:
    return str(fake.objects[("configmaps", NS, "a-bindings")]["data"]["bindings.json"])


async def test_a_restart_keeps_the_document_in_place_and_writes_nothing() -> None:
    """The status records the digest of the controller's last write: a new process finds the
    same bindings in that very document and leaves it (and its nonce) alone."""
    c, fake = world(agent("a", X))
    await run(c, "a")
    written = _document(fake)
    assert nonce_of(written)
    fake.writes.clear()
    await run(_restarted(fake), "a")
    assert fake.writes == []
    assert _document(fake) == written


async def test_an_earlier_document_put_back_by_hand_is_written_anew() -> None:
    """An ``edit`` user restores an earlier document with the same bindings (and its nonce, one
    the session may have acknowledged): it is not the write the controller recorded, so the
    controller writes the document again under a fresh nonce, after a restart too."""
    c, fake = world(agent("a", X))
    await run(c, "a")
    first = _document(fake)
    edit(c, fake, agent("a", review=X))
    c.queue.drain()
    await run(c, "a")
    edit(c, fake, agent("a", X))
    c.queue.drain()
    await run(c, "a")
    latest = _document(fake)
    assert latest != first
    assert nonce_of(latest) != nonce_of(first)
    for controller in (c, _restarted(fake)):
        stored = fake.objects[("configmaps", NS, "a-bindings")]
        stored["data"] = {"bindings.json": first}
        stored["metadata"]["resourceVersion"] = str(next(fake._rv))
        controller.observe(api.CONFIG_MAPS, copy.deepcopy(stored))
        controller.queue.drain()
        fake.writes.clear()
        await run(controller, "a")
        assert fake.writes[0] == ("patch", "configmaps", "a-bindings")
        rewritten = _document(fake)
        assert rewritten not in (first, latest)
        assert nonce_of(rewritten) not in (nonce_of(first), nonce_of(latest), "")
