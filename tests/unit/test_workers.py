"""The worker pool after an API-server outage: no pass waits out a backoff grown while the API
server was away.

The reconciler here stands in for the API server's answers (away, then back); that the
controller's real passes fail this way without an answer is proven by the chaos harness and the
integration tests, which restart a real kube-apiserver. Time is virtual (the ``clock`` fixture).
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator, MutableMapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

import pytest
import structlog
import structlog.contextvars
import structlog.testing

from controller.domain.refs import Kind, Ref, Request
from controller.k8s import api
from controller.k8s.api import ApiError
from controller.reconcile.passes import Pass
from controller.reconcile.queue import WorkQueue
from controller.reconcile.result import CHANGED, Result
from controller.reconcile.store import Store
from controller.reconcile.workers import WorkerPool
from tests.unit.virtual_clock import VirtualClock

NS = "team"


@dataclass
class Server:
    """Passes that fail while the API server is ``away``, with the status it answers then."""

    away: bool = True
    status: int = 0
    """0: no answer at all; 503, 429: an answer that still says 'not now'; 422: a refusal."""
    attempts: dict[str, int] = field(default_factory=dict)
    done: set[str] = field(default_factory=set)

    async def reconcile(self, pass_: Pass) -> Result:
        name = pass_.request.ref.name
        self.attempts[name] = self.attempts.get(name, 0) + 1
        if self.away:
            raise ApiError(self.status, "PATCH", f"/agentspecs/{name}", {"reason": "Away"})
        self.done.add(name)
        return CHANGED

    async def gone(self, pass_: Pass) -> None:
        return None


def pool(server: Server, names: list[str], clock: VirtualClock) -> WorkerPool:
    store = Store()
    for i, name in enumerate(names):
        meta = {"name": name, "namespace": NS, "uid": f"u{i}", "resourceVersion": str(i + 1)}
        store.put(api.AGENTS, {"metadata": meta})
    queue: WorkQueue[Request] = WorkQueue(clock)
    workers = WorkerPool(queue, store, {Kind.AGENT: server}, workers=2, probe_seconds=0.05)
    for name in names:
        queue.add(Request(Kind.AGENT, Ref(NS, name)))
    return workers


async def outage(
    server: Server, names: list[str], failures: int, clock: VirtualClock
) -> WorkerPool:
    """Run the pool until every pass has failed ``failures`` times (its backoff has grown to
    0.5 s * 2**(failures - 1) and more), with the queue's backoff sped up a hundredfold."""
    workers = pool(server, names, clock)
    fast = workers.queue.retry_delay

    def retry_delay(item: Request, base: float = 0.005, cap: float = 60.0) -> float:
        return fast(item, base=base, cap=cap)

    workers.queue.retry_delay = retry_delay  # type: ignore[method-assign]
    workers.start()
    await clock.until(lambda: all(server.attempts.get(n, 0) >= failures for n in names), 5.0)
    # From here the queue's own backoff waits 0.5 s * 2**8 = 128 s and more.
    workers.queue.retry_delay = fast  # type: ignore[method-assign]
    await clock.until(lambda: all(server.attempts.get(n, 0) >= failures + 1 for n in names), 5.0)
    return workers


async def test_every_pass_failed_while_the_api_server_was_away_runs_once_it_is_back(
    clock: VirtualClock,
) -> None:
    server = Server(status=0)
    names = [f"a{i}" for i in range(5)]
    workers = await outage(server, names, failures=8, clock=clock)
    try:
        probing = dict(server.attempts)
        await clock.advance(0.3)  # only the probe keeps trying, every probe_seconds
        retried = {n for n in names if server.attempts[n] > probing[n]}
        assert len(retried) == 1, server.attempts
        server.away = False
        await clock.until(lambda: server.done == set(names), 1.0)  # not the grown backoff
    finally:
        await workers.stop()


async def test_an_api_server_starting_up_parks_passes_too(clock: VirtualClock) -> None:
    """503: kube-apiserver answers before all its paths are installed, or while it stops."""
    server = Server(status=503)
    names = ["a", "b", "c"]
    workers = await outage(server, names, failures=8, clock=clock)
    try:
        server.away = False
        await clock.until(lambda: server.done == set(names), 1.0)
    finally:
        await workers.stop()


@pytest.mark.parametrize("status", [422, 500, 429])
async def test_a_pass_the_api_server_answers_keeps_its_own_backoff(
    status: int, clock: VirtualClock
) -> None:
    """A refusal, a failing webhook, throttling: the API server is there, and retrying sooner
    cannot help (nor may it add to a throttled server's load)."""
    server = Server(status=status)
    workers = await outage(server, ["a", "b"], failures=8, clock=clock)
    try:
        server.away = False
        await clock.advance(0.5)
        assert server.done == set()  # each waits out its own (grown) backoff
    finally:
        await workers.stop()


async def test_a_pass_that_alone_gets_no_answer_is_retried_at_the_probes_pace(
    clock: VirtualClock,
) -> None:
    """Other passes keep succeeding: the one that times out is requeued with them, but at most
    once per probe interval, never in a loop."""

    class OneAway(Server):
        async def reconcile(self, pass_: Pass) -> Result:
            if pass_.request.ref.name != "stuck":
                self.attempts["others"] = self.attempts.get("others", 0) + 1
                return Result(changed=True, requeue_after=0.005)  # busy: passes keep succeeding
            return await super().reconcile(pass_)

    server = OneAway(status=0)
    workers = pool(server, ["stuck", "b", "c"], clock)
    started = clock.now()
    workers.start()
    try:
        await clock.advance(1.0)
    finally:
        await workers.stop()
    elapsed = clock.now() - started
    # a loop would retry it as often as the others; its retry as the probe and the releases
    # happen at most once per probe interval each
    assert server.attempts["others"] >= 3 * server.attempts["stuck"], server.attempts
    assert 2 <= server.attempts["stuck"] <= 2 * (elapsed / workers.probe_seconds) + 2


# ------------------------------------------------------------------------------ one pass


class Logs:
    """A reconciler that logs one line of its own and asks to be looked at again."""

    def __init__(self, requeue_after: float | None) -> None:
        self.requeue_after = requeue_after

    async def reconcile(self, pass_: Pass) -> Result:
        structlog.get_logger("bindery.test").info("converging")
        return Result(changed=False, requeue_after=self.requeue_after)

    async def gone(self, pass_: Pass) -> None:
        return None


def one(reconciler: Any, clock: VirtualClock) -> WorkerPool:
    store = Store()
    store.put(api.AGENTS, {"metadata": {"name": "a", "namespace": NS, "resourceVersion": "1"}})
    queue: WorkQueue[Request] = WorkQueue(clock)
    return WorkerPool(queue, store, {Kind.AGENT: reconciler}, workers=1)


@contextmanager
def captured_with_context() -> Iterator[list[MutableMapping[str, Any]]]:
    """Log entries as emitted, with the bound context merged in (``capture_logs`` takes no
    processors before structlog 24.3; the declared floor is 24.1)."""
    capture = structlog.testing.LogCapture()
    before = structlog.get_config()
    structlog.configure(processors=[structlog.contextvars.merge_contextvars, capture])
    try:
        yield capture.entries
    finally:
        structlog.configure(**before)


async def test_every_line_a_reconciler_logs_names_its_pass(clock: VirtualClock) -> None:
    workers = one(Logs(None), clock)
    request = Request(Kind.AGENT, Ref(NS, "a"))
    with captured_with_context() as logs:
        workers.queue.add(request)
        workers.queue.add_after(request, 1.0)
        workers.start()
        try:
            await clock.advance(1.0)
        finally:
            await workers.stop()
    lines = [line for line in logs if line["event"] == "converging"]
    assert [(x["kind"], x["key"]) for x in lines] == [("agent", f"{NS}/a")] * 2
    assert lines[0]["pass_id"] != lines[1]["pass_id"]  # one id per pass
    assert structlog.contextvars.get_contextvars() == {}  # nothing outlives the pass


async def test_the_pool_schedules_the_requeue_a_pass_asks_for(clock: VirtualClock) -> None:
    workers = one(Logs(3.0), clock)
    request = Request(Kind.AGENT, Ref(NS, "a"))
    assert await workers.process(request) == Result(changed=False, requeue_after=3.0)
    await clock.advance(2.9)
    assert workers.queue.pending() == frozenset()
    await clock.advance(0.1)
    assert workers.queue.pending() == {request}


def test_results_combine_to_the_earliest_requeue() -> None:
    assert (Result(True, 5.0) | Result(False, 2.0)) == Result(True, 2.0)
    assert (Result(False, None) | Result(False, 4.0)) == Result(False, 4.0)
    assert (Result(False) | Result(False)) == Result(False, None)
    assert Result(True, 1.0).requeue(None) == Result(True, 1.0)
    assert Result(False, 7.0).requeue(3.0) == Result(False, 3.0)


# ------------------------------------------------------------ the event loop's turn


@dataclass
class Quiet:
    """Passes that await nothing that suspends, as a restart's passes that write nothing."""

    order: list[str]
    expect: int
    done: asyncio.Event = field(default_factory=asyncio.Event)

    async def reconcile(self, pass_: Pass) -> Result:
        self.order.append(f"pass {pass_.request.ref.name}")
        if sum(o.startswith("pass") for o in self.order) == self.expect:
            self.done.set()
        return Result(changed=False)

    async def gone(self, pass_: Pass) -> None:
        return None


async def _interleaving(slice_seconds: float, passes: int = 5) -> list[str]:
    """What ran, in order: ``passes`` queued passes, and a task that wants the loop at every
    turn (as the liveness endpoint, a watch stream or a timer does)."""
    store = Store()
    queue: WorkQueue[Request] = WorkQueue()
    order: list[str] = []
    for i in range(passes):
        name = f"a{i}"
        store.put(api.AGENTS, {"metadata": {"name": name, "namespace": NS, "resourceVersion": "1"}})
        queue.add(Request(Kind.AGENT, Ref(NS, name)))
    quiet = Quiet(order, passes)
    pool = WorkerPool(queue, store, {Kind.AGENT: quiet}, workers=1, slice_seconds=slice_seconds)

    async def other() -> None:
        while True:
            order.append("other")
            await asyncio.sleep(0)

    ticker = asyncio.create_task(other())
    pool.start()
    await asyncio.wait_for(quiet.done.wait(), 5.0)
    await pool.stop()
    ticker.cancel()
    return order


def _runs_of_passes(order: list[str]) -> list[int]:
    """The lengths of the runs of passes with nothing else between them."""
    runs, run = [], 0
    for item in order:
        if item.startswith("pass"):
            run += 1
        elif run:
            runs.append(run)
            run = 0
    return [*runs, run] if run else runs


async def test_a_worker_gives_the_loop_a_turn_once_its_slice_is_used() -> None:
    # a slice used up by every pass: the loop runs the rest between any two passes
    assert _runs_of_passes(await _interleaving(slice_seconds=0.0)) == [1, 1, 1, 1, 1]
    # a slice no pass uses up: the passes run back to back, as they all did before the slice
    assert _runs_of_passes(await _interleaving(slice_seconds=3600.0)) == [5]
