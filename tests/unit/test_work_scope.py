"""The work scope: where holds live, whose holds count, and moving holds after a scope switch.

``plan_work`` decides from the hold in the agent's configured location plus the holds elsewhere
that count in its scope; the index answers which those are. The switch rules: a hold elsewhere
held by another agent of the scope blocks acquisition; the holder of a hold elsewhere moves it
(acquire here, then retire there) without ever stopping to hold; of two inherited holders, the
one in the configured location, else the oldest, keeps the URI.
"""

from __future__ import annotations

import pytest

from controller.domain.models import AgentObject, parse_object
from controller.domain.work import (
    Claim,
    Hold,
    WorkPlan,
    WorkScope,
    WorkState,
    hold_location,
    hold_name,
    in_scope,
    plan_work,
)
from controller.k8s import builders
from controller.k8s.api import AGENTS, LEASES
from controller.reconcile import Controller
from controller.reconcile.index import HoldIndex, WantedIndex, hold_problem
from controller.runtime.exits import Exit
from controller.runtime.operator import run
from controller.runtime.preflight import PreflightError
from controller.runtime.settings import Settings

URI = "github-issue://acme/app/7"
CONTROL = "bindery-system"
ME = "team-a/dev"
ME_UID = "uid-a"


def hold(
    holder: str, holder_uid: str, namespace: str, *, uri: str = URI, created: str = "2026-01-01"
) -> Hold:
    return Hold(
        uri=uri,
        holder=holder,
        holder_uid=holder_uid,
        name=hold_name(uri),
        resource_version="1",
        uid=f"lease-{holder_uid}-{namespace}",
        namespace=namespace,
        created=created,
    )


def plan(
    *,
    here: Hold | None = None,
    own: list[Hold] | None = None,
    elsewhere: list[Hold] | None = None,
    holder_exists: bool = True,
    location: str = CONTROL,
    rivals: list[Claim] | None = None,
) -> WorkPlan:
    return plan_work(
        agent=ME,
        agent_uid=ME_UID,
        desired_uri=URI,
        holds={URI: here} if here else {},
        own_holds=own or [],
        holder_exists=holder_exists,
        me=Claim(ME),
        rivals=rivals or [],
        location=location,
        elsewhere=elsewhere or [],
    )


# ------------------------------------------------------------------------------------ scope


def test_location_is_the_hold_namespace_only_in_the_cluster_scope() -> None:
    assert hold_location(WorkScope.CLUSTER, "team-a", CONTROL) == CONTROL
    assert hold_location(WorkScope.NAMESPACE, "team-a", CONTROL) == "team-a"


def test_every_hold_counts_in_the_cluster_scope_only_its_namespaces_in_the_namespace_scope() -> (
    None
):
    theirs = hold("team-b/dev", "uid-b", CONTROL)
    assert in_scope(WorkScope.CLUSTER, "team-a", theirs)
    assert not in_scope(WorkScope.NAMESPACE, "team-a", theirs)
    assert in_scope(WorkScope.NAMESPACE, "team-b", theirs)


# ------------------------------------------------------------------------------------ plan_work


def test_a_free_uri_is_acquired_in_the_configured_location() -> None:
    result = plan()
    assert result.acquire
    assert not result.deliver
    assert result.retire == []


def test_a_hold_elsewhere_by_another_agent_of_the_scope_blocks_acquisition() -> None:
    theirs = hold("team-b/dev", "uid-b", "team-b")
    result = plan(elsewhere=[theirs])
    assert result.state is WorkState.WAITING
    assert not result.acquire
    assert not result.deliver
    assert result.waiting_for == "team-b/dev"


def test_the_configured_location_held_by_another_names_its_namespace_and_agent() -> None:
    result = plan(here=hold("team-b/dev", "uid-b", CONTROL))
    assert result.state is WorkState.WAITING
    assert not result.acquire
    assert result.waiting_for == "team-b/dev"


def test_a_holder_in_the_old_location_keeps_delivering_while_it_moves() -> None:
    mine = hold(ME, ME_UID, "team-a")
    result = plan(own=[mine])
    assert result.state is WorkState.WORKING
    assert result.deliver
    assert result.acquire
    assert result.retire == [mine]
    assert result.release == []  # never withdrawn: the old hold is retired, not released


def test_a_moved_hold_retires_the_old_one_once_the_new_one_is_held() -> None:
    old = hold(ME, ME_UID, "team-a")
    new = hold(ME, ME_UID, CONTROL)
    result = plan(here=new, own=[old, new])
    assert result.state is WorkState.WORKING
    assert result.deliver
    assert not result.acquire
    assert result.retire == [old]


def test_inherited_holders_the_oldest_keeps_the_uri_the_other_withdraws() -> None:
    mine = hold(ME, ME_UID, "team-a", created="2026-01-02")
    theirs = hold("team-b/dev", "uid-b", "team-b", created="2026-01-01")
    result = plan(own=[mine], elsewhere=[theirs])
    assert result.state is WorkState.WAITING
    assert not result.deliver
    assert not result.acquire
    assert result.release == [mine]  # withdrawn first, released once the session let go
    assert result.waiting_for == "team-b/dev"
    keeps = plan_work(
        agent="team-b/dev",
        agent_uid="uid-b",
        desired_uri=URI,
        holds={},
        own_holds=[theirs],
        holder_exists=False,
        me=Claim("team-b/dev"),
        rivals=[],
        location=CONTROL,
        elsewhere=[mine],
    )
    assert keeps.state is WorkState.WORKING
    assert keeps.deliver
    assert keeps.acquire
    assert keeps.retire == [theirs]


def test_inherited_holder_loses_to_the_one_already_in_the_configured_location() -> None:
    mine = hold(ME, ME_UID, "team-a", created="2020-01-01")
    result = plan(here=hold("team-b/dev", "uid-b", CONTROL, created="2026-01-01"), own=[mine])
    assert result.state is WorkState.WAITING
    assert not result.deliver
    assert result.release == [mine]


def test_the_configured_hold_whose_holder_is_gone_is_reclaimed_while_moving() -> None:
    mine = hold(ME, ME_UID, "team-a")
    gone = hold("team-b/old", "uid-gone", CONTROL)
    result = plan(here=gone, own=[mine], holder_exists=False)
    assert result.state is WorkState.WORKING
    assert result.reclaim == gone
    assert result.acquire
    assert result.deliver


def test_without_a_location_own_holds_of_the_uri_are_never_moved() -> None:
    mine = hold(ME, ME_UID, "team-a")
    result = plan_work(
        agent=ME,
        agent_uid=ME_UID,
        desired_uri=URI,
        holds={URI: mine},
        own_holds=[mine],
        holder_exists=True,
        me=Claim(ME),
        rivals=[],
    )
    assert result == WorkPlan(state=WorkState.WORKING, uri=URI, deliver=True)


# ------------------------------------------------------------------------------------ indexes


def agent(namespace: str, name: str, uri: str | None) -> AgentObject:
    spec: dict[str, object] = {
        "resources": [{"name": "work", "tag": "issue", "uri": uri}] if uri else []
    }
    obj = parse_object(
        "AgentSpec",
        {"metadata": {"namespace": namespace, "name": name, "uid": f"u-{name}"}, "spec": spec},
    )
    assert isinstance(obj, AgentObject)
    return obj


def test_hold_index_counts_holds_by_scope_wherever_they_live() -> None:
    index = HoldIndex()
    in_b = hold("team-b/dev", "uid-b", "team-b")
    in_control = hold("team-c/dev", "uid-c", CONTROL)
    index.file("team-b", in_b, present=True)
    index.file(CONTROL, in_control, present=True)
    assert index.everywhere(URI) == [in_control, in_b]
    assert index.counting(WorkScope.CLUSTER, "team-a", URI) == [in_control, in_b]
    assert index.counting(WorkScope.NAMESPACE, "team-a", URI) == []
    assert index.counting(WorkScope.NAMESPACE, "team-c", URI) == [in_control]
    assert index.holding("team-c", URI) == in_control
    assert index.holding("team-b", URI) == in_b
    assert index.holding("team-a", URI) is None
    index.file(CONTROL, in_control, present=False)
    assert index.everywhere(URI) == [in_b]


def test_wanted_line_spans_namespaces_only_in_the_cluster_scope() -> None:
    for scope, expected in (
        (WorkScope.NAMESPACE, {"team-a/dev"}),
        (WorkScope.CLUSTER, {"team-a/dev", "team-b/dev"}),
    ):
        wanted = WantedIndex(scope)
        wanted.update("team-a", "team-a/dev", agent("team-a", "dev", URI))
        wanted.update("team-b", "team-b/dev", agent("team-b", "dev", URI))
        assert set(wanted.line("team-a", URI)) == expected
        assert set(wanted.everywhere(URI)) == {"team-a/dev", "team-b/dev"}
        wanted.update("team-b", "team-b/dev", agent("team-b", "dev", None))
        assert set(wanted.everywhere(URI)) == {"team-a/dev"}


def test_a_hold_in_the_hold_namespace_may_name_a_holder_of_any_namespace() -> None:
    body = builders.work_hold(agent("team-a", "dev", URI), URI, namespace=CONTROL)
    body["metadata"]["uid"] = "lease-1"
    assert body["metadata"]["namespace"] == CONTROL
    parsed = Hold.from_lease(body)
    assert parsed is not None
    assert parsed.namespace == CONTROL
    assert hold_problem(body, parsed, CONTROL) == ""
    assert "another namespace" in hold_problem(body, parsed, "elsewhere")
    assert "another namespace" in hold_problem(body, parsed)


# ------------------------------------------------------------------------------------ intake


def _agent_body(namespace: str, name: str, uri: str | None, rv: int) -> dict[str, object]:
    resources = [{"name": "work", "tag": "issue", "uri": uri}] if uri else []
    return {
        "apiVersion": "bindery.dev/v1alpha1",
        "kind": "AgentSpec",
        "metadata": {
            "namespace": namespace,
            "name": name,
            "uid": f"u-{namespace}-{name}",
            "resourceVersion": str(rv),
        },
        "spec": {"resources": resources},
    }


def _queued(c: Controller) -> set[str]:
    return {r.ref.key for r in c.queue.drain()}


def test_leaving_the_line_wakes_the_claimants_of_every_namespace_in_the_cluster_scope() -> None:
    for scope, woken in ((WorkScope.CLUSTER, True), (WorkScope.NAMESPACE, False)):
        c = Controller(api=None, work_scope=scope, work_hold_namespace=CONTROL)  # type: ignore[arg-type]
        c.observe(AGENTS, _agent_body("team-a", "dev", URI, 1))
        c.observe(AGENTS, _agent_body("team-b", "dev", URI, 2))
        _queued(c)
        c.observe(AGENTS, _agent_body("team-a", "dev", None, 3))  # team-a/dev stops asking
        assert ("team-b/dev" in _queued(c)) is woken, scope


def test_a_hold_in_the_hold_namespace_wakes_the_claimants_of_every_namespace() -> None:
    c = Controller(api=None, work_scope=WorkScope.CLUSTER, work_hold_namespace=CONTROL)  # type: ignore[arg-type]
    c.observe(AGENTS, _agent_body("team-a", "dev", URI, 1))
    c.observe(AGENTS, _agent_body("team-b", "dev", URI, 2))
    _queued(c)
    lease = builders.work_hold(agent("team-a", "dev", URI), URI, namespace=CONTROL)
    lease["metadata"].update(uid="lease-1", resourceVersion="3")
    lease["metadata"]["annotations"][builders.HOLDER_UID_ANNOTATION] = "u-team-a-dev"
    c.observe(LEASES, lease)
    assert {"team-a/dev", "team-b/dev"} <= _queued(c)
    assert c.intake.holds.get(CONTROL, URI) is not None
    assert c.intake.holds.holding("team-a", URI) is not None
    assert c.intake.holds.ignored == {}


# ------------------------------------------------------------------------------------ run


def test_the_cluster_scope_refuses_to_start_without_watching_its_hold_namespace() -> None:
    settings = Settings(
        namespaces=("team-a",),
        work_scope=WorkScope.CLUSTER,
        work_hold_namespace=CONTROL,
        liveness="",
        metrics_port=0,
        log_level="WARNING",
    )
    with pytest.raises(PreflightError) as raised:
        run(settings)
    assert raised.value.code == Exit.USAGE
    assert f"add --namespace {CONTROL}" in str(raised.value)
