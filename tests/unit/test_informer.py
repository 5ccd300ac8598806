"""The informer's loop: when it lists, when it watches again, and how long it waits between.

Its listing and watching against a real API server are tested in
``tests/integration/test_informer.py``; a version too old to watch from (410 Gone) cannot be
provoked there on demand, so the loop's decisions are driven here by a scripted API.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncGenerator, AsyncIterator
from typing import Any

import pytest

from controller.k8s import api
from controller.k8s.api import ApiError
from controller.reconcile.informer import BACKOFFS, Informer, Informers
from controller.reconcile.store import Store


def cm(name: str, version: str) -> dict[str, Any]:
    return {"metadata": {"name": name, "namespace": "ns", "uid": name, "resourceVersion": version}}


class Script:
    """Answers each listing and each watch with the next step scripted for it."""

    def __init__(self, lists: list[Any], watches: list[Any]) -> None:
        self.lists = lists
        self.watches = watches
        self.calls: list[str] = []
        self.over = asyncio.Event()
        """Set when a watch is asked for after the last scripted step."""

    async def list_pages(
        self, kind: api.Endpoint, namespace: str, selector: str, page: int
    ) -> AsyncIterator[tuple[str, list[dict[str, Any]]]]:
        self.calls.append("list")
        step = self.lists.pop(0)
        if isinstance(step, Exception):
            raise step
        version, items = step
        yield version, items

    async def watch(
        self, kind: api.Endpoint, namespace: str, selector: str, version: str, *, seconds: int
    ) -> AsyncGenerator[tuple[str, dict[str, Any]], None]:
        self.calls.append(f"watch@{version}")
        if not self.watches:
            self.over.set()
            await asyncio.Event().wait()  # a watch that stays open
        step = self.watches.pop(0)
        for event in step:
            if isinstance(event, Exception):
                raise event
            yield event


class Clock:
    def __init__(self) -> None:
        self.t = 0.0
        self.slept: list[float] = []

    def now(self) -> float:
        return self.t

    async def sleep(self, seconds: float) -> None:
        self.slept.append(seconds)
        self.t += seconds


async def run(script: Script, clock: Clock, store: Store | None = None) -> list[tuple[str, bool]]:
    told: list[tuple[str, bool]] = []
    store = store or Store()

    def observe(endpoint: api.Endpoint, body: dict[str, Any], deleted: bool) -> None:
        told.append((body["metadata"]["name"], deleted))
        (store.delete if deleted else store.put)(endpoint, body)

    informer = Informer(
        script,  # type: ignore[arg-type]
        store,
        observe,
        endpoint=api.CONFIG_MAPS,
        namespace="ns",
        clock=clock,  # type: ignore[arg-type]
    )
    task = asyncio.create_task(informer.run())
    await asyncio.wait_for(script.over.wait(), 5)
    task.cancel()
    await asyncio.gather(task, return_exceptions=True)
    return told


def gone() -> ApiError:
    return ApiError(410, "WATCH", "/api/v1/configmaps", {"reason": "Expired", "code": 410})


def away() -> ApiError:
    return ApiError(0, "WATCH", "/api/v1/configmaps", {"reason": "Unreachable"})


async def test_a_watch_continues_from_the_last_version_bookmarks_included() -> None:
    script = Script(
        lists=[("10", [cm("a", "9")])],
        watches=[
            [("MODIFIED", cm("a", "11")), ("BOOKMARK", {"metadata": {"resourceVersion": "15"}})],
            [("DELETED", cm("a", "16"))],
        ],
    )
    told = await run(script, Clock())
    assert script.calls == ["list", "watch@10", "watch@15", "watch@16"]
    assert told == [("a", False), ("a", False), ("a", True)]


async def test_410_gone_lists_again_and_observes_what_vanished_meanwhile() -> None:
    store = Store()
    script = Script(
        lists=[("10", [cm("a", "9"), cm("b", "8")]), ("30", [cm("b", "8")])],
        watches=[[gone()]],
    )
    told = await run(script, Clock(), store)
    assert script.calls == ["list", "watch@10", "list", "watch@30"]
    # "a" was deleted while nothing watched: the second listing proves it gone.
    assert told == [("a", False), ("b", False), ("b", False), ("a", True)]
    assert set(store.of(api.CONFIG_MAPS)) == {"ns/b"}


async def test_failures_back_off_and_watch_again_from_the_same_version() -> None:
    clock = Clock()
    script = Script(lists=[("10", [])], watches=[[away()], [away()], [away()], [away()], [away()]])
    await run(script, clock)
    assert script.calls == ["list"] + ["watch@10"] * 6  # never listed again
    assert clock.slept == [*BACKOFFS, BACKOFFS[-1]]


async def test_a_failed_listing_is_tried_again_until_it_succeeds() -> None:
    clock = Clock()
    script = Script(lists=[away(), ("10", [cm("a", "9")])], watches=[])
    told = await run(script, clock)
    assert script.calls == ["list", "list", "watch@10"]
    assert clock.slept == [BACKOFFS[0]]
    assert told == [("a", False)]


@pytest.mark.parametrize("events", [[], [("BOOKMARK", {"metadata": {"resourceVersion": "12"}})]])
async def test_a_watch_that_ends_at_once_is_not_reopened_in_a_spin(events: list[Any]) -> None:
    clock = Clock()
    script = Script(lists=[("10", [])], watches=[events, []])
    await run(script, clock)
    assert clock.slept == [BACKOFFS[0], BACKOFFS[0]]


async def test_waiting_for_a_listing_that_was_never_started_fails_at_once() -> None:
    script = Script(lists=[("1", [cm("a", "1")])], watches=[])
    informers = Informers(
        script,  # type: ignore[arg-type]
        Store(),
        lambda endpoint, body, deleted: None,
        kinds=[(api.CONFIG_MAPS, "")],
        namespaces=["ns"],
    )
    with pytest.raises(RuntimeError, match=r"Controller\.watch\(\) before"):
        await asyncio.wait_for(informers.synced(), 1)
    informers.start()
    await asyncio.wait_for(informers.synced(), 5)
    assert script.calls[0] == "list"
    await informers.stop()
