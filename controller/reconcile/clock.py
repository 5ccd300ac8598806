"""The clock the reconcile layer tells time by: the event loop's and the system's by default.

Everything in the reconcile layer that waits (backoff, requeues, the API-server probe, the
sweep's settling, catching up) or stamps a time (status, the delivery's write time, Events,
idle and grace periods) reads and schedules time through a :class:`Clock`, so a test can
substitute a virtual one and move time forward itself instead of sleeping. A pass reads it once
(:func:`read`): every time it records or compares comes from that one :class:`Instant`.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Protocol


class Timer(Protocol):
    """A scheduled callback (what ``loop.call_at`` returns)."""

    def cancel(self) -> None: ...

    def when(self) -> float: ...


class Clock(Protocol):
    """Monotonic time in seconds, wall time, timers at a time, and sleeping."""

    def now(self) -> float:
        """Monotonic seconds (what timers are set in)."""
        ...

    def wall(self) -> datetime:
        """The wall time, timezone-aware in UTC (what status and Events record)."""
        ...

    def call_at(self, when: float, callback: Callable[[], None]) -> Timer: ...

    async def sleep(self, seconds: float) -> None: ...


class LoopClock:
    """The running event loop's clock (``loop.time``, ``loop.call_at``, ``asyncio.sleep``)."""

    def now(self) -> float:
        return asyncio.get_running_loop().time()

    def wall(self) -> datetime:
        return datetime.now(UTC)

    def call_at(self, when: float, callback: Callable[[], None]) -> Timer:
        return asyncio.get_running_loop().call_at(when, callback)

    async def sleep(self, seconds: float) -> None:
        await asyncio.sleep(seconds)


LOOP_CLOCK = LoopClock()


@dataclass(frozen=True)
class Instant:
    """One reading of a clock: its monotonic and its wall time, taken together."""

    monotonic: float
    wall: datetime

    @property
    def rfc3339(self) -> str:
        """The wall time to the second (status timestamps)."""
        return self.wall.strftime("%Y-%m-%dT%H:%M:%SZ")

    @property
    def micro_rfc3339(self) -> str:
        """The wall time to the microsecond (the API's MicroTime form), for times a duration
        is counted from: a whole-second stamp would shorten a grace by up to a second."""
        return self.wall.strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def read(clock: Clock) -> Instant:
    """Read ``clock`` once."""
    return Instant(clock.now(), clock.wall())
