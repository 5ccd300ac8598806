"""A virtual clock for unit tests: time moves only when the test moves it, never on its own.

It stands in for ``controller.reconcile.clock.LoopClock`` wherever the reconcile layer waits
(backoff, requeues, the probe, the sweep's settling, catching up) or tells the wall time (status
stamps, idle, grace and acknowledgement periods). :meth:`VirtualClock.advance`
fires the timers due in order, letting the event loop run what each one wakes; no test using
it sleeps on the wall clock.
"""

from __future__ import annotations

import asyncio
import heapq
import itertools
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import TypeVar

T = TypeVar("T")


@dataclass(order=True)
class VirtualTimer:
    at: float
    seq: int
    callback: Callable[[], None] = field(compare=False)
    cancelled: bool = field(default=False, compare=False)

    def cancel(self) -> None:
        self.cancelled = True

    def when(self) -> float:
        return self.at


WALL_START = datetime(2026, 1, 1, 12, 0, tzinfo=UTC)
"""The wall time a virtual clock starts at."""


class VirtualClock:
    """Monotonic seconds and a wall time that advance together, only through :meth:`advance`,
    :meth:`run` or :meth:`until` (so idle, grace and acknowledgement periods pass in tests
    without anyone writing old timestamps into status)."""

    def __init__(self, start: float = 1000.0, wall: datetime = WALL_START) -> None:
        self._start = start
        self._now = start
        self._wall = wall
        self._timers: list[VirtualTimer] = []
        self._seq = itertools.count()

    def now(self) -> float:
        return self._now

    def wall(self) -> datetime:
        return self._wall + timedelta(seconds=self._now - self._start)

    def call_at(self, when: float, callback: Callable[[], None]) -> VirtualTimer:
        timer = VirtualTimer(when, next(self._seq), callback)
        heapq.heappush(self._timers, timer)
        return timer

    async def sleep(self, seconds: float) -> None:
        woken: asyncio.Future[None] = asyncio.get_running_loop().create_future()

        def wake() -> None:
            if not woken.done():
                woken.set_result(None)

        timer = self.call_at(self._now + seconds, wake)
        try:
            await woken
        finally:
            timer.cancel()

    @staticmethod
    async def settle(rounds: int = 20) -> None:
        """Let the event loop run whatever is ready (no time passes)."""
        for _ in range(rounds):
            await asyncio.sleep(0)

    def _next(self) -> float | None:
        while self._timers and self._timers[0].cancelled:
            heapq.heappop(self._timers)
        return self._timers[0].at if self._timers else None

    async def advance(self, seconds: float) -> None:
        """Move time ``seconds`` forward, firing every timer due on the way, in order."""
        end = self._now + seconds
        await self.settle()
        while (due := self._next()) is not None and due <= end:
            timer = heapq.heappop(self._timers)
            self._now = max(self._now, due)
            timer.callback()
            await self.settle()
        self._now = end
        await self.settle()

    async def until(self, condition: Callable[[], bool], within: float) -> None:
        """Move time forward timer by timer until ``condition`` holds (at most ``within`` s)."""
        limit = self._now + within
        await self.settle()
        while not condition():
            due = self._next()
            if due is None or due > limit:
                raise AssertionError(f"not within {within} s (virtual)")
            await self.advance(due - self._now)

    async def run(self, awaitable: Awaitable[T], within: float) -> T:
        """Await ``awaitable``, moving time forward as it waits (at most ``within`` s)."""
        task = asyncio.ensure_future(awaitable)
        try:
            await self.until(task.done, within)
        finally:
            task.cancel()
        return task.result()
