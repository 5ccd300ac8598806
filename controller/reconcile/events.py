"""Kubernetes Events, posted in the background: a pass never waits for one or fails on one."""

from __future__ import annotations

import asyncio
import uuid
from typing import Any

import structlog

from controller.domain.status import Note
from controller.k8s import api, builders
from controller.reconcile import metrics
from controller.reconcile.clock import Instant

log = structlog.get_logger("bindery.events")


class EventRecorder:
    """A bounded queue of Events and one task that posts them (drained on stop).

    When the API server is slow and the queue is full, new events are dropped and counted in the
    log: status, not events, is the source of truth.
    """

    def __init__(self, kube: api.KubeApi, *, instance: str, capacity: int = 1000) -> None:
        self.api = kube
        self.instance = instance
        self._queue: asyncio.Queue[dict[str, Any]] = asyncio.Queue(maxsize=capacity)
        self._poster: asyncio.Task[None] | None = None
        self.dropped = 0

    def record(self, regarding: dict[str, Any], note: Note, at: Instant) -> None:
        """Queue one Event about ``regarding`` (an object body with apiVersion and kind), as
        seen at ``at`` (the pass's reading of the clock)."""
        body = builders.event(
            regarding,
            reason=note.reason,
            note=note.message,
            warning=note.warning,
            instance=self.instance,
            event_time=at.micro_rfc3339,
            suffix=uuid.uuid4().hex[:16],
        )
        try:
            self._queue.put_nowait(body)
        except asyncio.QueueFull:
            self.dropped += 1
            log.warning(
                "event queue full; dropping event", reason=note.reason, dropped=self.dropped
            )
            return
        if self._poster is None:
            self._poster = asyncio.get_running_loop().create_task(
                self._post_all(), name="bindery-events"
            )

    async def _post_all(self) -> None:
        while True:
            body = await self._queue.get()
            try:
                await self.api.create(api.EVENTS, body)
                metrics.API_WRITES.labels("events", "create").inc()
            except api.ApiError as exc:
                log.warning("could not post event", reason=body["reason"], error=str(exc))
            except Exception as exc:  # the API unreachable: events are best effort
                log.warning("could not post event", reason=body["reason"], error=repr(exc))
            finally:
                self._queue.task_done()

    async def stop(self, grace: float = 5.0) -> None:
        """Post what is queued (for at most ``grace`` seconds), then stop the poster."""
        if self._poster is None:
            return
        try:
            await asyncio.wait_for(self._queue.join(), grace)
        except TimeoutError:
            log.warning("stopping with events unposted", unposted=self._queue.qsize())
        self._poster.cancel()
        await asyncio.gather(self._poster, return_exceptions=True)
        self._poster = None
