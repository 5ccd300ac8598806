"""kopf glue: watch events in, nothing else.

kopf watches the five Bindery kinds and Namespaces; the objects the controller creates itself
(``OWNED``) are listed and watched by its own informers (``controller.reconcile.informer``),
without kopf's per-object pipeline. Every handler is an ``on.event`` handler that hands the
object to the controller's intake and returns, so kopf keeps no progress or diff-base
annotations on user objects: the only thing the controller writes on them is ``status`` (and,
while an agent holds a work URI, one finalizer).

The handlers are coroutines on purpose: kopf runs a plain function in a thread pool, and the
intake (caches, registry, work queue) belongs to the event loop's thread alone.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import kopf

from controller.k8s import api
from controller.reconcile import Controller

__all__ = [
    "WATCHED",
    "NoDiffBase",
    "configure_watching",
    "register",
]

WATCHED: tuple[api.Endpoint, ...] = tuple(api.ENDPOINTS.values())
"""The Bindery kinds."""


def _observe(endpoint: api.Endpoint):  # type: ignore[no-untyped-def]
    async def handler(event: dict[str, Any], memo: Any, **_: Any) -> None:
        controller: Controller = memo.controller
        kind = event.get("type")
        body = event["object"]
        controller.observe(endpoint, body, deleted=kind == "DELETED")
        if kind is None:  # kopf is listing (a reconnect's listing may miss deletions)
            controller.listed(endpoint, body)
        else:
            controller.watched(endpoint)

    handler.__name__ = f"observe_{endpoint.plural}"
    return handler


async def observe_namespaces(event: dict[str, Any], memo: Any, **_: Any) -> None:
    """A Namespace's labels, for ResourceGrants' namespaceSelector. Nothing else of it is kept,
    and no sweep follows a listing: a Namespace missed while deleted leaves only its labels."""
    controller: Controller = memo.controller
    controller.observe(api.NAMESPACES, event["object"], deleted=event.get("type") == "DELETED")


def register(registry: kopf.OperatorRegistry) -> None:
    """Register the watch handlers on ``registry``."""
    for ref in WATCHED:
        kopf.on.event(
            group=ref.group,
            version=ref.version,
            plural=ref.plural,
            registry=registry,
            id=f"observe-{ref.plural}",
        )(_observe(ref))
    kopf.on.event(
        version=api.NAMESPACES.version,
        plural=api.NAMESPACES.plural,
        registry=registry,
        id="observe-namespaces",
    )(observe_namespaces)  # type: ignore[arg-type]


class NoDiffBase(kopf.DiffBaseStorage):
    """A diff base that keeps nothing: Bindery registers no change-detecting handlers.

    kopf builds every event's diff base (a deep copy of the body) for ``on.create``/``on.update``
    handlers. The intake compares resourceVersions itself, so that copy would be pure cost on
    every event, the controller's own write echoes included.
    """

    def build(
        self, *, body: kopf.Body, extra_fields: Iterable[Any] | None = None
    ) -> kopf.BodyEssence:
        return kopf.BodyEssence()

    def fetch(self, *, body: kopf.Body) -> kopf.BodyEssence | None:
        return None

    def store(self, *, body: kopf.Body, patch: kopf.Patch, essence: kopf.BodyEssence) -> None:
        return None


def configure_watching(settings: kopf.OperatorSettings, *, namespaced: bool = False) -> None:
    """Explicit watch timeouts (silent watches are the classic kopf failure), listings in
    pages, and no diff base.

    ``namespaced`` (``--namespace``): the named namespaces are watched for as long as the
    controller runs. kopf would otherwise observe them and stop watching one the moment it is
    marked for deletion, before its content is gone, leaving the agents in it with their
    finalizers and their holds unreleased while the namespace waits for them.
    """
    settings.scanning.disabled = namespaced
    settings.watching.server_timeout = 300
    settings.watching.client_timeout = 330
    settings.watching.connect_timeout = 10
    settings.watching.reconnect_backoff = 1.0
    # List in pages, as the start-up LIST does: one response holding every agent at once is
    # the controller's memory peak in a large namespace.
    settings.watching.chunk_size = api.LIST_PAGE
    # kopf keeps one task per object until it has been idle this long; a restart lists every
    # object at once, so the default (5 s) holds a task and its last body for each of them, and
    # a task that outlives a few collections is only freed by a full one (its reference cycles).
    settings.queueing.idle_timeout = 0.05
    settings.persistence.diffbase_storage = NoDiffBase()
    settings.posting.level = 40  # logging.ERROR: kopf's own events only for real failures
    # Reconnect within seconds once the API server is back (kopf repeats the last delay).
    settings.networking.error_backoffs = [0.5, 1, 2, 3]
