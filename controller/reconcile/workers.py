"""The worker pool: takes requests from the queue and runs each kind's reconciler, with backoff."""

from __future__ import annotations

import asyncio
import contextlib
import itertools
from collections.abc import Mapping
from time import perf_counter
from typing import Any

import structlog
import structlog.contextvars

from controller.domain.refs import Kind, Request
from controller.k8s import api
from controller.k8s.api import ApiError
from controller.reconcile import metrics
from controller.reconcile.clock import Timer, read
from controller.reconcile.kinds import Reconciler
from controller.reconcile.passes import Pass
from controller.reconcile.queue import WorkQueue
from controller.reconcile.result import Result
from controller.reconcile.store import Store
from controller.reconcile.writer import ForeignObjectError, StaleWriteError

log = structlog.get_logger("bindery.reconciler")

SLICE_SECONDS = 0.02
"""How long a worker runs passes back to back before it lets the rest of the event loop run.

A pass that writes nothing awaits nothing that suspends, and a queue with items hands out the
next one at once: without a turn for the loop, a restart's 50,000 passes held it for 45 s, and
the liveness endpoint, the watches and every timer waited that long (kubelet's probe timed out
throughout)."""


class WorkerPool:
    """``workers`` tasks dispatching queued requests through a table of per-kind reconcilers.

    A failed pass (one that raised, or that reported its failure on its object and returned
    ``Result.failed``) is retried with per-request exponential backoff; a request is never run twice
    at once (the queue guarantees it). A pass that asks to be looked at again
    (``Result.requeue_after``) is requeued here, and only here. Every log line of a pass
    carries its kind, key and pass id (bound once per pass with structlog's contextvars).

    While the API server is away (no answer, or 503 while it starts or stops), every pass fails
    and its backoff grows towards a minute; so that none of them waits that long once it is
    back, the requests that failed that way are *parked*: one of them, the probe, is retried
    every ``probe_seconds``, and the first pass that gets an answer again (the probe's or any
    other) requeues all of them.
    """

    def __init__(
        self,
        queue: WorkQueue[Request],
        store: Store,
        reconcilers: Mapping[Kind, Reconciler],
        *,
        workers: int,
        probe_seconds: float = 2.0,
        slice_seconds: float = SLICE_SECONDS,
    ) -> None:
        self.queue = queue
        self.slice_seconds = slice_seconds
        self.store = store
        self.reconcilers = reconcilers
        self.workers = workers
        self.probe_seconds = probe_seconds
        self._tasks: list[asyncio.Task[None]] = []
        self._parked: set[Request] = set()
        self._probe: Request | None = None
        self._release: Timer | None = None
        self.clock = queue.clock
        self._released_at = float("-inf")
        self._passes = itertools.count(1)

    def start(self) -> None:
        self._tasks = [
            asyncio.create_task(self._work(i), name=f"bindery-worker-{i}")
            for i in range(self.workers)
        ]

    async def stop(self) -> None:
        if self._release is not None:
            self._release.cancel()
            self._release = None
        for task in self._tasks:
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        self._tasks = []

    async def _work(self, index: int) -> None:
        turn = perf_counter()  # since the loop last ran anything else
        while True:
            if perf_counter() - turn >= self.slice_seconds:
                await asyncio.sleep(0)  # the loop's turn: probes, watches, timers
                turn = perf_counter()
            waits = not len(self.queue)
            request = await self.queue.get()
            if waits:  # the loop ran the rest while this worker waited
                turn = perf_counter()
            metrics.QUEUE_DEPTH.set(len(self.queue))
            with self._pass(request):
                try:
                    result = await self._run(request)
                except asyncio.CancelledError:
                    raise
                except Exception as exc:
                    delay = self._retry_delay(request, exc)
                    metrics.RECONCILES.labels(request.kind.value, "error").inc()
                    # An API refusal is expected now and then (conflicts, a webhook, RBAC);
                    # anything else is a bug worth its traceback. Either way the request is
                    # retried with backoff.
                    expected = isinstance(exc, ApiError | StaleWriteError | ForeignObjectError)
                    report = log.warning if expected else log.exception
                    report("reconcile failed; retrying", retry_in=delay, error=str(exc))
                    self.queue.add_after(request, delay)
                else:
                    if result is not None and result.failed:
                        # Reported on its object (the one rule): retried with backoff all the
                        # same, as a pass that raised is.
                        self.queue.add_after(request, self.queue.retry_delay(request))
                    else:
                        self.queue.forget(request)
                    self._answered(request)
                finally:
                    self.queue.done(request)

    def _pass(self, request: Request) -> contextlib.AbstractContextManager[object]:
        """The log context of one pass: every line logged during it names the pass."""
        return structlog.contextvars.bound_contextvars(
            kind=request.kind.value, key=request.ref.key, pass_id=next(self._passes)
        )

    def _retry_delay(self, request: Request, exc: Exception) -> float:
        delay = self.queue.retry_delay(request)
        if not (isinstance(exc, ApiError) and exc.away):
            self._answered(request)  # the API server answered: it is there
            return delay
        self._parked.add(request)
        if self._probe in (None, request):
            self._probe = request
            return min(delay, self.probe_seconds)
        return delay

    def _answered(self, request: Request) -> None:
        """A pass got its answers: whatever waits for the API server to come back goes now (at
        most once per ``probe_seconds``, so a request that alone gets no answer cannot spin)."""
        if request == self._probe:
            self._probe = None
        if self._parked and self._release is None:
            now = self.clock.now()
            wait = max(0.0, self._released_at + self.probe_seconds - now)
            self._release = self.clock.call_at(now + wait, self._release_parked)

    def _release_parked(self) -> None:
        self._release = None
        self._released_at = self.clock.now()
        parked, self._parked, self._probe = self._parked, set(), None
        log.info("the API server answers again; retrying the passes it failed", count=len(parked))
        for item in parked:
            self.queue.forget(item)
            self.queue.add(item)

    async def process(self, request: Request) -> Result | None:
        """Run one pass for ``request`` now, outside the workers (for tools and benchmarks)."""
        with self._pass(request):
            return await self._run(request)

    async def _run(self, request: Request) -> Result | None:
        """One pass for ``request`` (nothing but clean-up if its object is no longer in the
        view), and the requeue it asks for; what it came to (None: the object is gone)."""
        now = read(self.clock)
        body = self.store.get(api.ENDPOINTS[request.kind], request.ref.key)
        reconciler = self.reconcilers[request.kind]
        if body is None:
            await reconciler.gone(Pass.of(request, {}, now))
            return None
        result = await reconciler.reconcile(Pass.of(request, body, now))
        if result.requeue_after is not None:
            self.queue.add_after(request, result.requeue_after)
        elapsed = self.clock.now() - now.monotonic
        outcome = "error" if result.failed else "changed" if result.changed else "unchanged"
        metrics.RECONCILES.labels(request.kind.value, outcome).inc()
        metrics.RECONCILE_SECONDS.labels(request.kind.value).observe(elapsed)
        md: dict[str, Any] = body.get("metadata") or {}
        (log.info if result.changed else log.debug)(
            "reconciled",
            namespace=md.get("namespace", ""),
            name=md.get("name"),
            generation=md.get("generation"),
            outcome=outcome,
            requeue_after=result.requeue_after,
            ms=round(elapsed * 1000, 2),
        )
        return result
