"""One rule for every pass: an exception from one object's spec or status never leaves it without
a truthful status, and never stops another object's pass.

Pure rows first (the failure status, the refusal's words, times read from status, condition
reasons, the fitter's note), then passes in the world of the agent pass tests: an in-memory
stand-in API (``harness.fakes.ScriptedApi``) and faults injected into the controller's own steps.
That the API server refuses and accepts these statuses is proven on the real one in
tests/integration/test_one_rule.py.
"""

from __future__ import annotations

import copy
import re
from datetime import UTC, datetime
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st
from pydantic import BaseModel, ValidationError

from controller.domain import acknowledgement as ack
from controller.domain import models, suspend
from controller.domain.quantity import QuantityError
from controller.domain.refs import Kind, Ref, Request
from controller.domain.status import failure
from controller.domain.status.conditions import reason_word
from controller.domain.status.fit import STATUS_BUDGET, size
from controller.k8s import api
from controller.reconcile import Controller, intake
from controller.reconcile.clock import read
from controller.reconcile.kinds import write_status
from controller.reconcile.passes import Pass
from controller.reconcile.queue import WorkQueue
from controller.reconcile.result import Result
from controller.reconcile.store import Store
from controller.reconcile.workers import WorkerPool
from tests.unit.agent_pass_world import NS, X, agent, edit, run, world
from tests.unit.virtual_clock import VirtualClock

Body = dict[str, Any]
NOW = "2026-01-01T00:00:00Z"
REASON = re.compile(r"^[A-Za-z]([A-Za-z0-9_,:]*[A-Za-z0-9_])?$")
"""The CRDs' pattern for a condition reason."""


def cond(st_: Body, type_: str) -> Body:
    return next(c for c in st_.get("conditions") or [] if c["type"] == type_)


def status_of(c: Controller, name: str, endpoint: api.Endpoint = api.AGENTS) -> Body:
    key = f"{NS}/{name}" if endpoint.namespaced else name
    assert c.store.get(endpoint, key) is not None
    return c.store.status(endpoint, key)


# ------------------------------------------------------------------------------- pure rows


def test_a_failed_status_keeps_the_generation_it_had_and_says_why() -> None:
    old = {
        "observedGeneration": 3,
        "state": "Working",
        "work": {"uri": X, "held": True},
        "conditions": [
            {"type": "Ready", "status": "True", "reason": "BindingsDelivered", "message": ""}
        ],
    }
    message = failure.failure_message("AgentSpec team/a", 4, TypeError("boom"), "status.x")
    new = failure.failed_status(generation=4, old=old, now=NOW, message=message, state=True)
    assert new["observedGeneration"] == 3  # the new generation is not claimed
    assert new["state"] == "Error"
    assert new["work"] == old["work"]  # the world as last observed
    ready, stalled = cond(new, "Ready"), cond(new, "Stalled")
    assert (ready["status"], ready["reason"]) == ("False", "ReconcileFailed")
    assert (stalled["status"], stalled["reason"]) == ("True", "ReconcileFailed")
    assert cond(new, "Reconciling")["status"] == "False"
    assert "status.x: TypeError: boom" in stalled["message"]
    assert "generation 4" in stalled["message"]
    assert "Fix: " in stalled["message"]
    assert ready["observedGeneration"] == 4  # what this pass found about generation 4


def test_an_object_never_observed_stays_unobserved() -> None:
    new = failure.failed_status(generation=1, old={}, now=NOW, message="m")
    assert new["observedGeneration"] == -1
    assert "state" not in new


def test_the_field_travels_with_the_exception() -> None:
    exc = KeyError("x")
    exc.add_note("something else")
    exc.add_note(failure.field_note("status.inner"))
    exc.add_note(failure.field_note("status.outer"))
    assert failure.field_of(exc) == "status.inner"  # the first named
    assert failure.field_of(ValueError()) == ""
    message = failure.failure_message("Tool team/t", 2, exc)
    assert "status.inner: KeyError" in message
    unnamed = failure.failure_message("Tool team/t", 2, RuntimeError("x"))
    assert "no field of its own named" in unnamed


class _Many(BaseModel):
    a: int
    b: int
    c: int
    d: int
    e: int
    f: int
    g: int


def test_a_refusal_lists_the_first_errors_and_counts_the_rest() -> None:
    with pytest.raises(ValidationError) as caught:
        _Many.model_validate({})
    words = failure.refusal(caught.value)
    assert words.startswith("spec.a: Field required; spec.b: Field required")
    assert words.endswith("and 2 more")
    odd = RecursionError("maximum recursion depth exceeded")
    odd.add_note(failure.field_note("spec.tools"))
    assert failure.refusal(odd).startswith("spec.tools: RecursionError: maximum recursion")
    assert failure.refusal(ArithmeticError("x")).startswith("spec: ArithmeticError: x")


@pytest.mark.parametrize(
    "stamp",
    [
        None,
        12,
        "",
        " ",
        "garbage",
        "2026-01-01T00:00:00",  # no offset: counted as UTC
        "0001-01-01T00:00:00+01:00",  # outside the calendar once made UTC
        "9999-12-31T23:59:59-23:59",
        "2026-13-01T00:00:00Z",
        "2026-01-01t00:00:00z",
    ],
)
def test_a_time_read_from_status_never_raises(stamp: object) -> None:
    now = datetime(2026, 1, 1, 0, 1, tzinfo=UTC)
    since = ack.seconds_since(stamp, now)
    assert since >= 0.0
    ack.countable_time(stamp, now)


@given(st.text(max_size=40))
def test_whatever_a_status_time_holds_counting_from_it_never_raises(stamp: str) -> None:
    now = datetime(2026, 1, 1, tzinfo=UTC)
    assert ack.seconds_since(stamp, now) >= 0.0
    ack.countable_time(stamp, now)


def test_a_time_in_the_future_is_not_counted_from() -> None:
    now = datetime(2026, 1, 1, tzinfo=UTC)
    assert ack.countable_time("2025-12-31T23:59:00Z", now)
    assert ack.countable_time("2026-01-01T00:00:30Z", now)  # a little skew
    assert not ack.countable_time("2030-01-01T00:00:00Z", now)
    assert not ack.countable_time("0001-01-01T00:00:00+01:00", now)


def test_an_idle_clock_that_cannot_be_counted_from_restarts_now() -> None:
    future = {"session": {"idleSince": "9999-01-01T00:00:00Z"}}
    assert suspend.idle_since(future, idle=True, now=NOW) == NOW
    garbage = {"session": {"idleSince": "not a time"}}
    assert suspend.idle_since(garbage, idle=True, now=NOW) == NOW
    kept = {"session": {"idleSince": "2025-12-31T00:00:00Z"}}
    assert suspend.idle_since(kept, idle=True, now=NOW) == "2025-12-31T00:00:00Z"


@given(st.text(max_size=200))
def test_every_condition_reason_fits_the_schema(reason: str) -> None:
    word = reason_word(reason)
    assert REASON.match(word), word
    assert len(word) <= 1024


def test_a_reason_that_fits_is_kept_and_a_foreign_one_is_made_to() -> None:
    assert reason_word("CrashLoopBackOff") == "CrashLoopBackOff"
    assert reason_word("OOM:Killed") == "OOM:Killed"
    assert reason_word("no-fit!") == "NoFit"
    assert reason_word("") == "Unknown"


# ------------------------------------------------------------------------------ agent passes


def _fail_step(c: Controller, name: str, exc: Exception) -> None:
    """Make step 6 (session) of ``name``'s passes raise ``exc``: a fault on its way."""
    converge = c.sessions.converge

    async def failing(pass_: Pass, agent_obj: Any, **kw: Any) -> Any:
        if pass_.request.ref.name == name:
            raise exc
        return await converge(pass_, agent_obj, **kw)

    setattr(c.sessions, "converge", failing)  # noqa: B010 (an instance's method replaced)


async def test_a_fault_in_one_agent_s_pass_is_reported_on_it_and_the_others_converge() -> None:
    c, fake = world(agent("a", X), agent("b"))
    await run(c, "a", "b")
    assert status_of(c, "a")["observedGeneration"] == 1
    _fail_step(c, "a", TypeError("unsupported operand"))
    # both agents edited: generation 2
    for name in ("a", "b"):
        body = copy.deepcopy(fake.objects[("agentspecs", NS, name)])
        body["spec"]["resources"] = [{"name": "doc", "tag": "issue", "uri": f"x://{name}"}]
        edit(c, fake, body)
    result = await c.process(Request.agent(f"{NS}/a"))
    assert result is not None
    assert result.failed
    a = status_of(c, "a")
    assert a["observedGeneration"] == 1  # generation 2 is not claimed
    assert a["state"] == "Error"
    stalled = cond(a, "Stalled")
    assert (stalled["status"], stalled["reason"]) == ("True", "ReconcileFailed")
    assert "TypeError: unsupported operand" in stalled["message"]
    assert "generation 2" in stalled["message"]
    assert a["work"]["uri"] == X  # as last observed
    await run(c, "b")
    b = status_of(c, "b")
    assert b["observedGeneration"] == 2
    assert cond(b, "Ready")["status"] == "True"
    assert "ReconcileFailed" in fake.events  # a Warning event said so


async def test_the_same_failure_again_writes_nothing_and_posts_no_event() -> None:
    c, fake = world(agent("a"))
    _fail_step(c, "a", KeyError("k"))
    await run(c, "a")
    writes, events = len(fake.writes), len(fake.events)
    await run(c, "a")
    assert len(fake.writes) == writes
    assert len(fake.events) == events


async def test_once_the_fault_is_gone_the_next_pass_claims_the_generation() -> None:
    c, _ = world(agent("a"))
    converge = c.sessions.converge
    _fail_step(c, "a", RuntimeError("x"))
    await run(c, "a")
    assert status_of(c, "a")["observedGeneration"] == -1
    c.sessions.converge = converge  # type: ignore[method-assign]
    await run(c, "a")
    a = status_of(c, "a")
    assert a["observedGeneration"] == 1
    assert cond(a, "Stalled")["status"] == "False"


async def test_a_spec_the_project_refuses_mid_pass_claims_the_generation() -> None:
    c, _ = world(agent("a"))
    _fail_step(c, "a", QuantityError("spec.runtime.resources.limits.memory: 1Ei is too large"))
    result = await run(c, "a")
    assert result is not None
    assert result.failed
    a = status_of(c, "a")
    assert a["observedGeneration"] == 1  # the refusal is what generation 1 means
    stalled = cond(a, "Stalled")
    assert (stalled["status"], stalled["reason"]) == ("True", "InvalidSpec")
    assert "1Ei is too large" in stalled["message"]


INVALID = {
    "kind": "Status",
    "apiVersion": "v1",
    "status": "Failure",
    "reason": "Invalid",
    "code": 422,
    "message": 'AgentSpec.bindery.dev "a" is invalid: status.conditions[0].reason: Invalid value',
    "details": {
        "causes": [
            {
                "reason": "FieldValueInvalid",
                "message": "Invalid value",
                "field": "status.conditions[0].reason",
            }
        ]
    },
}


async def test_a_status_the_api_server_refuses_is_reported_naming_the_field() -> None:
    c, fake = world(agent("a"), agent("b"))
    fake.refuse = {("status", "agentspecs", "a"): INVALID}  # once
    result = await run(c, "a", "b")
    assert result is not None
    assert not result.failed  # b's pass
    a = status_of(c, "a")
    assert a["observedGeneration"] == -1
    stalled = cond(a, "Stalled")
    assert stalled["reason"] == "ReconcileFailed"
    assert "status.conditions[0].reason" in stalled["message"]
    assert status_of(c, "b")["observedGeneration"] == 1


async def test_a_deleted_agent_s_failing_pass_is_reported_too() -> None:
    c, fake = world(agent("a", X))
    await run(c, "a")
    withdraw = c.bindings.withdraw_work

    async def failing(*args: Any, **kw: Any) -> None:
        raise ValueError("not a document")

    c.bindings.withdraw_work = failing  # type: ignore[method-assign]
    stored = fake.objects[("agentspecs", NS, "a")]
    stored["metadata"]["deletionTimestamp"] = NOW
    stored["metadata"]["resourceVersion"] = str(next(fake._rv))
    c.observe(api.AGENTS, copy.deepcopy(stored))
    result = await run(c, "a")
    assert result is not None
    assert result.failed
    stalled = cond(status_of(c, "a"), "Stalled")
    assert stalled["reason"] == "ReconcileFailed"
    assert "ValueError: not a document" in stalled["message"]
    assert ("leases", NS) in {(p, ns) for (p, ns, _) in fake.objects}  # nothing released
    c.bindings.withdraw_work = withdraw  # type: ignore[method-assign]


async def test_a_written_at_that_cannot_be_counted_from_is_counted_from_now() -> None:
    """Before the rule, a time without an offset made the release step raise (TypeError), on
    every pass, with no word on the agent."""
    c, fake = world(agent("a"))
    await run(c, "a")
    stored = fake.objects[("agentspecs", NS, "a")]
    digest = stored["status"]["delivery"]["digest"]
    for garbage, kept in (
        ("2026-01-01T00:00:00", True),  # no offset: read as UTC
        ("0001-01-01T00:00:00+01:00", False),  # before the calendar once made UTC
        ("9999-01-01T00:00:00Z", False),  # in the future: every timeout held off
    ):
        stored["status"]["delivery"]["writtenAt"] = garbage
        stored["metadata"]["resourceVersion"] = str(next(fake._rv))
        c.observe(api.AGENTS, copy.deepcopy(stored))
        result = await run(c, "a")
        assert result is not None
        assert not result.failed
        delivery = status_of(c, "a")["delivery"]
        assert delivery["digest"] == digest
        assert (delivery["writtenAt"] == garbage) is kept
        assert ack.countable_time(delivery["writtenAt"], datetime.now(UTC))
        stored = fake.objects[("agentspecs", NS, "a")]


# ------------------------------------------------------------------------- the other kinds


async def test_a_fault_in_one_resource_type_s_pass_leaves_the_others_converging() -> None:
    c, fake = world()
    other = {
        "apiVersion": "bindery.dev/v1alpha1",
        "kind": "ResourceType",
        "metadata": {"name": "other", "generation": 1},
        "spec": {},
    }
    c.observe(api.RESOURCE_TYPES, fake.seed(api.RESOURCE_TYPES, other))
    closure = c.registry.closure

    def failing(name: str) -> Any:
        if name == "issue":
            raise KeyError(name)
        return closure(name)

    setattr(c.registry, "closure", failing)  # noqa: B010 (an instance's method replaced)
    result = await c.process(Request(Kind.TYPE, Ref("", "issue")))
    assert result is not None
    assert result.failed
    issue = status_of(c, "issue", api.RESOURCE_TYPES)
    assert issue["observedGeneration"] == -1
    assert cond(issue, "Stalled")["reason"] == "ReconcileFailed"
    assert "KeyError" in cond(issue, "Stalled")["message"]
    result = await c.process(Request(Kind.TYPE, Ref("", "other")))
    assert result is not None
    assert not result.failed
    assert status_of(c, "other", api.RESOURCE_TYPES)["observedGeneration"] == 1


async def test_a_spec_no_parser_can_take_is_refused_naming_the_spec(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Not only pydantic's errors: whatever parsing raises refuses that spec (never the intake)."""
    parse = models.parse_object

    def crashing(kind: str, body: Body) -> Any:
        if body["metadata"]["name"] == "deep":
            raise RecursionError("maximum recursion depth exceeded")
        return parse(kind, body)

    monkeypatch.setattr(intake, "parse_object", crashing)
    c, _ = world(agent("deep"), agent("b"))
    await run(c, "deep", "b")
    deep = status_of(c, "deep")
    assert deep["observedGeneration"] == 1  # a refused spec: the refusal is the generation
    stalled = cond(deep, "Stalled")
    assert stalled["reason"] == "InvalidSpec"
    assert "spec: RecursionError: maximum recursion depth exceeded" in stalled["message"]
    assert cond(status_of(c, "b"), "Ready")["status"] == "True"


# --------------------------------------------------------------------- status cut to fit


async def test_every_status_written_is_cut_to_fit_and_says_so() -> None:
    c, fake = world(agent("a"))
    body = c.store.get(api.AGENTS, f"{NS}/a")
    assert body is not None
    rows = [
        {"name": f"slot-{i}", "state": "Unbound", "message": "x" * 2000, "candidates": ["c"] * 50}
        for i in range(400)
    ]
    huge = {
        "observedGeneration": 1,
        "bindings": rows,
        "conditions": [{"type": "Ready", "status": "False", "reason": "BindingError"}],
    }
    assert size(huge) > STATUS_BUDGET
    pass_ = Pass.of(Request.agent(f"{NS}/a"), body, read(c.queue.clock))
    assert await write_status(c.writer, pass_, body, huge)
    written = fake.objects[("agentspecs", NS, "a")]["status"]
    assert size(written) <= STATUS_BUDGET
    assert "status cut to fit" in cond(written, "Ready")["message"]


# ---------------------------------------------------------------------------- the worker


class _Failing:
    """A reconciler whose passes report a failure on their object."""

    def __init__(self) -> None:
        self.passes = 0

    async def reconcile(self, pass_: Pass) -> Result:
        self.passes += 1
        return Result(failed=True)

    async def gone(self, pass_: Pass) -> None:
        return None


async def test_a_failed_pass_is_retried_with_backoff(clock: VirtualClock) -> None:
    store = Store()
    store.put(api.AGENTS, {"metadata": {"name": "a", "namespace": NS, "resourceVersion": "1"}})
    queue: WorkQueue[Request] = WorkQueue(clock)
    failing = _Failing()
    workers = WorkerPool(queue, store, {Kind.AGENT: failing}, workers=1)
    queue.add(Request.agent(f"{NS}/a"))
    workers.start()
    try:
        await clock.advance(0.1)
        assert failing.passes == 1
        await clock.advance(1.0)  # 0.5 s, then 1 s: the backoff grows
        assert failing.passes == 2
        await clock.advance(1.0)
        assert failing.passes == 3
    finally:
        await workers.stop()
