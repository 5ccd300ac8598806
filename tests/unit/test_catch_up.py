"""Start-up catch-up: the first pass waits until the view holds what a metadata LIST showed.

The bodies come from the watches (kopf's listing); what they do not deliver is settled by a
listing and reads of the controller's own, so a deletion between the two listings cannot hold
start-up forever and nothing listed is missing from the first pass. Time is virtual (the
``clock`` fixture): the stalls and the watches' pace are moved through, not slept.
"""

from __future__ import annotations

import asyncio
import itertools
from typing import Any

import pytest

from controller.k8s import api
from controller.k8s.api import Endpoint
from controller.reconcile import catchup
from controller.reconcile.catchup import CatchUp, behind
from controller.reconcile.resync import Sweeper
from controller.reconcile.store import Store
from harness.fakes import NS, ListingApi
from tests.unit.virtual_clock import VirtualClock

Body = dict[str, Any]


def body(name: str, rv: int) -> Body:
    return {
        "metadata": {
            "name": name,
            "namespace": NS,
            "uid": f"{name}-uid",
            "resourceVersion": str(rv),
        }
    }


def observing(store: Store) -> Any:
    def observe(endpoint: Endpoint, found: Body, deleted: bool) -> None:
        store.put(endpoint, found)

    return observe


def sweeper(server: ListingApi) -> tuple[Sweeper, Store]:
    store = Store()
    kinds = [(api.AGENTS, "")]
    return Sweeper(server, store, observing(store), kinds=kinds, namespaces=[NS]), store  # type: ignore[arg-type]


def catching_up(
    server: ListingApi, clock: VirtualClock, sweeps: Sweeper | None = None
) -> tuple[CatchUp, Store]:
    store = sweeps.store if sweeps else Store()
    c = CatchUp(
        server,  # type: ignore[arg-type]
        store,
        observing(store),
        kinds=[(api.AGENTS, "")],
        namespaces=[NS],
        read_directly=sweeps.read_directly if sweeps else lambda endpoint: None,
        clock=clock,
    )
    return c, store


def test_behind_names_what_the_view_lacks_or_holds_older() -> None:
    stored = {"team/a": body("a", 5), "team/b": body("b", 9)}
    listed = {"team/a": "7", "team/b": "9", "team/c": "3"}
    assert behind(stored, listed) == {"team/a": "7", "team/c": "3"}
    assert behind({"team/a": body("a", 8)}, {"team/a": "7"}) == {}


async def test_what_the_watches_deliver_is_not_read_again(clock: VirtualClock) -> None:
    server = ListingApi({n: body(n, rv) for n, rv in (("a", 10), ("b", 11), ("c", 12))})
    s, store = catching_up(server, clock)
    listing = await s.listing()

    async def watches() -> None:  # kopf's listing, one object at a time
        for name in ("a", "b", "c"):
            await clock.sleep(0.02)
            store.put(api.AGENTS, body(name, server.objects[name]["metadata"]["resourceVersion"]))

    delivering = asyncio.create_task(watches())
    await clock.run(s.catch_up(listing, stall=5.0, poll=0.01), 2.0)
    await delivering
    assert server.requests == ["list_versions"]
    assert set(store.of(api.AGENTS)) == {"team/a", "team/b", "team/c"}


async def test_an_object_deleted_between_the_listings_does_not_hold_start_up(
    clock: VirtualClock,
) -> None:
    server = ListingApi({n: body(n, rv) for n, rv in (("a", 10), ("gone", 11))})
    s, store = catching_up(server, clock)
    listing = await s.listing()
    del server.objects["gone"]  # deleted before kopf lists: no watch will ever deliver it
    store.put(api.AGENTS, body("a", 10))
    await clock.run(s.catch_up(listing, stall=0.05, poll=0.01), 2.0)
    assert server.requests == ["list_versions", "list_versions"]  # no read of what is gone
    assert "team/gone" not in store.of(api.AGENTS)


async def test_what_the_watches_never_deliver_is_read_directly(clock: VirtualClock) -> None:
    server = ListingApi({n: body(n, rv) for n, rv in (("a", 10), ("b", 11))})
    s, store = catching_up(server, clock)
    listing = await s.listing()
    server.objects["b"] = body("b", 15)  # changed meanwhile: the newer version is read
    await clock.run(s.catch_up(listing, stall=0.05, poll=0.01), 2.0)
    assert server.requests == ["list_versions", "list_versions", "get", "get"]
    assert store.get(api.AGENTS, "team/b") == body("b", 15)


async def test_many_missing_objects_are_read_with_one_list(clock: VirtualClock) -> None:
    server = ListingApi({f"a{i}": body(f"a{i}", 100 + i) for i in range(50)})
    s, store = catching_up(server, clock)
    await clock.run(s.catch_up(await s.listing(), stall=0.0, poll=0.01), 2.0)
    assert server.requests == ["list_versions", "list_all"]
    assert len(store.of(api.AGENTS)) == 50


async def test_an_api_server_away_while_catching_up_is_tried_again(clock: VirtualClock) -> None:
    server = ListingApi({"a": body("a", 10)})
    s, store = catching_up(server, clock)
    listing = await s.listing()
    server.fail = 2
    await clock.run(s.catch_up(listing, stall=0.02, poll=0.01), 2.0)
    assert store.get(api.AGENTS, "team/a") == body("a", 10)
    assert server.requests.count("list_versions") == 4  # two refused, then settled


async def test_catching_up_waits_while_the_watches_make_progress(clock: VirtualClock) -> None:
    server = ListingApi({f"a{i}": body(f"a{i}", 100 + i) for i in range(5)})
    s, store = catching_up(server, clock)
    listing = await s.listing()

    async def slow_watches() -> None:  # slower in all than the stall, never stalled itself
        for i in range(5):
            await clock.sleep(0.04)
            store.put(api.AGENTS, body(f"a{i}", 100 + i))

    delivering = asyncio.create_task(slow_watches())
    await clock.run(s.catch_up(listing, stall=0.1, poll=0.01), 2.0)
    await delivering
    assert server.requests == ["list_versions"]


@pytest.mark.parametrize("stored_rv", [10, 12])
async def test_a_version_at_or_past_the_listing_is_caught_up(
    stored_rv: int, clock: VirtualClock
) -> None:
    server = ListingApi({"a": body("a", 10)})
    s, store = catching_up(server, clock)
    store.put(api.AGENTS, body("a", stored_rv))
    await clock.run(s.catch_up(await s.listing(), stall=5.0, poll=0.01), 1.0)
    assert server.requests == ["list_versions"]


def swept(s: Sweeper) -> list[Endpoint]:
    """Record the sweeps ``s`` schedules instead of running them."""
    sweeps: list[Endpoint] = []
    s.relisted = sweeps.append  # type: ignore[method-assign,assignment]
    return sweeps


def test_kopfs_first_listing_is_not_swept() -> None:
    """Before its first listing the view held nothing of the kind: nothing to prove gone."""
    s, _ = sweeper(ListingApi())
    sweeps = swept(s)
    for name in ("a", "b", "c"):
        s.listed(api.AGENTS, f"{NS}/{name}")
    assert sweeps == []


def test_a_listing_after_a_watch_event_is_swept() -> None:
    s, _ = sweeper(ListingApi())
    sweeps = swept(s)
    s.listed(api.AGENTS, f"{NS}/a")
    s.watched(api.AGENTS)  # the watch began: a later listing follows a reconnect
    s.listed(api.AGENTS, f"{NS}/a")
    assert sweeps == [api.AGENTS]


def test_a_listing_begun_again_without_a_watch_event_is_swept() -> None:
    """A reconnect with a quiet watch in between: the same key listed twice."""
    s, _ = sweeper(ListingApi())
    sweeps = swept(s)
    s.listed(api.AGENTS, f"{NS}/a")
    s.listed(api.AGENTS, f"{NS}/b")
    s.listed(api.AGENTS, f"{NS}/a")  # deleted: b, while the watch was away
    s.listed(api.AGENTS, f"{NS}/c")
    assert sweeps == [api.AGENTS, api.AGENTS]


async def test_the_first_listing_is_swept_once_catching_up_read_objects_itself(
    clock: VirtualClock,
) -> None:
    """What catching up read directly did not come from kopf's listing: kopf may list after
    one of them is deleted, so that listing must be swept."""
    server = ListingApi({"a": body("a", 10)})
    s, store = sweeper(server)
    sweeps = swept(s)
    c, _ = catching_up(server, clock, s)
    await clock.run(c.catch_up(await c.listing(), stall=0.0, poll=0.01), 2.0)
    assert "team/a" in store.of(api.AGENTS)
    s.listed(api.AGENTS, f"{NS}/b")
    assert sweeps == [api.AGENTS]


async def test_looking_takes_a_bounded_share_of_the_loop(
    clock: VirtualClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A look over a large remainder is slow: the next one waits in proportion, not ``poll``."""
    server = ListingApi({f"a{i}": body(f"a{i}", 100 + i) for i in range(5)})
    s, store = catching_up(server, clock)
    listing = await s.listing()
    looks: list[float] = []
    ticks = iter(range(10**6))  # each look takes 1 s on the counter (the scan's cost)

    def perf_counter() -> float:
        return float(next(ticks))

    real_behind = catchup.behind

    def counted(stored: dict[str, Body], listed: dict[str, str]) -> dict[str, str]:
        looks.append(clock.now())
        return real_behind(stored, listed)

    monkeypatch.setattr(catchup, "perf_counter", perf_counter)
    monkeypatch.setattr(catchup, "behind", counted)
    await clock.run(s.catch_up(listing, stall=60.0, poll=0.01), 10 * catchup.POLL_SHARE)
    pauses = [b - a for a, b in itertools.pairwise(looks)]
    assert len(pauses) >= 2
    assert min(pauses) >= catchup.POLL_SHARE * 1.0  # not the 0.01 s poll
    assert len(store.of(api.AGENTS)) == 5  # settled after the stall all the same
