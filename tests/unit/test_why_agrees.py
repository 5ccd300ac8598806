"""`bindery why` and the controller decide an agent's work plan alike: a table of worlds.

Each row is one world (agents with the status they last wrote, hold Leases, the work scope).
The controller's path feeds it through its intake and asks ``WorkHolds.plan`` (its store,
indexes and the API server for a holder it does not see); `why`'s path hands the same bodies to
:func:`controller.domain.explain.explain`, as ``bindery why`` does with what it lists. Both must
reach the same plan for every agent that wants work, and `why` must say so in its explanation.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass, field
from typing import Any

import pytest

from controller.cli.why import Scope
from controller.cli.why_text import render_text
from controller.domain import explain as ex
from controller.domain.models import parse_object
from controller.domain.refs import Request
from controller.domain.work import Hold, WorkPlan, WorkScope
from controller.k8s import api, builders
from controller.reconcile import Controller
from harness.fakes import ScriptedApi

Body = dict[str, Any]
X = "gh://org/repo/issues/1"
HOLDS_NS = "bindery-system"
EARLY = "2026-12-01T10:00:00Z"
LATE = "2026-12-01T11:00:00Z"


def agent(key: str, work: str | None = X, *, tag: str = "issue", since: str = "") -> Body:
    namespace, _, name = key.partition("/")
    body: Body = {
        "apiVersion": "bindery.dev/v1alpha1",
        "kind": "AgentSpec",
        "metadata": {"name": name, "namespace": namespace, "generation": 1, "uid": f"{key}-uid"},
        "spec": {"resources": [{"name": "work", "tag": tag, "uri": work}] if work else []},
    }
    if since and work:
        body["status"] = {"work": {"uri": work, "held": False, "since": since}}
    return body


def lease(holder: Body, *, namespace: str = "", uri: str = X, **metadata: Any) -> Body:
    """The hold Lease the controller creates for ``holder`` (in ``namespace``, else its own)."""
    body = builders.work_hold(parse_object("AgentSpec", holder), uri, namespace=namespace)  # type: ignore[arg-type]
    body["metadata"].update(metadata)
    return body


@dataclass(frozen=True)
class World:
    name: str
    agents: tuple[Body, ...]
    leases: tuple[Body, ...] = ()
    scope: WorkScope = WorkScope.NAMESPACE
    hold_namespace: str = ""
    expect: dict[str, tuple[str, str]] = field(default_factory=dict)
    """agent key -> (state, waiting for) that both must reach."""


A, B, C = agent("team/a"), agent("team/b", since=LATE), agent("team/c", since=EARLY)
BROKEN_EARLY = agent("team/c", tag="no-such-type", since=EARLY)
OTHER_TEAM = agent("other/d")
GONE = agent("team/gone")  # holds a Lease but is not among the agents

WORLDS = [
    World(
        "holder and waiter",
        (A, B),
        (lease(A),),
        expect={"team/a": ("Working", ""), "team/b": ("Waiting", "team/a")},
    ),
    World(
        "free URI: the earliest waiter acquires, the other waits for it",
        (B, C),
        expect={"team/c": ("Waiting", ""), "team/b": ("Waiting", "team/c")},
    ),
    World(
        "a blocked claimant waits in no line",
        (B, BROKEN_EARLY),
        expect={"team/b": ("Waiting", "")},
    ),
    World(
        "held elsewhere: a hold left in the hold namespace counts in the namespace scope",
        (A, B),
        (lease(A, namespace=HOLDS_NS),),
        hold_namespace=HOLDS_NS,
        expect={"team/a": ("Working", ""), "team/b": ("Waiting", "team/a")},
    ),
    World(
        "a deleting hold: its holder lets go, the waiter still waits for it",
        (A, B),
        (lease(A, deletionTimestamp="2026-12-01T12:00:00Z", finalizers=[builders.HOLD_FINALIZER]),),
        expect={"team/a": ("Idle", ""), "team/b": ("Waiting", "team/a")},
    ),
    World(
        "cluster scope: another namespace's holder excludes, its claimants share the line",
        (OTHER_TEAM, B, C),
        (lease(OTHER_TEAM, namespace=HOLDS_NS),),
        scope=WorkScope.CLUSTER,
        hold_namespace=HOLDS_NS,
        expect={
            "other/d": ("Working", ""),
            "team/b": ("Waiting", "other/d"),
            "team/c": ("Waiting", "other/d"),
        },
    ),
    World(
        "namespace scope: another namespace's holder does not exclude",
        (OTHER_TEAM, B),
        (lease(OTHER_TEAM),),
        expect={"other/d": ("Working", ""), "team/b": ("Waiting", "")},
    ),
    World(
        "a hold whose holder is gone is reclaimed",
        (B,),
        (lease(GONE),),
        expect={"team/b": ("Waiting", "team/gone")},
    ),
]


async def controller_plans(world: World) -> tuple[dict[str, WorkPlan], list[Body], list[Body]]:
    """The controller's plan of every agent: its intake fed the world, then ``WorkHolds.plan``
    (twice round, so that each agent's blocked state is known to the others' line)."""
    fake = ScriptedApi()
    c = Controller(
        fake,  # type: ignore[arg-type]
        work_scope=world.scope,
        work_hold_namespace=world.hold_namespace,
    )
    issue = {
        "apiVersion": "bindery.dev/v1alpha1",
        "kind": "ResourceType",
        "metadata": {"name": "issue", "generation": 1},
        "spec": {},
    }
    c.observe(api.RESOURCE_TYPES, fake.seed(api.RESOURCE_TYPES, issue))
    agents = [fake.seed(api.AGENTS, body) for body in world.agents]
    leases = [fake.seed(api.LEASES, body) for body in world.leases]
    for body in [*agents]:
        c.observe(api.AGENTS, copy.deepcopy(body))
    for body in leases:
        c.observe(api.LEASES, copy.deepcopy(body))
    plans: dict[str, WorkPlan] = {}
    for _ in range(2):
        for body in agents:
            key = builders_key(body)
            obj = c.registry.agent(key)
            assert obj is not None
            plans[key] = await c.holds.plan(obj, c.registry.resolve(key), body.get("status") or {})
    return plans, agents, leases


def builders_key(body: Body) -> str:
    return f"{body['metadata']['namespace']}/{body['metadata']['name']}"


def why_plan(world: World, agents: list[Body], leases: list[Body], key: str) -> WorkPlan:
    """`why`'s plan of ``key``, from the same bodies as ``bindery why`` lists them."""
    me = next(b for b in agents if builders_key(b) == key)
    observed = ex.Observed(
        agent=me,
        types=[
            {
                "apiVersion": "bindery.dev/v1alpha1",
                "kind": "ResourceType",
                "metadata": {"name": "issue", "generation": 1},
                "spec": {},
            }
        ],
        agents=[b for b in agents if b is not me],
        holds=[h for h in (Hold.from_lease(b) for b in leases) if h is not None],
        scope=world.scope,
        hold_namespace=world.hold_namespace,
    )
    registry, _ = ex.build_registry(observed)
    obj = registry.agent(key)
    assert obj is not None
    inputs, _ = ex.gather_work(obj, registry.resolve(key), observed, registry)
    doc = ex.explain(observed)
    plan = inputs.plan()
    if plan.uri:
        assert doc["work"]["state"] == plan.state.value
        assert doc["work"]["waitingFor"] == plan.waiting_for
        assert doc["work"]["acquireNext"] == plan.acquire
    return plan


@pytest.mark.parametrize("world", WORLDS, ids=[w.name for w in WORLDS])
async def test_why_and_the_controller_reach_the_same_plan(world: World) -> None:
    plans, agents, leases = await controller_plans(world)
    for key, (state, waiting_for) in world.expect.items():
        controller = plans[key]
        assert (controller.state.value, controller.waiting_for) == (state, waiting_for), key
        assert why_plan(world, agents, leases, key) == controller, key
    for key, controller in plans.items():  # and every other agent of the world
        assert why_plan(world, agents, leases, key) == controller, key


def test_a_waiting_agent_s_work_binding_reads_waiting_naming_the_holder() -> None:
    observed = ex.Observed(
        agent=agent("team/b"),
        types=[
            {
                "apiVersion": "bindery.dev/v1alpha1",
                "kind": "ResourceType",
                "metadata": {"name": "issue", "generation": 1},
                "spec": {},
            }
        ],
        agents=[A],
        holds=[h for h in [Hold.from_lease(lease(A) | {})] if h is not None],
    )
    doc = ex.explain(observed)
    (work,) = [b for b in doc["bindings"] if b["name"] == "work"]
    assert work["state"] == "Waiting"
    assert "team/a" in work["message"]
    assert doc["state"] == "Waiting"


# ------------------------------------------------------------ status after the controller's pass

ISSUE_TYPE = {
    "apiVersion": "bindery.dev/v1alpha1",
    "kind": "ResourceType",
    "metadata": {"name": "issue", "generation": 1},
    "spec": {},
}


def observed_from(fake: ScriptedApi, key: str) -> ex.Observed:
    """What ``bindery why`` lists for ``key`` in the fake API's objects."""
    namespace, _, name = key.partition("/")
    objects = fake.objects
    agents = [b for (plural, ns, _n), b in objects.items() if plural == "agentspecs"]
    me = objects[("agentspecs", namespace, name)]
    leases = [b for (plural, _ns, _n), b in objects.items() if plural == "leases"]
    return ex.Observed(
        agent=copy.deepcopy(me),
        types=[ISSUE_TYPE],
        agents=[copy.deepcopy(b) for b in agents if b is not me],
        holds=[h for h in (Hold.from_lease(b) for b in leases) if h is not None],
        session=objects.get(("statefulsets", namespace, f"{name}-session")),
        pod=objects.get(("pods", namespace, f"{name}-session-0")),
    )


def agrees(fake: ScriptedApi, key: str) -> dict[str, Any]:
    """`why`'s explanation of ``key``, asserted to say what the controller's status says."""
    doc = ex.explain(observed_from(fake, key))
    namespace, _, name = key.partition("/")
    written = fake.objects[("agentspecs", namespace, name)]["status"]
    ready = {c["type"]: c for c in written["conditions"]}["Ready"]
    said = {c["type"]: c for c in doc["conditions"]}["Ready"]
    assert (doc["state"], said["status"], said["reason"]) == (
        written["state"],
        ready["status"],
        ready["reason"],
    )
    assert said["message"] == ready["message"]
    assert doc["bindings"] == written["bindings"]
    return doc


async def test_why_says_what_status_says_for_a_holder_and_a_waiter() -> None:
    fake = ScriptedApi()
    c = Controller(fake)  # type: ignore[arg-type]
    c.observe(api.RESOURCE_TYPES, fake.seed(api.RESOURCE_TYPES, ISSUE_TYPE))
    for body in (agent("team/a"), agent("team/b")):
        c.observe(api.AGENTS, fake.seed(api.AGENTS, body))
    for key in ("team/a", "team/b", "team/a", "team/b"):
        await c.process(Request.agent(key))
    assert agrees(fake, "team/a")["state"] == "Working"
    waiter = agrees(fake, "team/b")
    assert waiter["state"] == "Waiting"
    (work,) = [b for b in waiter["bindings"] if b["name"] == "work"]
    assert work["state"] == "Waiting"
    assert "waiting for team/a" in work["message"]


async def test_why_says_what_status_says_for_a_suspended_session() -> None:
    fake = ScriptedApi()
    c = Controller(fake)  # type: ignore[arg-type]
    c.observe(api.RESOURCE_TYPES, fake.seed(api.RESOURCE_TYPES, ISSUE_TYPE))
    idle = agent("team/a", None)
    idle["spec"]["runtime"] = {"image": "example/agent:1", "idle": {"suspendAfterSeconds": 30}}
    c.observe(api.AGENTS, fake.seed(api.AGENTS, idle))
    await c.process(Request.agent("team/a"))
    stored = fake.objects[("agentspecs", "team", "a")]
    stored["status"]["session"]["idleSince"] = "2020-01-01T00:00:00Z"  # idle for long
    stored["metadata"]["resourceVersion"] = str(next(fake._rv))
    c.observe(api.AGENTS, copy.deepcopy(stored))
    await c.process(Request.agent("team/a"))
    assert fake.objects[("statefulsets", "team", "a-session")]["spec"]["replicas"] == 0
    doc = agrees(fake, "team/a")
    assert doc["state"] == "Suspended"
    assert doc["session"]["health"]["phase"] == "Suspended"
    text = render_text(doc)
    assert "  suspended: idle for 30 s or more" in text
    assert "PodNotCreated" not in text


def test_why_reads_the_work_scope_from_the_holds_unless_told() -> None:
    here = Hold(uri=X, holder="team/a", holder_uid="u", namespace="team")
    away = Hold(uri=X, holder="other/d", holder_uid="v", namespace=HOLDS_NS)
    assert Scope().inferred([here]) == Scope(WorkScope.NAMESPACE)
    assert Scope().inferred([here, away]) == Scope(WorkScope.CLUSTER, HOLDS_NS)
    told = Scope(WorkScope.NAMESPACE, HOLDS_NS)
    assert told.inferred([away]) is told
