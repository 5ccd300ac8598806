"""Between passes: objects deleted while unwatched leave the view, and a long listing is swept
once."""

from __future__ import annotations

from typing import Any

from controller.domain.refs import Request
from controller.k8s import api
from controller.reconcile.resync import missed, vanished
from tests.unit.agent_pass_world import (
    NS,
    Body,
    X,
    agent,
    run,
    world,
)
from tests.unit.virtual_clock import VirtualClock


async def test_the_sweep_forgets_a_holder_deleted_unseen_and_wakes_its_claimants() -> None:
    c, fake = world(agent("a", X), agent("b", X))
    await run(c, "a", "b")
    c.queue.drain()
    del fake.objects[("agentspecs", NS, "a")]
    listed = {
        k: v["metadata"]["resourceVersion"]
        for (p, ns, n), v in fake.objects.items()
        if p == "agentspecs"
        for k in [f"{ns}/{n}"]
    }

    async def list_versions(*_: Any, **__: Any) -> tuple[str, dict[str, str]]:
        return str(next(fake._rv)), listed

    fake.list_versions = list_versions  # type: ignore[attr-defined]
    assert await c.sweeper.sweep(api.AGENTS) == 1
    assert c.registry.agent(f"{NS}/a") is None
    assert Request.agent(f"{NS}/b") in c.queue.drain()


def test_a_listing_proves_deleted_only_what_it_could_have_seen() -> None:
    def at(rv: int) -> Body:
        return {"metadata": {"resourceVersion": str(rv)}}

    stored = {"ns/old": at(5), "ns/new": at(12), "ns/listed": at(3), "other/x": at(1)}
    gone = vanished(stored, "10", {"ns/listed": "3"}, namespace="ns")
    assert gone == [at(5)]  # created after the listing (12) or outside the scope: kept
    # Listed newer than stored, or never stored: changes whose events were lost.
    assert missed(stored, {"ns/listed": "4", "ns/new": "12", "ns/unseen": "2"}) == [
        "ns/listed",
        "ns/unseen",
    ]


async def test_a_long_listing_is_swept_once_after_it_ends(clock: VirtualClock) -> None:
    c, _ = world(clock=clock)
    sweeps: list[Any] = []

    async def sweep(endpoint: Any) -> int:
        sweeps.append(endpoint)
        return 0

    c.sweeper.sweep = sweep  # type: ignore[method-assign]
    c.sweeper.settle = 0.05
    for _ in range(8):  # kopf's listing goes on for longer than `settle`
        c.relisted(api.RESOURCES)
        await clock.advance(0.02)
    assert sweeps == []
    await clock.advance(0.15)
    assert sweeps == [api.RESOURCES]
