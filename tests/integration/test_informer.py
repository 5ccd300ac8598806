"""The controller's own list+watch of what it creates, against a real API server."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from controller.k8s import api, builders
from controller.k8s.api import KubeApi
from controller.reconcile.compact import data_of
from controller.reconcile.informer import Informer
from controller.reconcile.store import Store
from tests.support import Cluster

pytestmark = pytest.mark.integration

OWNED = {builders.MANAGED_BY: builders.MANAGER}
SELECTOR = f"{builders.MANAGED_BY}={builders.MANAGER}"


class View:
    """A store fed by an informer, and every (name, deleted) it was told, in order."""

    def __init__(self) -> None:
        self.store = Store()
        self.told: list[tuple[str, bool]] = []
        self.changed = asyncio.Event()

    def observe(self, endpoint: api.Endpoint, body: dict[str, Any], deleted: bool) -> None:
        self.told.append((body["metadata"]["name"], deleted))
        self.changed.set()
        if deleted:
            self.store.delete(endpoint, body)
        else:
            self.store.put(endpoint, body)

    def names(self) -> set[str]:
        return {key.rpartition("/")[2] for key in self.store.of(api.CONFIG_MAPS)}

    async def until(self, check: Any) -> None:
        """Wait (20 s at most) until ``check()`` holds."""
        async with asyncio.timeout(20):
            while not check():
                self.changed.clear()
                await self.changed.wait()


def config_map(namespace: str, name: str, owned: bool = True, value: str = "1") -> dict[str, Any]:
    metadata: dict[str, Any] = {"name": name, "namespace": namespace}
    if owned:
        metadata["labels"] = OWNED
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": metadata, "data": {"v": value}}


async def test_an_informer_lists_in_pages_then_watches_changes(
    cluster: Cluster, namespace: str
) -> None:
    kube = KubeApi(cluster.api_client())
    for i in range(7):
        await kube.create(api.CONFIG_MAPS, config_map(namespace, f"before-{i}"))
    await kube.create(api.CONFIG_MAPS, config_map(namespace, "not-ours", owned=False))
    view = View()
    informer = Informer(
        kube,
        view.store,
        view.observe,
        endpoint=api.CONFIG_MAPS,
        selector=SELECTOR,
        namespace=namespace,
        page=3,
    )
    task = asyncio.create_task(informer.run())
    try:
        await asyncio.wait_for(informer.synced.wait(), 20)
        # Synced means the whole listing is in the view: three pages of it here.
        assert view.names() == {f"before-{i}" for i in range(7)}
        stored = view.store.get(api.CONFIG_MAPS, f"{namespace}/before-0")
        assert stored is not None
        assert "managedFields" not in stored["metadata"]

        await kube.create(api.CONFIG_MAPS, config_map(namespace, "after"))
        await kube.merge_patch(api.CONFIG_MAPS, namespace, "before-1", {"data": {"v": "2"}})
        await kube.delete(api.CONFIG_MAPS, namespace, "before-2")
        await kube.create(api.CONFIG_MAPS, config_map(namespace, "late-not-ours", owned=False))
        await view.until(lambda: ("before-2", True) in view.told and "after" in view.names())
        await view.until(
            lambda: data_of(view.store.get(api.CONFIG_MAPS, f"{namespace}/before-1")) == {"v": "2"}
        )
        assert "before-2" not in view.names()
        assert not {"not-ours", "late-not-ours"} & {name for name, _ in view.told}
        assert informer.listings == 1  # one listing, then the watch
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
        await kube.close()


async def test_listing_again_observes_what_was_deleted_unseen_as_deleted(
    cluster: Cluster, namespace: str
) -> None:
    kube = KubeApi(cluster.api_client())
    for name in ("stays", "goes"):
        await kube.create(api.CONFIG_MAPS, config_map(namespace, name))
    view = View()
    informer = Informer(
        kube,
        view.store,
        view.observe,
        endpoint=api.CONFIG_MAPS,
        selector=SELECTOR,
        namespace=namespace,
    )
    try:
        await informer.list()
        assert view.names() == {"stays", "goes"}
        # Changes while nothing watches (the API server away, a watch expired):
        await kube.delete(api.CONFIG_MAPS, namespace, "goes")
        await kube.create(api.CONFIG_MAPS, config_map(namespace, "new"))
        view.told.clear()
        await informer.list()
        assert ("goes", True) in view.told
        assert view.names() == {"stays", "new"}
        assert informer.listings == 2
    finally:
        await kube.close()


async def test_a_watch_the_api_server_ends_is_watched_again_from_where_it_was(
    cluster: Cluster, namespace: str
) -> None:
    kube = KubeApi(cluster.api_client())
    view = View()
    informer = Informer(
        kube,
        view.store,
        view.observe,
        endpoint=api.CONFIG_MAPS,
        selector=SELECTOR,
        namespace=namespace,
        seconds=1,  # the API server ends each watch after a second
    )
    task = asyncio.create_task(informer.run())
    try:
        await asyncio.wait_for(informer.synced.wait(), 20)
        for i in range(4):
            await kube.create(api.CONFIG_MAPS, config_map(namespace, f"cm-{i}"))
            await asyncio.sleep(0.8)  # across several watches
        await view.until(lambda: view.names() == {f"cm-{i}" for i in range(4)})
        await kube.delete(api.CONFIG_MAPS, namespace, "cm-0")
        await view.until(lambda: "cm-0" not in view.names())
        assert informer.listings == 1  # watched again from the last version: never relisted
        assert [name for name, _ in view.told] == [f"cm-{i}" for i in range(4)] + ["cm-0"]
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
        await kube.close()
