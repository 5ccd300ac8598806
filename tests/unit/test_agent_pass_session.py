"""Agent pass step 6 (session): launched after its bindings, suspended by its idle policy once
it neither wants nor holds work, resumed only once it holds the work it wants. Idle time passes
on the virtual clock."""

from __future__ import annotations

import copy

from controller.domain.refs import Request
from controller.k8s import api
from tests.unit.agent_pass_world import (
    LEASE,
    NS,
    X,
    agent,
    edit,
    idle_for_long,
    replicas,
    run,
    session_pod,
    with_idle_policy,
    world,
)
from tests.unit.virtual_clock import VirtualClock


async def test_a_deleted_agent_whose_event_was_lost_leaves_the_view_on_its_next_write() -> None:
    """The garbage collector deletes a ghost's session; the pass that recreates it learns from
    the 404 on status that the agent is gone, instead of fighting the collector forever."""
    with_runtime = agent("a")
    with_runtime["spec"]["runtime"] = {"image": "example/agent:1"}
    c, fake = world(with_runtime)
    await run(c, "a")
    del fake.objects[("agentspecs", NS, "a")]  # deleted while the watch was away: no event
    session = fake.objects.pop(("statefulsets", NS, "a-session"))
    c.observe(api.STATEFUL_SETS, session, deleted=True)  # the collector's deletion is seen
    assert c.queue.drain() == {Request.agent(f"{NS}/a")}
    await c.process(Request.agent(f"{NS}/a"))
    assert c.registry.agent(f"{NS}/a") is None
    assert c.store.get(api.AGENTS, f"{NS}/a") is None
    assert c.queue.drain() == {Request.agent(f"{NS}/a")}  # its "gone" pass: holds to release?
    writes = len(fake.writes)
    await c.process(Request.agent(f"{NS}/a"))
    assert len(fake.writes) == writes  # none: no session is recreated against the collector


async def test_an_idle_session_is_suspended_when_due_and_resumed_after_its_hold(
    clock: VirtualClock,
) -> None:
    """Step 6 suspends a session only once its idle clock (kept in status) is due, by scaling
    it to zero with its template untouched; a work binding resumes it only after step 2
    acquired the hold, at the same launch."""
    c, fake = world(with_idle_policy(agent("a")), clock=clock)
    result = await run(c, "a")
    status = fake.objects[("agentspecs", NS, "a")]["status"]
    idle_since = status["session"]["idleSince"]
    assert idle_since == clock.wall().strftime("%Y-%m-%dT%H:%M:%SZ")  # the pass's reading
    assert result is not None
    assert result.requeue_after is not None
    assert result.requeue_after <= 5.0  # looks again by when it is due (or the pod shows)
    template = copy.deepcopy(fake.objects[("statefulsets", NS, "a-session")]["spec"]["template"])
    await idle_for_long(clock, c)
    fake.writes.clear()
    result = await run(c, "a")
    assert fake.writes == [("patch", "statefulsets", "a-session"), ("status", "agentspecs", "a")]
    assert replicas(fake, "a") == 0
    assert fake.objects[("statefulsets", NS, "a-session")]["spec"]["template"] == template
    status = fake.objects[("agentspecs", NS, "a")]["status"]
    assert (status["state"], status["session"]["phase"]) == ("Suspended", "Suspended")
    assert status["session"]["idleSince"] == idle_since  # the idle clock kept, not restarted
    ready = {c_["type"]: c_ for c_ in status["conditions"]}
    assert (ready["Ready"]["status"], ready["Ready"]["reason"]) == ("True", "Suspended")
    assert ready["Suspended"]["status"] == "True"
    assert result is not None
    assert result.requeue_after is None  # nothing to wait for while suspended

    edit(c, fake, with_idle_policy(agent("a", X)))
    c.queue.drain()
    fake.writes.clear()
    await run(c, "a")
    assert fake.writes == [
        ("patch", "agentspecs", "a"),
        ("create", "leases", LEASE),  # the hold first ...
        ("patch", "configmaps", "a-bindings"),
        ("patch", "statefulsets", "a-session"),  # ... then the resume
        ("status", "agentspecs", "a"),
    ]
    assert replicas(fake, "a") == 1
    assert fake.objects[("statefulsets", NS, "a-session")]["spec"]["template"] == template
    status = fake.objects[("agentspecs", NS, "a")]["status"]
    assert status["state"] == "Working"
    assert "idleSince" not in status["session"]
    assert (status["launchedGeneration"], status["desiredLaunchGeneration"]) == (0, 0)


async def test_a_suspended_agent_waiting_for_its_uri_stays_suspended_until_it_holds_it(
    clock: VirtualClock,
) -> None:
    """Waiting is not idle (its clock is cleared) but does not resume a suspended session
    either: it resumes once the URI's holder has released it and its own hold is acquired."""
    c, fake = world(agent("b", X), with_idle_policy(agent("a")), clock=clock)
    await run(c, "b", "a")
    await idle_for_long(clock, c)
    await run(c, "a")
    assert replicas(fake, "a") == 0
    edit(c, fake, with_idle_policy(agent("a", X)))
    c.queue.drain()
    fake.writes.clear()
    await run(c, "a")
    assert ("patch", "statefulsets", "a-session") not in fake.writes
    status = fake.objects[("agentspecs", NS, "a")]["status"]
    assert status["state"] == "Waiting"
    assert "idleSince" not in status["session"]
    edit(c, fake, agent("b"))  # b lets go of X
    c.queue.drain()
    await run(c, "b")
    fake.writes.clear()
    await run(c, "a")
    assert fake.writes.index(("create", "leases", LEASE)) < fake.writes.index(
        ("patch", "statefulsets", "a-session")
    )
    assert replicas(fake, "a") == 1


async def test_an_agent_deleted_while_suspended_and_waiting_lets_go_as_any_other(
    clock: VirtualClock,
) -> None:
    """A suspended agent holds nothing: deleting it drops its finalizer at once and leaves the
    hold of the agent it waited for alone."""
    c, fake = world(agent("b", X), with_idle_policy(agent("a")), clock=clock)
    await run(c, "b", "a")
    await idle_for_long(clock, c)
    await run(c, "a")
    edit(c, fake, with_idle_policy(agent("a", X)))
    c.queue.drain()
    await run(c, "a")
    doomed = fake.objects[("agentspecs", NS, "a")]
    assert doomed["metadata"]["finalizers"]  # it wants work: the hold finalizer
    assert replicas(fake, "a") == 0
    doomed["metadata"]["deletionTimestamp"] = "2026-12-01T00:00:00Z"
    doomed["metadata"]["resourceVersion"] = str(next(fake._rv))
    c.observe(api.AGENTS, copy.deepcopy(doomed))
    fake.writes.clear()
    await run(c, "a")
    assert fake.writes == [("patch", "agentspecs", "a")]  # the finalizer, nothing else
    assert fake.objects[("leases", NS, LEASE)]["spec"]["holderIdentity"] == f"{NS}/b"


async def test_a_holder_is_suspended_only_after_its_hold_is_released() -> None:
    """Releasing is not idle: a session under an idle policy whose work was withdrawn keeps
    running until step 4 has released the hold (its session let go); only then does its idle
    clock start."""
    c, fake = world(with_idle_policy(agent("a", X), seconds=1))
    await run(c, "a")
    c.observe(api.PODS, session_pod(fake, "a"))
    edit(c, fake, with_idle_policy(agent("a"), seconds=1))
    c.queue.drain()
    await run(c, "a")
    assert ("leases", NS, LEASE) in fake.objects  # the session may still work on it
    status = fake.objects[("agentspecs", NS, "a")]["status"]
    assert status["state"] == "Releasing"
    assert "idleSince" not in status["session"]
    assert replicas(fake, "a") == 1
