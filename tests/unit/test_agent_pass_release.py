"""Agent pass step 4 (release) and a deleted agent: a hold goes only once its session has let
go of the URI."""

from __future__ import annotations

import copy

import pytest

from controller.domain.refs import Request
from controller.k8s import api
from tests.unit.agent_pass_world import (
    LEASE,
    NS,
    X,
    agent,
    edit,
    run,
    session_pod,
    with_runtime,
    world,
)
from tests.unit.virtual_clock import VirtualClock


async def test_a_hold_is_released_only_once_the_session_has_let_go(clock: VirtualClock) -> None:
    """Step 4's gate: the work URI leaves the running session's document, but the hold stays
    while that session (one that cannot acknowledge) may still work on it; the pass asks to be
    looked at again when the grace period is over, and that pass releases it."""
    c, fake = world(with_runtime(agent("a", X)), clock=clock)
    await run(c, "a")
    c.observe(api.PODS, session_pod(fake, "a"))
    edit(c, fake, with_runtime(agent("a", review=X)))
    c.queue.drain()
    fake.writes.clear()
    result = await run(c, "a")
    assert fake.writes == [("patch", "configmaps", "a-bindings"), ("status", "agentspecs", "a")]
    assert ("leases", NS, LEASE) in fake.objects  # not released yet
    assert result is not None
    grace = result.requeue_after
    assert grace is not None
    assert grace == pytest.approx(c.acks.grace, abs=1.0)
    await clock.advance(grace - 1.0)  # not yet over: still held
    c.queue.drain()
    await run(c, "a")
    assert ("leases", NS, LEASE) in fake.objects
    await clock.advance(1.0)
    c.queue.drain()
    fake.writes.clear()
    await run(c, "a")
    assert fake.writes[:2] == [("patch", "leases", LEASE), ("delete", "leases", LEASE)]
    assert ("leases", NS, LEASE) not in fake.objects
    assert fake.events[-1] == "ReleasedUnacknowledged"


async def test_handoff_goes_a_then_no_holder_then_b() -> None:
    c, fake = world(agent("a", X), agent("b", X))
    await run(c, "a", "b")
    fake.writes.clear()
    edit(c, fake, agent("a", review=X))  # A lets go of X as work (keeps it under another role)
    queued = c.queue.drain()
    assert Request.agent(f"{NS}/a") in queued
    await run(c, "a")
    assert fake.writes == [
        ("patch", "configmaps", "a-bindings"),  # A's session stops seeing X as work ...
        ("patch", "leases", LEASE),  # ... and only then is the hold released: its finalizer,
        ("delete", "leases", LEASE),  # then the Lease
        ("patch", "agentspecs", "a"),  # finalizer dropped
        ("status", "agentspecs", "a"),
    ]
    # The release queued the waiting claimant, not A again.
    assert c.queue.drain() == {Request.agent(f"{NS}/b")}
    fake.writes.clear()
    await run(c, "b")
    assert fake.writes[0] == ("create", "leases", LEASE)
    assert ("patch", "configmaps", "b-bindings") in fake.writes
    assert c.store.status(api.AGENTS, f"{NS}/b")["state"] == "Working"


async def test_a_hold_whose_namespace_is_going_away_outlives_the_holders_bindings() -> None:
    """The namespace controller deletes Leases and ConfigMaps in no particular order: the hold's
    finalizer keeps it until its holder has withdrawn the URI."""
    c, fake = world(agent("a", X))
    await run(c, "a")
    lease = fake.objects[("leases", NS, LEASE)]
    assert lease["metadata"]["finalizers"] == ["bindery.dev/hold"]
    lease["metadata"]["deletionTimestamp"] = "2026-12-01T00:00:00Z"  # marked, not gone
    lease["metadata"]["resourceVersion"] = str(next(fake._rv))
    c.observe(api.LEASES, copy.deepcopy(lease))
    assert Request.agent(f"{NS}/a") in c.queue.drain()
    fake.writes.clear()
    await run(c, "a")
    assert fake.writes[:2] == [("patch", "configmaps", "a-bindings"), ("patch", "leases", LEASE)]
    assert X not in fake.objects[("configmaps", NS, "a-bindings")]["data"]["bindings.json"]


async def test_a_holder_deleted_with_orphan_propagation_still_withdraws_before_releasing() -> None:
    """Orphan deletion removes the ConfigMap's owner reference before the holder's finalizer
    runs: the URI must still leave that document before the hold goes."""
    c, fake = world(agent("a", X), agent("b", X))
    await run(c, "a", "b")
    cm = fake.objects[("configmaps", NS, "a-bindings")]
    cm["metadata"].pop("ownerReferences")  # the garbage collector orphans it ...
    cm["metadata"]["resourceVersion"] = str(next(fake._rv))
    c.observe(api.CONFIG_MAPS, copy.deepcopy(cm))
    holder = fake.objects[("agentspecs", NS, "a")]  # ... and the holder is being deleted
    holder["metadata"]["deletionTimestamp"] = "2026-12-01T00:00:00Z"
    holder["metadata"]["resourceVersion"] = str(next(fake._rv))
    c.observe(api.AGENTS, copy.deepcopy(holder))
    fake.writes.clear()
    await run(c, "a")
    assert fake.writes[:3] == [
        ("patch", "configmaps", "a-bindings"),
        ("patch", "leases", LEASE),
        ("delete", "leases", LEASE),
    ]
    assert X not in fake.objects[("configmaps", NS, "a-bindings")]["data"]["bindings.json"]


async def test_a_hold_left_by_an_agent_that_vanished_is_released() -> None:
    """A holder removed without its finalizer's work (finalizer stripped by hand, deleted while
    unwatched) leaves a hold whose own finalizer waits for it: the controller releases it once
    the API server confirms the holder is gone."""
    c, fake = world(agent("a", X))
    await run(c, "a")
    del fake.objects[("agentspecs", NS, "a")]
    gone = fake.objects.get(("agentspecs", NS, "a")) or {
        "metadata": {"name": "a", "namespace": NS, "uid": "a-uid", "resourceVersion": "999"}
    }
    c.observe(api.AGENTS, gone, deleted=True)
    assert Request.agent(f"{NS}/a") in c.queue.drain()
    fake.writes.clear()
    await c.process(Request.agent(f"{NS}/a"))
    assert fake.writes == [("patch", "leases", LEASE), ("delete", "leases", LEASE)]
