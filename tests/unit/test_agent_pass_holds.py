"""Agent pass steps 1, 2 and 5 (finalizer, acquire, drop finalizer): who may hold a work
URI, who waits in line for it, and Leases that only pose as holds."""

from __future__ import annotations

import copy

import pytest

from controller.domain.refs import Request
from controller.k8s import api
from tests.unit.agent_pass_world import (
    LEASE,
    NS,
    Body,
    X,
    agent,
    edit,
    hold_body,
    run,
    world,
)


async def test_an_acquire_queues_no_second_pass_of_the_same_agent() -> None:
    c, _ = world(agent("a", X), agent("b", X))
    await run(c, "a")
    pending = c.queue.drain()
    assert Request.agent(f"{NS}/a") not in pending
    assert Request.agent(f"{NS}/b") in pending  # the claimant learns of the new holder


async def test_a_claimant_never_waits_behind_an_agent_that_cannot_hold() -> None:
    bad = agent("a", X)
    bad["spec"]["resources"][0]["tag"] = "no-such-type"  # its work binding is in error
    c, _ = world(bad, agent("b", X))
    await run(c, "b")  # b has not seen a's error yet: it lets a (first by name) go first ...
    assert c.store.status(api.AGENTS, f"{NS}/b")["state"] == "Waiting"
    assert Request.agent(f"{NS}/a") in c.queue.drain()  # ... and gives a its turn
    await run(c, "a")
    assert Request.agent(f"{NS}/b") in c.queue.drain()  # a cannot hold: b's turn
    await run(c, "b")
    assert c.store.status(api.AGENTS, f"{NS}/b")["state"] == "Working"


async def test_an_agent_being_deleted_leaves_the_line_for_its_uri() -> None:
    """b is first in line for X (by name) but is being deleted (orphan or foreground deletion
    keeps it around a while): c must not wait for an agent that will never hold."""
    c, fake = world(agent("b", X), agent("c", X))
    doomed = fake.objects[("agentspecs", NS, "b")]
    doomed["metadata"]["deletionTimestamp"] = "2026-12-01T00:00:00Z"
    doomed["metadata"]["finalizers"] = ["orphan"]
    doomed["metadata"]["resourceVersion"] = str(next(fake._rv))
    c.observe(api.AGENTS, copy.deepcopy(doomed))
    assert f"{NS}/b" not in c.intake.wanted.get(NS, X)
    assert Request.agent(f"{NS}/c") in c.queue.drain()
    await run(c, "c")
    assert c.store.status(api.AGENTS, f"{NS}/c")["state"] == "Working"


@pytest.mark.parametrize(
    ("why", "lease"),
    [
        ("a name not derived from the URI", hold_body("b", name="bindery-work-forged")),
        (
            "a holder in another namespace",
            {**hold_body("b"), "spec": {"holderIdentity": "other/b"}},
        ),
    ],
)
async def test_a_lease_posing_as_a_hold_holds_nothing(why: str, lease: Body) -> None:
    c, fake = world(agent("b", X))
    c.observe(api.LEASES, fake.seed(api.LEASES, lease))
    assert c.intake.holds.by_slot == {}, why
    assert c.intake.holds.of("b-uid") == []


async def test_a_forged_lease_in_the_holds_place_is_removed_then_the_uri_acquired() -> None:
    c, fake = world(agent("a", X))
    forged = {**hold_body("a"), "spec": {"holderIdentity": "elsewhere/mallory"}}
    fake.seed(api.LEASES, forged)  # not seen by the watch yet: the create meets it
    await run(c, "a")
    assert ("delete", "leases", LEASE) in fake.writes
    assert Request.agent(f"{NS}/a") in c.queue.drain()  # it tries again at once
    fake.writes.clear()
    await run(c, "a")
    assert fake.writes[0] == ("create", "leases", LEASE)
    assert c.store.status(api.AGENTS, f"{NS}/a")["state"] == "Working"


async def test_a_hold_handed_over_by_someone_else_stops_counting() -> None:
    c, fake = world(agent("a", X), agent("b", X))
    await run(c, "a", "b")
    lease = copy.deepcopy(fake.objects[("leases", NS, LEASE)])
    lease["spec"]["holderIdentity"] = f"{NS}/b"
    lease["metadata"]["annotations"]["bindery.dev/holder-uid"] = "b-uid"
    lease["metadata"]["resourceVersion"] = str(next(fake._rv))
    c.observe(api.LEASES, lease)  # the watch reports the edit
    assert c.intake.holds.of("b-uid") == []  # b does not hold X because someone said so
    assert [h.holder for h in c.intake.holds.of("a-uid")] == [f"{NS}/a"]  # still a's
    assert (NS, LEASE) in c.intake.holds.ignored
    fake.objects[("leases", NS, LEASE)] = lease
    fake.writes.clear()
    await run(c, "b")
    assert fake.writes == []  # b waits for a, as before the edit
    edit(c, fake, agent("a"))  # a lets go: it withdraws, then deletes the (edited) hold
    await run(c, "a")
    assert fake.writes[:3] == [
        ("patch", "configmaps", "a-bindings"),
        ("patch", "leases", LEASE),
        ("delete", "leases", LEASE),
    ]
