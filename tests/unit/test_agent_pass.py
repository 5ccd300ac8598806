"""One agent pass, as a table of world states: initial objects + scripted API answers -> the
ordered writes, the final view, and the events.

The API here is an in-memory stand-in that numbers versions like etcd and can refuse a write
once; it pins the *order* of a pass in milliseconds. That the API server itself behaves this way
(create-if-absent, preconditions, generation bumps) is proven against the real one in
tests/integration/.

Every numbered step of the pass (controller/reconcile/agent.py's docstring) is covered by rows
named in :data:`STEPS`; each step has a row that fails when the step is removed or moved.
"""

from __future__ import annotations

import asyncio
import copy
import re
from dataclasses import dataclass, field
from typing import Any

import pytest
from prometheus_client import REGISTRY

from controller.domain.refs import Request
from controller.domain.work import hold_name
from controller.k8s import api
from controller.k8s.api import ApiError
from controller.reconcile import Controller
from controller.reconcile import agent as agent_pass
from controller.reconcile.clock import LOOP_CLOCK, Clock
from controller.reconcile.result import Result
from controller.reconcile.resync import missed, vanished
from controller.reconcile.writer import ForeignObjectError
from harness.fakes import ScriptedApi
from tests.unit.virtual_clock import VirtualClock

NS = "team"
Body = dict[str, Any]
Write = tuple[str, str, str]
"""(verb, plural, name)."""


def agent(name: str, work: str | None = None, *, review: str | None = None) -> Body:
    resources = []
    if work:
        resources.append({"name": "work", "tag": "issue", "uri": work})
    if review:
        resources.append({"name": "review", "tag": "issue", "uri": review})
    return {
        "apiVersion": "bindery.dev/v1alpha1",
        "kind": "AgentSpec",
        "metadata": {"name": name, "namespace": NS, "generation": 1},
        "spec": {"resources": resources},
    }


def world(*agents: Body, clock: Clock = LOOP_CLOCK) -> tuple[Controller, ScriptedApi]:
    fake = ScriptedApi()
    c = Controller(fake, clock=clock)  # type: ignore[arg-type]
    c.observe(api.RESOURCE_TYPES, fake.seed(api.RESOURCE_TYPES, _type("issue")))
    for body in agents:
        c.observe(api.AGENTS, fake.seed(api.AGENTS, body))
    c.queue.drain()
    return c, fake


def _type(name: str) -> Body:
    return {
        "apiVersion": "bindery.dev/v1alpha1",
        "kind": "ResourceType",
        "metadata": {"name": name, "generation": 1},
        "spec": {},
    }


async def run(c: Controller, *names: str) -> Result | None:
    """One pass of each agent named, in order; what the last one came to."""
    result = None
    for name in names:
        result = await c.process(Request.agent(f"{NS}/{name}"))
    await asyncio.sleep(0)  # let the event poster run
    await c.events.stop()
    return result


def edit(c: Controller, fake: ScriptedApi, body: Body) -> None:
    """A user's edit: the stored object changes (generation bumped), the watch reports it."""
    stored = fake.objects[("agentspecs", NS, body["metadata"]["name"])]
    stored["spec"] = copy.deepcopy(body["spec"])
    stored["metadata"]["generation"] += 1
    stored["metadata"]["resourceVersion"] = str(next(fake._rv))
    c.observe(api.AGENTS, copy.deepcopy(stored))


X = "gh://org/repo/issues/1"
LEASE = hold_name(X)


def hold_body(holder: str, *, name: str = LEASE, namespace: str = NS) -> Body:
    return {
        "metadata": {
            "name": name,
            "namespace": namespace,
            "labels": {"app.kubernetes.io/managed-by": "bindery"},
            "annotations": {"bindery.dev/uri": X, "bindery.dev/holder-uid": f"{holder}-uid"},
        },
        "spec": {"holderIdentity": f"{NS}/{holder}"},
    }


@dataclass(frozen=True)
class Case:
    name: str
    agents: tuple[Body, ...]
    run: tuple[str, ...]
    writes: list[Write]
    states: dict[str, str]
    refuse: dict[Write, int] = field(default_factory=dict)
    events: list[str] = field(default_factory=list)
    requeue: float | None = None
    """When the last pass asks to be looked at again (None: it does not)."""


def with_runtime(body: Body) -> Body:
    body["spec"]["runtime"] = {"image": "example/agent:1"}
    return body


CASES = [
    Case(
        "an idle agent gets its bindings, then its status",
        (agent("a"),),
        ("a",),
        [("create", "configmaps", "a-bindings"), ("status", "agentspecs", "a")],
        {"a": "Idle"},
    ),
    Case(
        "work: finalizer, acquire, deliver, status, in that order",
        (agent("a", X),),
        ("a",),
        [
            ("patch", "agentspecs", "a"),
            ("create", "leases", LEASE),
            ("create", "configmaps", "a-bindings"),
            ("status", "agentspecs", "a"),
        ],
        {"a": "Working"},
        events=["AcquiredWork"],
    ),
    Case(
        "a second claimant waits without writing a hold",
        (agent("a", X), agent("b", X)),
        ("a", "b"),
        [
            ("patch", "agentspecs", "a"),
            ("create", "leases", LEASE),
            ("create", "configmaps", "a-bindings"),
            ("status", "agentspecs", "a"),
            ("patch", "agentspecs", "b"),
            ("create", "configmaps", "b-bindings"),
            ("status", "agentspecs", "b"),
        ],
        {"a": "Working", "b": "Waiting"},
        events=["AcquiredWork", "WaitingForWork"],
    ),
    Case(
        "losing the create race (409) means waiting, not an error",
        (agent("a", X),),
        ("a",),
        [
            ("patch", "agentspecs", "a"),
            ("create", "configmaps", "a-bindings"),
            ("status", "agentspecs", "a"),
        ],
        {"a": "Waiting"},
        refuse={("create", "leases", LEASE): 409},
        events=["WaitingForWork"],
    ),
    Case(
        "session: launched only once its bindings exist, then status",
        (with_runtime(agent("a", X)),),
        ("a",),
        [
            ("patch", "agentspecs", "a"),
            ("create", "leases", LEASE),
            ("create", "configmaps", "a-bindings"),
            ("create", "statefulsets", "a-session"),
            ("status", "agentspecs", "a"),
        ],
        {"a": "Working"},
        events=["Launched", "AcquiredWork"],
        requeue=5.0,  # no pod yet: a pod that fails to be created shows in Events only
    ),
]


@pytest.mark.parametrize("case", CASES, ids=lambda case: case.name)
async def test_one_pass(case: Case) -> None:
    c, fake = world(*case.agents)
    fake.refuse = dict(case.refuse)
    if case.refuse:  # someone else holds the lease, but it is not in our view yet
        fake.seed(api.LEASES, hold_body("zed"))
    result = await run(c, *case.run)
    assert fake.writes == case.writes
    assert result is not None
    assert result.requeue_after == case.requeue
    states = {n: c.store.get(api.AGENTS, f"{NS}/{n}")["status"]["state"] for n in case.states}  # type: ignore[index]
    assert states == case.states
    assert fake.events == case.events


def session_pod(fake: ScriptedApi, agent_name: str) -> Body:
    """The running pod of an agent's session, as its StatefulSet made it (no delivery sidecar:
    it cannot acknowledge a document)."""
    sts = fake.objects[("statefulsets", NS, f"{agent_name}-session")]
    template = sts["spec"]["template"]
    owner = {"kind": "StatefulSet", "name": sts["metadata"]["name"], "uid": sts["metadata"]["uid"]}
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            **template["metadata"],
            "name": f"{agent_name}-session-0",
            "namespace": NS,
            "uid": f"{agent_name}-pod-uid",
            "resourceVersion": str(next(fake._rv)),
            "ownerReferences": [{**owner, "controller": True}],
        },
        "spec": template["spec"],
        "status": {
            "phase": "Running",
            "conditions": [{"type": "Ready", "status": "True"}],
            "containerStatuses": [{"name": "agent", "ready": True, "state": {"running": {}}}],
        },
    }


async def test_a_hold_is_released_only_once_the_session_has_let_go() -> None:
    """Step 4's gate: the work URI leaves the running session's document, but the hold stays
    while that session (one that cannot acknowledge) may still work on it; the pass asks to be
    looked at again when the grace period is over."""
    c, fake = world(with_runtime(agent("a", X)))
    await run(c, "a")
    c.observe(api.PODS, session_pod(fake, "a"))
    edit(c, fake, with_runtime(agent("a", review=X)))
    c.queue.drain()
    fake.writes.clear()
    result = await run(c, "a")
    assert fake.writes == [("patch", "configmaps", "a-bindings"), ("status", "agentspecs", "a")]
    assert ("leases", NS, LEASE) in fake.objects  # not released yet
    assert result is not None
    assert result.requeue_after == pytest.approx(c.acks.grace, abs=1.0)


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
    assert c.store.get(api.AGENTS, f"{NS}/b")["status"]["state"] == "Working"  # type: ignore[index]


async def test_an_acquire_queues_no_second_pass_of_the_same_agent() -> None:
    c, _ = world(agent("a", X), agent("b", X))
    await run(c, "a")
    pending = c.queue.drain()
    assert Request.agent(f"{NS}/a") not in pending
    assert Request.agent(f"{NS}/b") in pending  # the claimant learns of the new holder


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


# ------------------------------------------------------------------------------ liveness


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


async def test_the_sweep_forgets_a_holder_deleted_unseen_and_wakes_its_claimants() -> None:
    c, fake = world(agent("a", X), agent("b", X))
    await run(c, "a", "b")
    c.queue.drain()
    del fake.objects[("agentspecs", NS, "a")]
    listed = {
        k: v["metadata"]["resourceVersion"]
        for (p, ns, n), v in fake.objects.items()
        if p == "agentspecs"
        for k in [f"{ns}/{n}"]
    }

    async def list_versions(*_: Any, **__: Any) -> tuple[str, dict[str, str]]:
        return str(next(fake._rv)), listed

    fake.list_versions = list_versions  # type: ignore[attr-defined]
    assert await c.sweeper.sweep(api.AGENTS) == 1
    assert c.registry.agent(f"{NS}/a") is None
    assert Request.agent(f"{NS}/b") in c.queue.drain()


def test_a_listing_proves_deleted_only_what_it_could_have_seen() -> None:
    def at(rv: int) -> Body:
        return {"metadata": {"resourceVersion": str(rv)}}

    stored = {"ns/old": at(5), "ns/new": at(12), "ns/listed": at(3), "other/x": at(1)}
    gone = vanished(stored, "10", {"ns/listed": "3"}, namespace="ns")
    assert gone == [at(5)]  # created after the listing (12) or outside the scope: kept
    # Listed newer than stored, or never stored: changes whose events were lost.
    assert missed(stored, {"ns/listed": "4", "ns/new": "12", "ns/unseen": "2"}) == [
        "ns/listed",
        "ns/unseen",
    ]


async def test_a_claimant_never_waits_behind_an_agent_that_cannot_hold() -> None:
    bad = agent("a", X)
    bad["spec"]["resources"][0]["tag"] = "no-such-type"  # its work binding is in error
    c, _ = world(bad, agent("b", X))
    await run(c, "b")  # b has not seen a's error yet: it lets a (first by name) go first ...
    assert c.store.get(api.AGENTS, f"{NS}/b")["status"]["state"] == "Waiting"  # type: ignore[index]
    assert Request.agent(f"{NS}/a") in c.queue.drain()  # ... and gives a its turn
    await run(c, "a")
    assert Request.agent(f"{NS}/b") in c.queue.drain()  # a cannot hold: b's turn
    await run(c, "b")
    assert c.store.get(api.AGENTS, f"{NS}/b")["status"]["state"] == "Working"  # type: ignore[index]


async def test_a_pass_the_api_server_refuses_still_writes_status() -> None:
    c, fake = world(agent("a"))
    fake.refuse = {("create", "configmaps", "a-bindings"): 422}
    with pytest.raises(ApiError):
        await c.process(Request.agent(f"{NS}/a"))
    st = c.store.get(api.AGENTS, f"{NS}/a")["status"]  # type: ignore[index]
    stalled = next(x for x in st["conditions"] if x["type"] == "Stalled")
    assert stalled["status"] == "True"
    assert stalled["reason"] == "ApiRejected"
    assert "configmaps" in stalled["message"]
    assert "HTTP 422" in stalled["message"]


# ------------------------------------------------------------------------------ forged holds


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
    assert c.store.get(api.AGENTS, f"{NS}/a")["status"]["state"] == "Working"  # type: ignore[index]


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
    assert c.store.get(api.AGENTS, f"{NS}/a")["status"]["state"] == "Idle"  # type: ignore[index]


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
        x
        for x in c.store.get(api.AGENTS, f"{NS}/a")["status"]["conditions"]  # type: ignore[index]
        if x["type"] == "Ready"
    )
    assert ready["reason"] == "ForeignObject"


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


async def test_a_long_listing_is_swept_once_after_it_ends(clock: VirtualClock) -> None:
    c, _ = world(clock=clock)
    sweeps: list[Any] = []

    async def sweep(endpoint: Any) -> int:
        sweeps.append(endpoint)
        return 0

    c.sweeper.sweep = sweep  # type: ignore[method-assign]
    c.sweeper.settle = 0.05
    for _ in range(8):  # kopf's listing goes on for longer than `settle`
        c.relisted(api.RESOURCES)
        await clock.advance(0.02)
    assert sweeps == []
    await clock.advance(0.15)
    assert sweeps == [api.RESOURCES]


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
    assert c.store.get(api.AGENTS, f"{NS}/c")["status"]["state"] == "Working"  # type: ignore[index]


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
    assert c.store.get(api.AGENTS, f"{NS}/a")["status"]["state"] == "Idle"  # type: ignore[index]


# ------------------------------------------------------------------------------ the steps


def with_idle_policy(body: Body, seconds: int = 30) -> Body:
    body["spec"]["runtime"] = {"image": "example/agent:1", "idle": {"suspendAfterSeconds": seconds}}
    return body


def idle_for_long(c: Controller, fake: ScriptedApi, name: str) -> None:
    """The agent's recorded idle clock started long ago (as a restarted controller reads it)."""
    stored = fake.objects[("agentspecs", NS, name)]
    stored["status"]["session"]["idleSince"] = "2020-01-01T00:00:00Z"
    stored["metadata"]["resourceVersion"] = str(next(fake._rv))
    c.observe(api.AGENTS, copy.deepcopy(stored))
    c.queue.drain()


def replicas(fake: ScriptedApi, name: str) -> int:
    return int(fake.objects[("statefulsets", NS, f"{name}-session")]["spec"]["replicas"])


async def test_an_idle_session_is_suspended_when_due_and_resumed_after_its_hold() -> None:
    """Step 6 suspends a session only once its idle clock (kept in status) is due, by scaling
    it to zero with its template untouched; a work binding resumes it only after step 2
    acquired the hold, at the same launch."""
    c, fake = world(with_idle_policy(agent("a")))
    result = await run(c, "a")
    status = fake.objects[("agentspecs", NS, "a")]["status"]
    assert status["session"]["idleSince"]
    assert result is not None
    assert result.requeue_after is not None
    assert result.requeue_after <= 5.0  # looks again by when it is due (or the pod shows)
    template = copy.deepcopy(fake.objects[("statefulsets", NS, "a-session")]["spec"]["template"])
    idle_for_long(c, fake, "a")
    fake.writes.clear()
    result = await run(c, "a")
    assert fake.writes == [("patch", "statefulsets", "a-session"), ("status", "agentspecs", "a")]
    assert replicas(fake, "a") == 0
    assert fake.objects[("statefulsets", NS, "a-session")]["spec"]["template"] == template
    status = fake.objects[("agentspecs", NS, "a")]["status"]
    assert (status["state"], status["session"]["phase"]) == ("Suspended", "Suspended")
    assert status["session"]["idleSince"] == "2020-01-01T00:00:00Z"
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


async def test_a_suspended_agent_waiting_for_its_uri_stays_suspended_until_it_holds_it() -> None:
    """Waiting is not idle (its clock is cleared) but does not resume a suspended session
    either: it resumes once the URI's holder has released it and its own hold is acquired."""
    c, fake = world(agent("b", X), with_idle_policy(agent("a")))
    await run(c, "b", "a")
    idle_for_long(c, fake, "a")
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


async def test_an_agent_deleted_while_suspended_and_waiting_lets_go_as_any_other() -> None:
    """A suspended agent holds nothing: deleting it drops its finalizer at once and leaves the
    hold of the agent it waited for alone."""
    c, fake = world(agent("b", X), with_idle_policy(agent("a")))
    await run(c, "b", "a")
    idle_for_long(c, fake, "a")
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


STEPS: dict[str, list[str]] = {
    "finalizer": [
        "work: finalizer, acquire, deliver, status, in that order",
        "a second claimant waits without writing a hold",
    ],
    "acquire": [
        "work: finalizer, acquire, deliver, status, in that order",
        "losing the create race (409) means waiting, not an error",
        "test_a_forged_lease_in_the_holds_place_is_removed_then_the_uri_acquired",
        "test_a_suspended_agent_waiting_for_its_uri_stays_suspended_until_it_holds_it",
    ],
    "deliver": [
        "an idle agent gets its bindings, then its status",
        "work: finalizer, acquire, deliver, status, in that order",
        "test_an_orphan_left_by_an_earlier_agent_of_the_same_name_is_adopted",
    ],
    "release": [
        "test_handoff_goes_a_then_no_holder_then_b",
        "test_a_hold_is_released_only_once_the_session_has_let_go",
        "test_a_hold_whose_namespace_is_going_away_outlives_the_holders_bindings",
        "test_a_holder_is_suspended_only_after_its_hold_is_released",
    ],
    "drop finalizer": ["test_handoff_goes_a_then_no_holder_then_b"],
    "session": [
        "session: launched only once its bindings exist, then status",
        "test_an_idle_session_is_suspended_when_due_and_resumed_after_its_hold",
        "test_a_deleted_agent_whose_event_was_lost_leaves_the_view_on_its_next_write",
    ],
    "status": [
        "an idle agent gets its bindings, then its status",
        "test_a_pass_the_api_server_refuses_still_writes_status",
        "test_an_object_that_is_not_bindery_s_is_never_written",
    ],
    "events": [
        "work: finalizer, acquire, deliver, status, in that order",
        "session: launched only once its bindings exist, then status",
    ],
    "deleted": ["test_a_holder_deleted_with_orphan_propagation_still_withdraws_before_releasing"],
}
"""Each step of the pass (as agent.py's docstring names it) -> the rows (CASES names) and tests
of this module that fail when the step is removed or moved out of its place."""


def test_every_step_of_the_pass_is_covered_by_rows_that_exist() -> None:
    doc = agent_pass.__doc__ or ""
    numbered = re.findall(r"^\d+\. \*\*(.+?)\*\*", doc, flags=re.MULTILINE)
    assert numbered == list(STEPS)[:-1], "agent.py's steps and this table differ"
    assert "A deleted agent" in doc
    rows = {case.name for case in CASES} | {name for name in globals() if name.startswith("test_")}
    for step, covering in STEPS.items():
        assert covering, f"step {step!r} has no row"
        assert set(covering) <= rows, f"step {step!r} names rows that do not exist"
