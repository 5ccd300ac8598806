"""A deduplicating work queue with the semantics of client-go's workqueue.

An item is queued at most once; an item added while it is being processed is queued again when
processing finishes, so the last change is never lost and one item never runs twice at once.
"""

from __future__ import annotations

import asyncio
from collections.abc import Hashable
from typing import Generic, TypeVar

from controller.reconcile.clock import LOOP_CLOCK, Clock, Timer

K = TypeVar("K", bound=Hashable)


class WorkQueue(Generic[K]):
    """Deduplicating, with per-item exponential backoff for retries."""

    def __init__(self, clock: Clock = LOOP_CLOCK) -> None:
        self.clock = clock
        self._queue: asyncio.Queue[K] = asyncio.Queue()
        self._pending: set[K] = set()
        self._active: set[K] = set()
        self._dirty: set[K] = set()
        self._failures: dict[K, int] = {}
        self._timers: dict[K, Timer] = {}

    def __len__(self) -> int:
        return len(self._pending)

    def add(self, item: K) -> None:
        if item in self._active:
            self._dirty.add(item)
        elif item not in self._pending:
            self._pending.add(item)
            self._queue.put_nowait(item)

    def add_after(self, item: K, delay: float) -> None:
        """Add ``item`` in ``delay`` seconds. An item waits on one timer at most, the earliest
        asked for: retries scheduled from several passes never multiply."""
        when = self.clock.now() + delay
        timer = self._timers.get(item)
        if timer is not None:
            if timer.when() <= when:
                return
            timer.cancel()
        self._timers[item] = self.clock.call_at(when, lambda: self._due(item))

    def _due(self, item: K) -> None:
        self._timers.pop(item, None)
        self.add(item)

    async def get(self) -> K:
        item = await self._queue.get()
        self._pending.discard(item)
        self._active.add(item)
        return item

    def done(self, item: K) -> None:
        self._active.discard(item)
        if item in self._dirty:
            self._dirty.discard(item)
            self.add(item)

    def retry_delay(self, item: K, base: float = 0.5, cap: float = 60.0) -> float:
        """Exponential backoff per item: 0.5 s, 1 s, 2 s ... up to ``cap``."""
        failures = self._failures.get(item, 0)
        delay = min(cap, base * 2 ** min(failures, 32))  # bounded exponent: no overflow
        if delay < cap:
            self._failures[item] = failures + 1
        return float(delay)

    def forget(self, item: K) -> None:
        """The item succeeded: reset its backoff."""
        self._failures.pop(item, None)

    def pending(self) -> frozenset[K]:
        """The items waiting to be taken (a snapshot)."""
        return frozenset(self._pending)

    def drain(self) -> set[K]:
        """Take every waiting item at once without processing it (for tests and tools)."""
        items = set(self._pending)
        while not self._queue.empty():
            self._queue.get_nowait()
        self._pending.clear()
        return items

    @property
    def idle(self) -> bool:
        return not self._pending and not self._active
