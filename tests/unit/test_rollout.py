"""Rollout status: an agent's sources and state, the tally per object, the status it writes, and
the tracker that records agents and asks for coalesced status passes."""

from __future__ import annotations

import pytest

from controller.cli.why_rollout import render_text, target
from controller.domain import rollout
from controller.domain.acknowledgement import Acknowledgement, Confirmation, DeliveryView
from controller.domain.refs import Kind, Ref, Request
from controller.domain.rollout import (
    AgentRollout,
    AgentState,
    Rollout,
    Source,
    agent_rollout,
    agent_state,
    count,
    sources_of,
)
from controller.domain.status import resource_status
from controller.domain.status.conditions import health_conditions
from controller.reconcile.queue import WorkQueue
from controller.reconcile.rollouts import Rollouts
from tests.unit.domain_objects import agent, registry_of, resource, rtype, slot, tool
from tests.unit.virtual_clock import VirtualClock

A, P, R, S = AgentState.APPLIED, AgentState.PENDING, AgentState.REFUSED, AgentState.SUSPENDED
X = (Kind.RESOURCE, "a/shared")


def entry(state: AgentState, generation: int = 2, detail: str = "") -> AgentRollout:
    return AgentRollout(frozenset({Source(*X, generation)}), state, detail)


def elsewhere(state: AgentState) -> AgentRollout:
    return AgentRollout(frozenset({Source(Kind.RESOURCE, "a/other", 2)}), state)


# (entries by agent, expected (dependents, applied, pending, refused, suspended))
COUNTS = [
    ({}, (0, 0, 0, 0, 0)),
    ({"a/1": entry(A), "a/2": entry(A)}, (2, 2, 0, 0, 0)),
    ({"a/1": entry(A), "a/2": entry(P)}, (2, 1, 1, 0, 0)),
    ({"a/1": entry(A), "a/2": entry(R, detail="no")}, (2, 1, 0, 1, 0)),
    ({"a/1": entry(S), "a/2": entry(A)}, (2, 1, 0, 0, 1)),
    # read an older generation: pending, whatever its session says
    ({"a/1": entry(A, generation=1)}, (1, 0, 1, 0, 0)),
    ({"a/1": entry(R, generation=1)}, (1, 0, 1, 0, 0)),
    # suspended: it receives the new one on resume, whatever it read
    ({"a/1": entry(S, generation=1)}, (1, 0, 0, 0, 1)),
    # an entry not naming the object is not its dependent
    ({"a/1": elsewhere(A), "a/2": entry(A)}, (1, 1, 0, 0, 0)),
]


@pytest.mark.parametrize(("entries", "expected"), COUNTS)
def test_count(entries: dict[str, AgentRollout], expected: tuple[int, ...]) -> None:
    got = count(*X, 2, entries.items())
    assert (got.dependents, got.applied, got.pending, got.refused, got.suspended) == expected
    assert got.delivered == f"{expected[1]}/{expected[0]}"


def test_laggards_refused_first_then_pending_by_name_capped() -> None:
    entries = {f"a/p{i}": entry(P, detail="has sha256:x") for i in range(5)}
    entries["a/z"] = entry(R, detail="schema too new")
    entries["a/old"] = entry(A, generation=1)
    got = count(*X, 2, entries.items(), max_laggards=3)
    assert [(lag.agent, lag.state) for lag in got.laggards] == [
        ("a/z", R),
        ("a/old", P),
        ("a/p0", P),
    ]
    assert got.stale == ("a/old",)
    assert got.laggards[1].detail == "resolved from generation 1"


DELIVERED = [
    # (entries, status, reason, message contains)
    ({}, "True", "Delivered", "no agent depends on it"),
    ({"a/1": entry(A)}, "True", "Delivered", "applied by 1 of 1"),
    ({"a/1": entry(A), "a/2": entry(S)}, "True", "Delivered", "1 suspended"),
    ({"a/1": entry(P, detail="has sha256:aa")}, "False", "Pending", "a/1 (has sha256:aa)"),
    ({"a/1": entry(R, detail="no thanks")}, "False", "Refused", "a/1 (no thanks)"),
    # pending wins over refused: it is still progressing
    ({"a/1": entry(R), "a/2": entry(P)}, "False", "Pending", "1 pending"),
]


@pytest.mark.parametrize(("entries", "status", "reason", "message"), DELIVERED)
def test_delivered_condition(
    entries: dict[str, AgentRollout], status: str, reason: str, message: str
) -> None:
    rollout = count(*X, 2, entries.items())
    built = resource_status(generation=2, errors=[], holder=None, old={}, now="t", rollout=rollout)
    conditions = {c["type"]: c for c in built["conditions"]}
    delivered = conditions["Delivered"]
    assert (delivered["status"], delivered["reason"]) == (status, reason)
    assert message in delivered["message"]
    assert delivered["observedGeneration"] == 2
    # a pending rollout is progress (Reconciling), never a failure (Stalled); Ready is untouched
    assert conditions["Reconciling"]["status"] == ("True" if reason == "Pending" else "False")
    assert conditions["Stalled"]["status"] == "False"
    assert conditions["Ready"]["status"] == "True"
    assert built["delivered"] == rollout.delivered
    assert Rollout.from_status(built["rollout"]) == rollout.__class__(
        **{**rollout.__dict__, "stale": ()}
    )


def test_a_stalled_object_stays_stalled_while_its_rollout_is_pending() -> None:
    rollout = count(*X, 2, {"a/1": entry(P)}.items())
    built = resource_status(
        generation=2, errors=["conflict"], holder=None, old={}, now="t", rollout=rollout
    )
    conditions = {c["type"]: c for c in built["conditions"]}
    assert conditions["Stalled"]["status"] == "True"
    assert conditions["Reconciling"]["status"] == "False"
    assert conditions["Delivered"]["reason"] == "Pending"


def test_without_a_rollout_the_status_is_as_before() -> None:
    built = resource_status(generation=2, errors=[], holder=None, old={}, now="t")
    assert "rollout" not in built
    assert "delivered" not in built
    assert [c["type"] for c in built["conditions"]] == [
        c["type"] for c in health_conditions({"type": "Ready", **_ready()})
    ]


def _ready() -> dict[str, object]:
    return {"status": "True", "reason": "Valid", "message": "", "observedGeneration": 2}


def view(confirmation: Confirmation, record: Acknowledgement | None = None) -> DeliveryView:
    return DeliveryView(
        digest="sha256:" + "b" * 64, written_at="t", confirmation=confirmation, record=record
    )


STATES = [
    (Confirmation.CONFIRMED, False, A),
    (Confirmation.UNVERIFIABLE, False, A),
    (Confirmation.PENDING, False, P),
    (Confirmation.REFUSED, False, R),
    (Confirmation.PENDING, True, S),
    (Confirmation.CONFIRMED, True, S),
]


@pytest.mark.parametrize(("confirmation", "suspended", "state"), STATES)
def test_agent_state(confirmation: Confirmation, suspended: bool, state: AgentState) -> None:
    assert agent_state(view(confirmation), suspended=suspended) is state


WORLD = (
    rtype("vcs"),
    rtype("git-checkout", "vcs"),
    resource("a/repo", "git-checkout", "file:///repo"),
    resource("a/notes", "vcs", "file:///notes"),
    tool("a/git", slot("repo", "git-checkout")),
)


def test_sources_are_what_the_resolution_read() -> None:
    bindings = [("notes", "vcs", "file:///notes"), ("r", "git-checkout", "file:///repo")]
    registry = registry_of(*WORLD, agent("a/dev", bindings=bindings, tools=["git", "gone"]))
    dev = registry.agent("a/dev")
    assert dev is not None
    tracker = Rollouts(registry, lambda request, delay: None)
    got = sources_of(dev, registry.resolve("a/dev"), tracker.generation)
    assert {(s.kind, s.key) for s in got} == {
        (Kind.TOOL, "a/git"),  # "gone" is not registered: nothing rolls out from it
        (Kind.RESOURCE, "a/repo"),
        (Kind.RESOURCE, "a/notes"),
        (Kind.TYPE, "vcs"),
        (Kind.TYPE, "git-checkout"),
    }


def test_pending_detail_names_the_digest_the_session_has() -> None:
    registry = registry_of(*WORLD, agent("a/dev", tools=["git"]))
    dev = registry.agent("a/dev")
    assert dev is not None
    record = Acknowledgement(applied_digest="sha256:" + "a" * 64, acknowledges=True)
    got = agent_rollout(
        dev,
        registry.resolve("a/dev"),
        view(Confirmation.PENDING, record),
        suspended=False,
        generation=lambda kind, key: 1,
    )
    assert got.detail == f"applied sha256:{'a' * 12}, not yet sha256:{'b' * 12}"


def test_tracker_wakes_the_sources_of_a_changed_entry_only() -> None:
    registry = registry_of(
        *WORLD, agent("a/dev", bindings=[("r", "git-checkout", "file:///repo")], tools=["git"])
    )
    woken: list[tuple[Request, float]] = []
    tracker = Rollouts(registry, lambda request, delay: woken.append((request, delay)))
    dev = registry.agent("a/dev")
    assert dev is not None
    resolution = registry.resolve("a/dev")
    tracker.observe(dev, resolution, view(Confirmation.PENDING), None)
    assert Request(Kind.RESOURCE, Ref("a", "repo")) in {r for r, _ in woken}
    assert Request(Kind.TOOL, Ref("a", "git")) in {r for r, _ in woken}
    woken.clear()
    tracker.observe(dev, resolution, view(Confirmation.PENDING), None)
    assert woken == []  # unchanged: an idle fleet writes nothing
    tracker.observe(dev, resolution, view(Confirmation.CONFIRMED), None)
    assert woken
    repo = tracker.count(Kind.RESOURCE, "a/repo", 0)
    assert repo is not None
    assert (repo.dependents, repo.applied) == (1, 1)
    woken.clear()
    tracker.forget("a/dev")
    assert Request(Kind.RESOURCE, Ref("a", "repo")) in {r for r, _ in woken}
    gone = tracker.count(Kind.RESOURCE, "a/repo", 0)
    assert gone is not None
    assert gone.dependents == 0


def test_tracker_is_cold_until_every_agent_known_at_start_is_recorded() -> None:
    repo = [("r", "git-checkout", "file:///repo")]
    registry = registry_of(
        *WORLD, agent("a/dev", bindings=repo, tools=["git"]), agent("a/ops", bindings=repo)
    )
    woken: list[Request] = []
    warmed: list[bool] = []
    tracker = Rollouts(registry, lambda request, delay: woken.append(request))
    tracker.on_warm = lambda: warmed.append(True)
    tracker.expect(["a/dev", "a/ops"])
    for key in ("a/dev", "a/ops"):
        assert tracker.count(Kind.RESOURCE, "a/repo", 0) is None
        obj = registry.agent(key)
        assert obj is not None
        tracker.observe(obj, registry.resolve(key), view(Confirmation.CONFIRMED), None)
    assert woken == []  # cold: the status passes come once, when it turns warm
    assert warmed == [True]
    counted = tracker.count(Kind.RESOURCE, "a/repo", 0)
    assert counted is not None
    assert counted.applied == 2


def test_tracker_resolves_again_only_agents_still_stale_at_the_recheck() -> None:
    registry = registry_of(*WORLD)
    woken: list[tuple[Request, float]] = []
    tracker = Rollouts(registry, lambda request, delay: woken.append((request, delay)))
    stale = count(*X, 2, {"a/1": entry(A, generation=1)}.items())
    tracker.stale(*X, stale)
    assert [r.kind for r, _ in woken] == [Kind.RESOURCE]  # first sight: look again later
    woken.clear()
    tracker.stale(*X, stale)
    assert Request(Kind.AGENT, Ref("a", "1")) in {r for r, _ in woken}


@pytest.mark.parametrize(
    ("given", "expected"),
    [
        ("dev", None),
        ("resource/shared", (Kind.RESOURCE, "shared")),
        ("resources.bindery.dev/shared", (Kind.RESOURCE, "shared")),
        ("Tool/git", (Kind.TOOL, "git")),
        ("resourcetype/fs-directory", (Kind.TYPE, "fs-directory")),
        ("resourcegrant/share", (Kind.GRANT, "share")),
    ],
)
def test_why_targets(given: str, expected: tuple[Kind, str] | None) -> None:
    assert target(given) == expected


@pytest.mark.parametrize("given", ["agentspec/dev", "pod/x", "resource/"])
def test_why_refuses_other_kinds_naming_those_it_takes(given: str) -> None:
    with pytest.raises(ValueError, match="resource, tool, resourcetype, resourcegrant"):
        target(given)


def test_why_names_the_laggards_and_why() -> None:
    entries = {f"a/p{i}": entry(P, detail=f"applied sha256:{i}") for i in range(12)}
    entries["a/z"] = entry(R, detail="schema too new")
    counted = count(*X, 2, entries.items())
    built = resource_status(generation=2, errors=[], holder=None, old={}, now="t", rollout=counted)
    body = {"metadata": {"name": "shared", "namespace": "a", "generation": 2}, "status": built}
    doc = rollout.explain(Kind.RESOURCE, "a/shared", body)
    assert doc["verdict"] == "12 dependent agent(s) have not applied it yet"
    assert doc["unlisted"] == 3  # 13 lagging, 10 listed
    text = render_text(doc)
    assert "Resource a/shared (generation 2)" in text
    assert "delivered 0/13: 0 applied, 12 pending, 1 refused" in text
    assert "a/z   Refused schema too new" in text
    assert "... and 3 more" in text


def test_why_says_when_the_counts_are_for_an_older_generation() -> None:
    counted = count(*X, 2, {"a/1": entry(A)}.items())
    built = resource_status(generation=2, errors=[], holder=None, old={}, now="t", rollout=counted)
    body = {"metadata": {"name": "shared", "namespace": "a", "generation": 3}, "status": built}
    assert "for generation 2" in rollout.explain(Kind.RESOURCE, "a/shared", body)["verdict"]
    bare = {"metadata": {"name": "shared", "namespace": "a", "generation": 3}, "status": {}}
    assert "not counted" in rollout.explain(Kind.RESOURCE, "a/shared", bare)["verdict"]


async def test_a_burst_of_acknowledgements_is_one_status_pass_per_delay() -> None:
    """300 dependents applying a change within a second bring the Resource one status pass
    (a worker takes each request as soon as it is queued), not 300."""
    repo = [("r", "git-checkout", "file:///repo")]
    agents = [agent(f"a/s{i}", bindings=repo) for i in range(300)]
    registry = registry_of(*WORLD, *agents)
    clock = VirtualClock()
    queue: WorkQueue[Request] = WorkQueue(clock)
    tracker = Rollouts(registry, queue.add_after, delay=1.0)
    resolved = {a.meta.key: registry.resolve(a.meta.key) for a in agents}
    for a in agents:
        tracker.observe(a, resolved[a.meta.key], view(Confirmation.PENDING), None)
    await clock.advance(1.0)
    queue.drain()
    passes: list[Request] = []
    for a in agents:  # they apply it over 0.9 s; a worker takes what is queued at once
        tracker.observe(a, resolved[a.meta.key], view(Confirmation.CONFIRMED), None)
        await clock.advance(0.003)
        passes += queue.drain()
    await clock.advance(1.0)
    passes += queue.drain()
    assert sorted(passes) == sorted(
        [Request(Kind.RESOURCE, Ref("a", "repo")), Request(Kind.TYPE, Ref("", "git-checkout"))]
    )
    counted = tracker.count(Kind.RESOURCE, "a/repo", 0)
    assert counted is not None
    assert counted.delivered == "300/300"


async def test_the_acknowledgement_that_completes_a_rollout_queues_its_status_pass_at_once() -> (
    None
):
    """Delivered turns True when the last dependent applied, not a coalescing delay later; an
    acknowledgement that leaves one pending still waits for the delay."""
    repo = [("r", "git-checkout", "file:///repo")]
    agents = [agent(f"a/s{i}", bindings=repo) for i in range(3)]
    registry = registry_of(*WORLD, *agents)
    clock = VirtualClock()
    queue: WorkQueue[Request] = WorkQueue(clock)
    tracker = Rollouts(registry, queue.add_after, delay=1.0)
    resolved = {a.meta.key: registry.resolve(a.meta.key) for a in agents}
    for a in agents:
        tracker.observe(a, resolved[a.meta.key], view(Confirmation.PENDING), None)
    await clock.advance(1.0)
    queue.drain()
    first, second, last = agents
    tracker.observe(first, resolved[first.meta.key], view(Confirmation.CONFIRMED), None)
    tracker.observe(second, resolved[second.meta.key], view(Confirmation.REFUSED), None)
    await clock.advance(0.5)
    assert queue.drain() == set()  # one still pending: coalesced
    tracker.observe(last, resolved[last.meta.key], view(Confirmation.CONFIRMED), None)
    await clock.advance(0.0)
    assert Request(Kind.RESOURCE, Ref("a", "repo")) in queue.drain()  # refused is settled too
    await clock.advance(1.0)
    assert queue.drain() == set()  # the delayed pass was replaced, not added
    counted = tracker.count(Kind.RESOURCE, "a/repo", 0)
    assert counted is not None
    assert (counted.applied, counted.refused, counted.pending) == (2, 1, 0)
    tracker.observe(last, resolved[last.meta.key], view(Confirmation.PENDING), None)
    await clock.advance(0.0)
    assert queue.drain() == set()  # pending again: back to the delay


def test_a_suspended_dependent_is_settled_and_one_of_an_older_generation_is_not() -> None:
    """Suspended counts as settled whatever it read; applied at an older generation does not."""
    registry = registry_of(*WORLD)
    woken: list[tuple[Request, float]] = []
    tracker = Rollouts(registry, lambda request, delay: woken.append((request, delay)))
    current = tracker.generation(Kind.RESOURCE, "a/repo")
    assert current is not None

    def read(generation: int, state: AgentState) -> AgentRollout:
        return AgentRollout(frozenset({Source(Kind.RESOURCE, "a/repo", generation)}), state)

    repo = Request(Kind.RESOURCE, Ref("a", "repo"))
    tracker._put("a/sleepy", read(current - 1, S))
    tracker._put("a/busy", read(current, P))
    assert woken[-1] == (repo, 1.0)
    tracker._put("a/busy", read(current - 1, A))  # applied what it had: still stale
    assert woken[-1] == (repo, 1.0)
    tracker._put("a/busy", read(current, A))
    assert woken[-1] == (repo, 0.0)
