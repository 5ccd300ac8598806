"""One agent pass, as a table of world states: initial objects + scripted API answers -> the
ordered writes, the objects in the world after the pass, the agents' states and the events.

The world (an in-memory stand-in API, see ``agent_pass_world``) pins the *order* of a pass in
milliseconds. The other tests of each step live beside this module, one module per step group of
controller/reconcile/agent.py (``test_agent_pass_holds``, ``_deliver``, ``_release``,
``_session``, ``_status``, and ``_view`` for what happens between passes). Every numbered step is
covered by rows named in :data:`STEPS`; each step has a row that fails when the step is removed
or moved.
"""

from __future__ import annotations

import importlib
import pathlib
import re
from dataclasses import dataclass, field

import pytest

from controller.k8s import api
from controller.reconcile import agent as agent_pass
from tests.unit.agent_pass_world import (
    LEASE,
    NS,
    Body,
    Write,
    X,
    agent,
    hold_body,
    run,
    with_runtime,
    world,
    world_objects,
)


@dataclass(frozen=True)
class Case:
    name: str
    agents: tuple[Body, ...]
    run: tuple[str, ...]
    writes: list[Write]
    states: dict[str, str]
    objects: set[tuple[str, str]]
    """The objects the controller made (plural, name): the world after the passes."""
    refuse: dict[Write, int] = field(default_factory=dict)
    events: list[str] = field(default_factory=list)
    requeue: float | None = None
    """When the last pass asks to be looked at again (None: it does not)."""


CASES = [
    Case(
        "an idle agent gets its bindings, then its status",
        (agent("a"),),
        ("a",),
        [("create", "configmaps", "a-bindings"), ("status", "agentspecs", "a")],
        {"a": "Idle"},
        {("configmaps", "a-bindings")},
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
        {("leases", LEASE), ("configmaps", "a-bindings")},
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
        {("leases", LEASE), ("configmaps", "a-bindings"), ("configmaps", "b-bindings")},
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
        {("leases", LEASE), ("configmaps", "a-bindings")},  # the lease is the other holder's
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
        {("leases", LEASE), ("configmaps", "a-bindings"), ("statefulsets", "a-session")},
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
    assert world_objects(fake) == case.objects
    if case.refuse:
        assert fake.objects[("leases", NS, LEASE)]["spec"]["holderIdentity"] == f"{NS}/zed"
    assert result is not None
    assert result.requeue_after == case.requeue
    states = {n: c.store.status(api.AGENTS, f"{NS}/{n}")["state"] for n in case.states}
    assert states == case.states
    assert fake.events == case.events


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
(of this module and its ``test_agent_pass_*`` siblings) that fail when the step is removed or
moved out of its place."""


def step_tests() -> set[str]:
    """The tests of this module and of its siblings, one per step group."""
    here = pathlib.Path(__file__)
    names = {name for name in globals() if name.startswith("test_")}
    for path in sorted(here.parent.glob(f"{here.stem}_*.py")):
        module = importlib.import_module(f"tests.unit.{path.stem}")
        names |= {name for name in vars(module) if name.startswith("test_")}
    return names


def test_every_step_of_the_pass_is_covered_by_rows_that_exist() -> None:
    doc = agent_pass.__doc__ or ""
    numbered = re.findall(r"^\d+\. \*\*(.+?)\*\*", doc, flags=re.MULTILINE)
    assert numbered == list(STEPS)[:-1], "agent.py's steps and this table differ"
    assert "A deleted agent" in doc
    rows = {case.name for case in CASES} | step_tests()
    for step, covering in STEPS.items():
        assert covering, f"step {step!r} has no row"
        assert set(covering) <= rows, f"step {step!r} names rows that do not exist"
