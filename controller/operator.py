"""Running the controller: kopf for watching, liveness and peering; our workers for reconciling.

Start-up lists every watched kind once, so the controller sees the whole world before its first
pass. A restarted controller therefore recomputes exactly the status it wrote before and writes
nothing, instead of flapping through half-known states while the watches catch up.
"""

from __future__ import annotations

import asyncio
import os
from typing import Any

import kopf
import structlog
from prometheus_client import start_http_server

from controller import handlers, logs
from controller.k8s.api import KubeApi, load_api_client
from controller.reconciler import Controller

log = structlog.get_logger("bindery.operator")


async def prime(controller: Controller, namespaces: list[str]) -> None:
    """Load every watched object before the first pass (one LIST per kind and namespace)."""
    scopes = namespaces or [""]
    for kind, ref in handlers.WATCHED:
        for ns in scopes if ref.namespaced else [""]:
            for body in await controller.api.list_all(ref, ns):
                controller.observe(kind, body)
    for ref in handlers.OWNED:
        for ns in scopes:
            for body in await controller.api.list_all(
                ref, ns, label_selector=handlers.OWNED_SELECTOR
            ):
                controller.observe_owned(ref, body)


def build_registry(namespaces: list[str], workers: int) -> kopf.OperatorRegistry:
    registry = kopf.OperatorRegistry()
    handlers.register(registry)
    # A private registry gets none of kopf's defaults: log in the way kopf would by default.
    kopf.on.login(registry=registry)(kopf.login_via_client)

    @kopf.on.startup(registry=registry)
    async def startup(settings: kopf.OperatorSettings, memo: Any, **_: Any) -> None:
        handlers.configure_watching(settings)
        kube = KubeApi(load_api_client(), threads=max(4, workers * 2))
        controller = Controller(
            kube,
            workers=workers,
            instance=os.environ.get("POD_NAME", ""),
            session_service_account=os.environ.get("BINDERY_SESSION_SERVICE_ACCOUNT", ""),
        )
        await prime(controller, namespaces)
        controller.start()
        controller.enqueue_all()
        memo.controller = controller
        log.info(
            "controller started",
            workers=workers,
            namespaces=namespaces or ["*"],
            agents=len(controller.observed.bodies["agent"]),
        )

    @kopf.on.cleanup(registry=registry)
    async def cleanup(memo: Any, **_: Any) -> None:
        controller: Controller | None = getattr(memo, "controller", None)
        if controller is not None:
            await controller.stop()
            controller.api.close()

    @kopf.on.probe(id="queue", registry=registry)
    def queue_depth(memo: Any, **_: Any) -> int:
        controller: Controller | None = getattr(memo, "controller", None)
        return len(controller.queue) if controller else -1

    return registry


def run(
    *,
    namespaces: list[str],
    liveness: str,
    metrics_port: int,
    standalone: bool,
    peering: str,
    log_level: str,
    workers: int = 8,
) -> int:
    logs.configure(log_level)
    if metrics_port:
        start_http_server(metrics_port)
    registry = build_registry(namespaces, workers)
    asyncio.run(
        kopf.operator(
            registry=registry,
            memo=kopf.Memo(),
            clusterwide=not namespaces,
            namespaces=namespaces,
            standalone=standalone or not peering,
            peering_name=peering or None,
            liveness_endpoint=liveness or None,
        )
    )
    return 0
