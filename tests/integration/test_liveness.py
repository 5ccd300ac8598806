"""Liveness against the real API server: deletions the controller never saw do not strand anyone.

The controller here runs in-process with no watches on the five kinds (only its own informers
of the objects it creates), so every deletion of an AgentSpec or Resource is "missed" by
construction, as one made while a watch reconnects or between the start-up LIST and kopf's own
listing would be. What brings the view back to the truth is the sweep (a metadata-only LIST) and
the API server's answers to the controller's own requests.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator

import pytest

from controller.domain.work import hold_name
from controller.k8s import api
from controller.k8s.api import KubeApi
from controller.reconcile import Controller
from tests.integration.kube import agent, apply, apply_examples, get, work
from tests.support import Cluster

pytestmark = pytest.mark.integration

URI = "github-issue://example/project/41"


@pytest.fixture
async def unwatched(cluster: Cluster, crds: list[str], namespace: str) -> AsyncIterator[Controller]:
    """A controller that reconciles but watches none of the five kinds: it learns of them only
    from LISTs and its own writes."""
    kube = KubeApi(cluster.api_client(), connections=4)
    controller = Controller(kube, workers=2, namespaces=[namespace], resync_period=3600)
    controller.sweeper.settle = 0.1
    controller.sweeper.period = 3600  # no periodic backstop: only what a test asks for
    controller.watch()
    yield controller
    await controller.stop()
    await kube.close()


async def _state(cluster: Cluster, namespace: str, name: str) -> str:
    obj = await asyncio.to_thread(get, cluster, "agentspec", namespace, name)
    return str(((obj or {}).get("status") or {}).get("state", ""))


async def _until(cluster: Cluster, namespace: str, name: str, expected: str) -> None:
    for _ in range(150):
        if await _state(cluster, namespace, name) == expected:
            return
        await asyncio.sleep(0.1)
    raise AssertionError(f"{name} never reached {expected}")


async def test_a_holder_deleted_unseen_is_swept_and_its_claimant_takes_over(
    cluster: Cluster, namespace: str, unwatched: Controller
) -> None:
    apply_examples(cluster, namespace)
    apply(cluster, namespace, agent("a", resources=[work(URI)]))
    await unwatched.catch_up(await unwatched.listing(), stall=0)
    unwatched.start()
    unwatched.enqueue_all()
    await _until(cluster, namespace, "a", "Working")

    apply(cluster, namespace, agent("b", resources=[work(URI)]))
    # b becomes known, as a relist would make it
    await unwatched.catch_up(await unwatched.listing(), stall=0)
    unwatched.enqueue_all()
    await _until(cluster, namespace, "b", "Waiting")

    # The holder goes away for good while the controller is not watching anything: with its
    # informers on, the garbage collector's deletion of a's session objects would tell it.
    await unwatched.informers.stop()
    patch = json.dumps({"metadata": {"finalizers": None}})
    cluster.kubectl("patch", "agentspec", "a", "-n", namespace, "--type=merge", "-p", patch)
    cluster.kubectl("delete", "agentspec", "a", "-n", namespace, "--wait=true")
    await asyncio.sleep(0.5)
    assert await _state(cluster, namespace, "b") == "Waiting"  # nothing told the controller

    unwatched.relisted(api.AGENTS)  # what kopf's relist after a reconnect triggers
    await _until(cluster, namespace, "b", "Working")
    assert unwatched.registry.agent(f"{namespace}/a") is None
    lease = get(cluster, "lease", namespace, hold_name(URI))
    assert lease is not None
    assert lease["spec"]["holderIdentity"] == f"{namespace}/b"


async def test_the_sweep_lists_metadata_only_and_keeps_what_is_newer_than_the_listing(
    cluster: Cluster, namespace: str, unwatched: Controller
) -> None:
    apply_examples(cluster, namespace)
    await unwatched.catch_up(await unwatched.listing(), stall=0)
    listed_rv, versions = await unwatched.api.list_versions(api.RESOURCES, namespace)
    assert versions  # the examples' Resources, by key
    assert all(key.startswith(f"{namespace}/") for key in versions)
    assert int(listed_rv) >= max(int(v) for v in versions.values())
    cluster.kubectl("delete", "resources.bindery.dev", "--all", "-n", namespace, "--wait=true")
    assert await unwatched.sweeper.sweep(api.RESOURCES) == len(versions)
    assert not unwatched.store.of(api.RESOURCES)
    assert await unwatched.sweeper.sweep(api.RESOURCES) == 0
