"""The clock the queue, the workers and the sweeper tell time by: the event loop's by default.

Everything in the reconcile layer that waits (backoff, requeues, the API-server probe, the
sweep's settling, catching up) reads and schedules time through a :class:`Clock`, so a test can
substitute a virtual one and move time forward itself instead of sleeping.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Protocol


class Timer(Protocol):
    """A scheduled callback (what ``loop.call_at`` returns)."""

    def cancel(self) -> None: ...

    def when(self) -> float: ...


class Clock(Protocol):
    """Monotonic time in seconds, timers at a time, and sleeping."""

    def now(self) -> float: ...

    def call_at(self, when: float, callback: Callable[[], None]) -> Timer: ...

    async def sleep(self, seconds: float) -> None: ...


class LoopClock:
    """The running event loop's clock (``loop.time``, ``loop.call_at``, ``asyncio.sleep``)."""

    def now(self) -> float:
        return asyncio.get_running_loop().time()

    def call_at(self, when: float, callback: Callable[[], None]) -> Timer:
        return asyncio.get_running_loop().call_at(when, callback)

    async def sleep(self, seconds: float) -> None:
        await asyncio.sleep(seconds)


LOOP_CLOCK = LoopClock()
