"""Work-hold decisions: one holder per work URI, handoff A -> no holder -> B, fair waiting order.

``plan_work`` only decides; the API server arbitrates. The property tests at the bottom drive
``plan_work`` against a simulated API server (a dict with create-if-absent and delete-with-
precondition) under arbitrary evaluation orders and stale views, and check the contract's safety
rule (the work URI is delivered to at most one agent, and only to its holder) and fairness.
"""

from __future__ import annotations

import random
import re
from dataclasses import dataclass, field, replace

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from controller.domain.work import Claim, Hold, WorkPlan, WorkState, hold_name, plan_work

URI = "github-issue://example/project/123"
OTHER_URI = "github-issue://example/project/456"
ME = "team/alice"
ME_UID = "uid-alice"

DNS1123_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")


def hold(uri: str, holder: str, holder_uid: str, rv: str = "1") -> Hold:
    return Hold(
        uri=uri,
        holder=holder,
        holder_uid=holder_uid,
        name=hold_name(uri),
        resource_version=rv,
        uid=f"lease-{holder_uid}-{rv}",
    )


def plan(
    *,
    desired: str | None = URI,
    holds: dict[str, Hold] | None = None,
    own: list[Hold] | None = None,
    holder_exists: bool = True,
    since: str = "",
    rivals: list[Claim] | None = None,
) -> WorkPlan:
    return plan_work(
        agent=ME,
        agent_uid=ME_UID,
        desired_uri=desired,
        holds=holds or {},
        own_holds=own or [],
        holder_exists=holder_exists,
        me=Claim(ME, since),
        rivals=rivals or [],
    )


# ------------------------------------------------------------------------------------ hold_name


def test_hold_name_is_deterministic_and_a_valid_object_name() -> None:
    name = hold_name(URI)
    assert name == hold_name(URI)
    assert len(name) <= 63
    assert DNS1123_LABEL.match(name), name
    assert name.startswith("bindery-work-")


@pytest.mark.parametrize(
    ("a", "b"),
    [
        ("git://example/Repo", "git://example/repo"),  # case
        ("git://example/repo/", "git://example/repo"),  # trailing slash
        ("git://example/a%20b", "git://example/a b"),  # percent-encoding
        ("git://example/%7e", "git://example/%7E"),  # percent-encoding case
        ("git://example/repo", "git://example/repp"),  # last byte
    ],
)
def test_hold_name_distinguishes_uris_differing_by_one_byte(a: str, b: str) -> None:
    assert hold_name(a) != hold_name(b)


@given(st.text(min_size=1, max_size=4096))
def test_hold_name_is_always_a_dns1123_label(uri: str) -> None:
    name = hold_name(uri)
    assert len(name) <= 63
    assert DNS1123_LABEL.match(name), name


@given(st.text(min_size=1, max_size=200), st.text(min_size=1, max_size=200))
def test_hold_name_is_injective_in_practice(a: str, b: str) -> None:
    assert (hold_name(a) == hold_name(b)) == (a == b)


# ------------------------------------------------------------------------------------ Claim


def test_claim_order_recorded_before_unrecorded_then_oldest_then_name() -> None:
    claims = [
        Claim("ns/zed"),
        Claim("ns/amy"),
        Claim("ns/bob", "2024-01-01T00:00:02Z"),
        Claim("ns/ann", "2024-01-01T00:00:02Z"),
        Claim("ns/yan", "2024-01-01T00:00:01Z"),
    ]
    ordered = [c.agent for c in sorted(claims, key=Claim.order)]
    assert ordered == ["ns/yan", "ns/ann", "ns/bob", "ns/amy", "ns/zed"]


# ------------------------------------------------------------------------------------ plan_work


def test_idle_without_desired_uri_releases_every_own_hold_sorted() -> None:
    own = [
        hold("z://b", ME, ME_UID),
        hold("a://x", ME, ME_UID),
        hold("m://q", ME, ME_UID),
    ]
    result = plan(desired=None, own=own, holds={h.uri: h for h in own})
    assert result.state is WorkState.IDLE
    assert result.uri == ""
    assert [h.uri for h in result.release] == ["a://x", "m://q", "z://b"]
    assert not result.acquire
    assert not result.deliver
    assert result.reclaim is None
    assert result.waiting_for == ""


def test_idle_without_holds_releases_nothing() -> None:
    result = plan(desired=None)
    assert result == WorkPlan(state=WorkState.IDLE)


def test_release_order_is_independent_of_input_order() -> None:
    own = [hold(f"s://{i}", ME, ME_UID) for i in (3, 1, 2)]
    first = plan(desired=None, own=own)
    second = plan(desired=None, own=list(reversed(own)))
    assert first.release == second.release
    assert [h.uri for h in first.release] == ["s://1", "s://2", "s://3"]


def test_release_ties_on_uri_are_ordered_by_name() -> None:
    a = replace(hold(URI, ME, ME_UID), name="b-name")
    b = replace(hold(URI, ME, ME_UID), name="a-name")
    result = plan(desired=None, own=[a, b])
    assert [h.name for h in result.release] == ["a-name", "b-name"]


def test_working_when_the_hold_names_this_agents_uid() -> None:
    mine = hold(URI, ME, ME_UID)
    result = plan(holds={URI: mine}, own=[mine], rivals=[Claim("team/bob", "2000-01-01T00:00:00Z")])
    assert result.state is WorkState.WORKING
    assert result.uri == URI
    assert result.deliver is True
    assert result.acquire is False
    assert result.release == []  # the hold it works on is never released
    assert result.reclaim is None
    assert result.waiting_for == ""


def test_working_is_decided_by_uid_not_by_name() -> None:
    """A recreated agent (same name, new uid) does not inherit the old incarnation's hold."""
    old_incarnation = hold(URI, ME, "uid-alice-old")
    result = plan(holds={URI: old_incarnation}, holder_exists=False)
    assert result.state is WorkState.WAITING
    assert result.deliver is False
    assert result.reclaim == old_incarnation
    assert result.acquire is True


def test_waiting_when_held_by_an_existing_other_agent() -> None:
    theirs = hold(URI, "team/bob", "uid-bob")
    result = plan(holds={URI: theirs}, holder_exists=True, since="2024-01-01T00:00:00Z")
    assert result.state is WorkState.WAITING
    assert result.uri == URI
    assert result.waiting_for == "team/bob"
    assert result.deliver is False
    assert result.acquire is False
    assert result.reclaim is None


def test_waiting_for_holder_even_when_first_in_line() -> None:
    theirs = hold(URI, "team/bob", "uid-bob")
    result = plan(holds={URI: theirs}, rivals=[Claim("team/carol")], since="2000-01-01T00:00:00Z")
    assert result.waiting_for == "team/bob"
    assert not result.acquire


def test_acquire_when_free_and_first_in_line() -> None:
    result = plan(
        since="2024-01-01T00:00:00Z",
        rivals=[Claim("team/bob", "2024-01-01T00:00:05Z"), Claim("team/aaron")],
    )
    assert result.state is WorkState.WAITING  # held only once the create succeeds
    assert result.acquire is True
    assert result.deliver is False
    assert result.reclaim is None
    assert result.waiting_for == ""
    assert result.uri == URI


def test_acquire_when_free_and_alone() -> None:
    result = plan()
    assert result.acquire is True
    assert result.deliver is False


def test_earlier_recorded_rival_goes_first() -> None:
    result = plan(
        since="2024-01-01T00:00:05Z",
        rivals=[
            Claim("team/carol", "2024-01-01T00:00:03Z"),
            Claim("team/bob", "2024-01-01T00:00:01Z"),
            Claim("team/aaron"),
        ],
    )
    assert result.state is WorkState.WAITING
    assert result.acquire is False
    assert result.deliver is False
    assert result.waiting_for == "team/bob"  # the first in line, not merely any rival ahead


def test_recorded_rival_beats_unrecorded_me() -> None:
    result = plan(since="", rivals=[Claim("team/zed", "2030-01-01T00:00:00Z")])
    assert result.acquire is False
    assert result.waiting_for == "team/zed"


def test_recorded_me_beats_unrecorded_rival_with_smaller_name() -> None:
    result = plan(since="2030-01-01T00:00:00Z", rivals=[Claim("team/aaa")])
    assert result.acquire is True


def test_equal_waiting_since_ties_by_name() -> None:
    t = "2024-01-01T00:00:00Z"
    ahead = plan(since=t, rivals=[Claim("team/aaron", t)])
    assert ahead.acquire is False
    assert ahead.waiting_for == "team/aaron"
    behind = plan(since=t, rivals=[Claim("team/bob", t)])
    assert behind.acquire is True


def test_both_unrecorded_ties_by_name() -> None:
    assert plan(rivals=[Claim("team/aaron")]).waiting_for == "team/aaron"
    assert plan(rivals=[Claim("team/bob")]).acquire is True


def test_stale_hold_is_reclaimed_and_acquired() -> None:
    stale = hold(URI, "team/gone", "uid-gone")
    result = plan(holds={URI: stale}, holder_exists=False)
    assert result.reclaim == stale
    assert result.acquire is True
    assert result.deliver is False
    assert result.state is WorkState.WAITING
    assert result.waiting_for == "team/gone"


def test_stale_hold_with_a_rival_ahead_is_reclaimed_but_not_acquired() -> None:
    stale = hold(URI, "team/gone", "uid-gone")
    result = plan(holds={URI: stale}, holder_exists=False, rivals=[Claim("team/aaron")])
    assert result.reclaim == stale
    assert result.acquire is False
    assert result.waiting_for == "team/aaron"


def test_changing_desired_uri_releases_old_own_hold_only() -> None:
    old = hold(OTHER_URI, ME, ME_UID)
    result = plan(desired=URI, own=[old], holds={OTHER_URI: old})
    assert result.release == [old]
    assert result.acquire is True
    assert result.uri == URI


def test_changing_desired_uri_keeps_new_own_hold() -> None:
    old = hold(OTHER_URI, ME, ME_UID)
    new = hold(URI, ME, ME_UID)
    result = plan(desired=URI, own=[new, old], holds={URI: new, OTHER_URI: old})
    assert result.state is WorkState.WORKING
    assert result.release == [old]
    assert result.deliver is True


def test_waiting_still_releases_holds_on_other_uris() -> None:
    old = hold(OTHER_URI, ME, ME_UID)
    theirs = hold(URI, "team/bob", "uid-bob")
    result = plan(desired=URI, own=[old], holds={URI: theirs})
    assert result.state is WorkState.WAITING
    assert result.release == [old]


def test_only_the_desired_uri_is_looked_up() -> None:
    """A hold on some other URI in ``holds`` says nothing about the desired one."""
    theirs = hold(OTHER_URI, "team/bob", "uid-bob")
    result = plan(desired=URI, holds={OTHER_URI: theirs})
    assert result.acquire is True
    assert result.waiting_for == ""


# ------------------------------------------------------------------------------------ simulation


@dataclass
class Agent:
    name: str
    uid: str
    since: str
    wants: bool = True
    exists: bool = True


@dataclass
class World:
    """The API server's view (holds by URI) plus the agents, and what each session was sent."""

    agents: list[Agent]
    server: dict[str, Hold] = field(default_factory=dict)
    delivered: dict[str, bool] = field(default_factory=dict)
    state: dict[str, WorkState] = field(default_factory=dict)
    acquisitions: list[str] = field(default_factory=list)
    history: list[tuple[dict[str, Hold], dict[str, tuple[bool, bool]]]] = field(
        default_factory=list
    )
    rv: int = 0

    def snapshot(self) -> None:
        self.history.append((dict(self.server), {a.name: (a.wants, a.exists) for a in self.agents}))

    # --- the API server: create-if-absent and delete with a precondition

    def create(self, agent: Agent) -> bool:
        if URI in self.server:
            return False
        self.rv += 1
        self.server[URI] = hold(URI, agent.name, agent.uid, str(self.rv))
        return True

    def delete(self, h: Hold) -> None:
        if self.server.get(h.uri) == h:
            del self.server[h.uri]

    # --- one reconcile pass, in the reconciler's order: reclaim, acquire, deliver, release

    def evaluate(self, agent: Agent, lag: int) -> None:
        server_view, agents_view = self.history[max(0, len(self.history) - 1 - lag)]
        seen = server_view.get(URI)
        holder_exists = seen is not None and any(
            a.uid == seen.holder_uid and agents_view[a.name][1] for a in self.agents
        )
        rivals = [
            Claim(a.name, a.since)
            for a in self.agents
            if a is not agent
            and agents_view[a.name] == (True, True)
            and not (seen is not None and seen.holder == a.name)
        ]
        result = plan_work(
            agent=agent.name,
            agent_uid=agent.uid,
            desired_uri=URI if agent.wants else None,
            holds={URI: seen} if seen is not None else {},
            own_holds=[h for h in server_view.values() if h.holder_uid == agent.uid],
            holder_exists=holder_exists,
            me=Claim(agent.name, agent.since),
            rivals=rivals,
        )
        assert not (result.acquire and result.deliver)
        assert not (result.deliver and result.state is not WorkState.WORKING)
        deliver, state = result.deliver, result.state
        if result.reclaim is not None:
            self.delete(result.reclaim)
        if result.acquire and self.create(agent):
            self.acquisitions.append(agent.name)
            deliver, state = True, WorkState.WORKING
        self.delivered[agent.name] = deliver
        self.state[agent.name] = state
        for h in result.release:  # only after the bindings without it were delivered
            self.delete(h)

    def check(self) -> None:
        live = [a for a in self.agents if a.exists]
        delivered = [a for a in live if self.delivered.get(a.name)]
        assert len(delivered) <= 1, f"two sessions were sent {URI}: {delivered}"
        working = [a for a in live if self.state.get(a.name) is WorkState.WORKING]
        assert len(working) <= 1, f"two agents are Working on {URI}: {working}"
        for a in delivered:
            current = self.server.get(URI)
            assert current is not None
            assert current.holder_uid == a.uid, "delivered without holding"


TIMES = ["", "2024-01-01T00:00:01Z", "2024-01-01T00:00:02Z", "2024-01-01T00:00:03Z"]

agents_strategy = st.lists(
    st.tuples(st.sampled_from(["a", "b", "c", "d", "e"]), st.sampled_from(TIMES)),
    min_size=1,
    max_size=5,
    unique_by=lambda t: t[0],
)

Op = tuple[str, int, int]
ops_strategy = st.lists(
    st.tuples(
        st.sampled_from(["eval", "eval", "eval", "drop", "delete"]),
        st.integers(0, 4),
        st.integers(0, 3),
    ),
    max_size=60,
)


def make_world(specs: list[tuple[str, str]]) -> World:
    return World([Agent(f"ns/{n}", f"uid-{n}", t) for n, t in specs])


@settings(max_examples=300, deadline=None)
@given(agents_strategy, ops_strategy)
def test_never_two_holders_under_any_order_and_stale_views(
    specs: list[tuple[str, str]], ops: list[Op]
) -> None:
    world = make_world(specs)
    world.snapshot()
    for kind, index, lag in ops:
        agent = world.agents[index % len(world.agents)]
        if kind == "drop":
            agent.wants = False
        elif kind == "delete":
            agent.exists = False
        elif agent.exists:
            before = set(world.acquisitions)
            wanting = [Claim(a.name, a.since) for a in world.agents if a.wants and a.exists]
            world.evaluate(agent, lag)
            if set(world.acquisitions) != before:
                # Fair: whoever acquires is first in line among those still waiting for it.
                assert agent.name == min(wanting, key=Claim.order).agent
        world.check()
        world.snapshot()


@settings(max_examples=300, deadline=None)
@given(agents_strategy, st.lists(st.integers(0, 4), min_size=1, max_size=40), st.booleans())
def test_first_to_acquire_is_the_minimum_claim(
    specs: list[tuple[str, str]], order: list[int], stale_hold: bool
) -> None:
    world = make_world(specs)
    if stale_hold:
        world.server[URI] = hold(URI, "ns/gone", "uid-gone")
    world.snapshot()
    for index in order:
        world.evaluate(world.agents[index % len(world.agents)], lag=0)
        world.check()
        world.snapshot()
    expected = min((Claim(a.name, a.since) for a in world.agents), key=Claim.order).agent
    assert world.acquisitions[:1] in ([], [expected])
    if expected in {world.agents[i % len(world.agents)].name for i in order}:
        assert world.acquisitions[:1] == [expected]


@settings(max_examples=200, deadline=None)
@given(agents_strategy, st.randoms(use_true_random=False))
def test_handoff_visits_claimants_in_fair_order(
    specs: list[tuple[str, str]], rnd: random.Random
) -> None:
    """Each holder finishes (drops its work binding) in turn; the URI is handed A -> none -> B."""
    world = make_world(specs)
    world.snapshot()
    expected = [
        c.agent for c in sorted((Claim(a.name, a.since) for a in world.agents), key=Claim.order)
    ]
    for _ in range(len(world.agents) * 20):
        agent = rnd.choice(world.agents)
        if world.state.get(agent.name) is WorkState.WORKING and rnd.random() < 0.5:
            agent.wants = False
        world.evaluate(agent, lag=0)
        world.check()
        world.snapshot()
    assert world.acquisitions == expected[: len(world.acquisitions)]
    # Then every holder finishes in turn: each claimant gets the URI exactly once, in order.
    for _ in range(len(world.agents) * 3):
        for agent in world.agents:
            if world.state.get(agent.name) is WorkState.WORKING:
                agent.wants = False
            world.evaluate(agent, lag=0)
            world.check()
            world.snapshot()
    assert world.acquisitions == expected


# ------------------------------------------------------------------------------ the hold Lease


def test_a_hold_lease_reads_back_as_the_hold_it_was_written_from() -> None:
    """One wire model both ways: the Lease a hold is written as (to create it, or to guard its
    release) reads back as that hold; a Lease naming no URI or no holder is no hold."""
    observed = Hold(
        uri="gh://org/repo/issues/1",
        holder="team/a",
        holder_uid="a-uid",
        name=hold_name("gh://org/repo/issues/1"),
        resource_version="42",
        uid="lease-uid",
        namespace="bindery-system",
    )
    assert Hold.from_lease(observed.to_lease()) == observed
    new = Hold(uri="gh://org/repo/issues/1", holder="team/a", holder_uid="a-uid")
    lease = new.to_lease({"app.kubernetes.io/managed-by": "bindery"})
    md = lease["metadata"]
    assert (md["name"], md["namespace"]) == (hold_name(new.uri), "team")  # its holder's
    assert "uid" not in md
    assert "resourceVersion" not in md  # a create carries neither
    assert md["finalizers"] == ["bindery.dev/hold"]
    assert md["labels"] == {"app.kubernetes.io/managed-by": "bindery"}
    assert Hold.from_lease(lease) == replace(new, name=hold_name(new.uri), namespace="team")
    assert Hold.from_lease({**lease, "spec": {}}) is None
    assert Hold.from_lease(None) is None
