"""kopf glue: watch events in, nothing else.

Every handler is an ``on.event`` handler that hands the object to the controller's intake and
returns. kopf therefore keeps no progress or diff-base annotations on user objects: the only
thing the controller writes on them is ``status`` (and, while an agent holds a work URI, one
finalizer).
"""

from __future__ import annotations

from typing import Any

import kopf

from controller.k8s import api
from controller.k8s.builders import MANAGED_BY, MANAGER
from controller.reconciler import Controller, ItemKind

OWNED_SELECTOR = f"{MANAGED_BY}={MANAGER}"


def _controller(memo: Any) -> Controller:
    controller: Controller = memo.controller
    return controller


def _deleted(event: dict[str, Any]) -> bool:
    return event.get("type") == "DELETED"


def _observe(kind: ItemKind):  # type: ignore[no-untyped-def]
    def handler(event: dict[str, Any], memo: Any, **_: Any) -> None:
        _controller(memo).observe(kind, event["object"], deleted=_deleted(event))

    handler.__name__ = f"observe_{kind}"
    return handler


def _observe_owned(kind: api.Kind):  # type: ignore[no-untyped-def]
    def handler(event: dict[str, Any], memo: Any, **_: Any) -> None:
        _controller(memo).observe_owned(kind, event["object"], deleted=_deleted(event))

    handler.__name__ = f"observe_{kind.plural}"
    return handler


WATCHED: tuple[tuple[ItemKind, api.Kind], ...] = (
    ("type", api.RESOURCE_TYPES),
    ("resource", api.RESOURCES),
    ("tool", api.TOOLS),
    ("agent", api.AGENTS),
)
OWNED: tuple[api.Kind, ...] = (api.CONFIG_MAPS, api.STATEFUL_SETS, api.LEASES)


def register(registry: kopf.OperatorRegistry) -> None:
    """Register the watch handlers on ``registry``."""
    for kind, ref in WATCHED:
        kopf.on.event(
            group=ref.group,
            version=ref.version,
            plural=ref.plural,
            registry=registry,
            id=f"observe-{ref.plural}",
        )(_observe(kind))
    for ref in OWNED:
        kopf.on.event(
            group=ref.group or None,
            version=ref.version,
            plural=ref.plural,
            registry=registry,
            labels={MANAGED_BY: MANAGER},
            id=f"observe-{ref.plural}",
        )(_observe_owned(ref))


def configure_watching(settings: kopf.OperatorSettings) -> None:
    """Explicit watch timeouts (silent watches are the classic kopf failure) and server-side
    label selectors, so only the objects Bindery owns are streamed for the built-in kinds."""
    settings.watching.server_timeout = 300
    settings.watching.client_timeout = 330
    settings.watching.connect_timeout = 10
    settings.watching.reconnect_backoff = 1.0
    for ref in OWNED:
        settings.watching.label_selectors[ref.plural] = OWNED_SELECTOR
    settings.posting.level = 40  # logging.ERROR: kopf's own events only for real failures
    settings.networking.error_backoffs = [1, 2, 5, 10, 30]
