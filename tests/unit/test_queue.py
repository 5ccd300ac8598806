"""The deduplicating work queue (client-go workqueue semantics).

Timing runs on a virtual clock (the ``clock`` fixture): no test here sleeps on the wall clock.
"""

from __future__ import annotations

import asyncio

from controller.reconcile.queue import WorkQueue
from tests.unit.virtual_clock import VirtualClock


async def get_now(q: WorkQueue[str]) -> str:
    """Take the next item, failing instead of hanging if none is ready."""
    return await asyncio.wait_for(q.get(), timeout=1.0)


async def assert_empty(q: WorkQueue[str]) -> None:
    """Nothing is handed out, however long the loop runs what is ready."""
    taking = asyncio.create_task(q.get())
    await VirtualClock.settle()
    ready = taking.done()
    taking.cancel()
    await asyncio.gather(taking, return_exceptions=True)
    assert not ready, "the queue handed out an item"


async def test_new_queue_is_idle_and_empty() -> None:
    q: WorkQueue[str] = WorkQueue()
    assert q.idle
    assert len(q) == 0
    await assert_empty(q)


async def test_add_dedups_pending_items() -> None:
    q: WorkQueue[str] = WorkQueue()
    q.add("a")
    q.add("b")
    q.add("a")
    q.add("a")
    assert len(q) == 2
    assert not q.idle
    assert await get_now(q) == "a"
    assert await get_now(q) == "b"
    await assert_empty(q)


async def test_fifo_order() -> None:
    q: WorkQueue[str] = WorkQueue()
    for item in "cab":
        q.add(item)
    assert [await get_now(q) for _ in range(3)] == ["c", "a", "b"]


async def test_get_moves_item_to_active() -> None:
    q: WorkQueue[str] = WorkQueue()
    q.add("a")
    item = await get_now(q)
    assert len(q) == 0
    assert not q.idle  # still being processed
    q.done(item)
    assert q.idle


async def test_readd_while_active_requeues_after_done() -> None:
    q: WorkQueue[str] = WorkQueue()
    q.add("a")
    item = await get_now(q)
    q.add("a")
    q.add("a")
    assert len(q) == 0  # never handed out twice at once
    await assert_empty(q)
    q.done(item)
    assert len(q) == 1
    assert await get_now(q) == "a"
    q.done("a")
    assert q.idle
    await assert_empty(q)  # the two re-adds collapsed into one


async def test_done_without_readd_does_not_requeue() -> None:
    q: WorkQueue[str] = WorkQueue()
    q.add("a")
    q.done(await get_now(q))
    assert q.idle
    await assert_empty(q)


async def test_other_items_flow_while_one_is_active() -> None:
    q: WorkQueue[str] = WorkQueue()
    q.add("a")
    first = await get_now(q)
    q.add("b")
    q.add("a")
    assert await get_now(q) == "b"
    q.done("b")
    q.done(first)
    assert await get_now(q) == "a"


async def test_concurrent_workers_never_process_one_item_twice() -> None:
    q: WorkQueue[str] = WorkQueue()
    running: set[str] = set()
    processed: list[str] = []

    async def worker() -> None:
        while True:
            item = await q.get()
            assert item not in running
            running.add(item)
            await asyncio.sleep(0)
            if len(processed) < 6:
                q.add(item)  # a change arrives mid-processing
            await asyncio.sleep(0)
            running.discard(item)
            processed.append(item)
            q.done(item)

    q.add("x")
    q.add("y")
    tasks = [asyncio.create_task(worker()) for _ in range(3)]
    for _ in range(200):
        if q.idle and len(processed) >= 5:
            break
        await asyncio.sleep(0)  # yield to the workers
    for t in tasks:
        t.cancel()
    await asyncio.gather(*tasks, return_exceptions=True)
    assert q.idle
    assert set(processed) == {"x", "y"}
    assert len(processed) > 2  # the mid-processing changes were not lost


async def test_add_after_adds_later(clock: VirtualClock) -> None:
    q: WorkQueue[str] = WorkQueue(clock)
    q.add_after("a", 0.3)
    assert len(q) == 0
    await clock.advance(0.29)
    await assert_empty(q)
    await clock.advance(0.01)
    assert await get_now(q) == "a"


async def test_add_after_dedups_with_pending(clock: VirtualClock) -> None:
    q: WorkQueue[str] = WorkQueue(clock)
    q.add("a")
    q.add_after("a", 0.01)
    await clock.advance(0.05)
    assert len(q) == 1


async def test_an_item_waits_on_one_timer_the_earliest(clock: VirtualClock) -> None:
    """Retries asked for by several passes never multiply into several timers."""
    q: WorkQueue[str] = WorkQueue(clock)
    q.add_after("a", 0.2)
    q.add_after("a", 0.05)  # earlier: replaces the first
    q.add_after("a", 0.3)  # later: the earlier one stands
    await clock.advance(0.05)
    assert await get_now(q) == "a"
    q.done("a")
    await assert_empty(q)  # the replaced and the later ask added nothing more
    await clock.advance(0.3)
    assert len(q) == 0


def test_retry_delay_doubles_and_caps() -> None:
    q: WorkQueue[str] = WorkQueue()
    delays = [q.retry_delay("a") for _ in range(10)]
    assert delays == [0.5, 1.0, 2.0, 4.0, 8.0, 16.0, 32.0, 60.0, 60.0, 60.0]
    assert all(isinstance(d, float) for d in delays)


def test_retry_delay_custom_base_and_cap() -> None:
    q: WorkQueue[str] = WorkQueue()
    assert [q.retry_delay("a", base=1.0, cap=5.0) for _ in range(5)] == [1.0, 2.0, 4.0, 5.0, 5.0]


def test_retry_delay_is_per_item() -> None:
    q: WorkQueue[str] = WorkQueue()
    q.retry_delay("a")
    q.retry_delay("a")
    assert q.retry_delay("b") == 0.5
    assert q.retry_delay("a") == 2.0


def test_forget_resets_backoff() -> None:
    q: WorkQueue[str] = WorkQueue()
    for _ in range(4):
        q.retry_delay("a")
    q.retry_delay("b")
    q.forget("a")
    assert q.retry_delay("a") == 0.5
    assert q.retry_delay("b") == 1.0  # other items keep theirs
    q.forget("never-failed")  # forgetting an unknown item is harmless


def test_retry_delay_stays_capped_for_an_item_that_keeps_failing() -> None:
    """An item failing once a minute for a day must keep getting the cap, not crash the worker."""
    q: WorkQueue[str] = WorkQueue()
    delays = [q.retry_delay("a") for _ in range(1500)]
    assert delays[-1] == 60.0
    assert max(delays) == 60.0


async def test_tuple_keys() -> None:
    q: WorkQueue[tuple[str, str]] = WorkQueue()
    q.add(("agent", "ns/a"))
    q.add(("agent", "ns/a"))
    q.add(("tool", "ns/a"))
    assert len(q) == 2
