"""Running the controller: kopf for watching, liveness and peering; our workers for reconciling.

Start-up lists every watched kind once, so the controller sees the whole world before its first
pass. A restarted controller therefore recomputes exactly the status it wrote before and writes
nothing, instead of flapping through half-known states while the watches catch up.
"""

from __future__ import annotations

import asyncio
import gc
import os
import socket
import uuid
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field, replace
from typing import Any

import kopf
import structlog
from prometheus_client import start_http_server

from controller import handlers, logs
from controller.k8s.api import AGENTS, KubeApi, load_api_client
from controller.leader import LeaderElector, LeadershipLostError
from controller.preflight import (
    check_cluster,
    check_liveness_port,
    check_port,
    default_namespace,
    load_client,
    port_in_use,
)
from controller.reconcile import Controller

log = structlog.get_logger("bindery.operator")


async def prime(controller: Controller, namespaces: list[str]) -> None:
    """Load every watched object before the first pass (one LIST per kind and namespace)."""
    scopes = namespaces or [""]
    for ref in handlers.WATCHED:
        for ns in scopes if ref.namespaced else [""]:
            for body in await controller.api.list_all(ref, ns):
                controller.observe(ref, body)
    for ref in handlers.OWNED:
        for ns in scopes:
            for body in await controller.api.list_all(
                ref, ns, label_selector=handlers.OWNED_SELECTOR
            ):
                controller.observe(ref, body)


def _identity() -> str:
    """Pod (or host) name plus a random suffix: unique even for two processes on one host."""
    return f"{os.environ.get('POD_NAME') or socket.gethostname()}_{uuid.uuid4().hex[:8]}"


@dataclass(frozen=True)
class Options:
    """How this controller process runs: by default, reconciling only while it holds the leader
    Lease, so a second instance waits instead of reconciling beside the first."""

    namespaces: list[str]
    workers: int = 8
    leader_election: bool = True
    election_namespace: str = ""
    election_name: str = "bindery-controller"
    identity: str = field(default_factory=_identity)


def build_registry(options: Options, stop: asyncio.Event) -> kopf.OperatorRegistry:
    registry = kopf.OperatorRegistry()
    handlers.register(registry)
    # A private registry gets none of kopf's defaults: log in the way kopf would by default.
    kopf.on.login(registry=registry)(kopf.login_via_client)

    # Retried every 2 s (kopf's default is 60 s): a controller started while the API server is
    # away begins as soon as it is back.
    @kopf.on.startup(registry=registry, backoff=2.0)
    async def startup(settings: kopf.OperatorSettings, memo: Any, **_: Any) -> None:
        handlers.configure_watching(settings)
        kube = KubeApi(load_api_client(), threads=max(4, options.workers * 2))
        controller = Controller(
            kube,
            workers=options.workers,
            instance=options.identity,
            session_service_account=os.environ.get("BINDERY_SESSION_SERVICE_ACCOUNT", ""),
            namespaces=options.namespaces,
        )
        await prime(controller, options.namespaces)
        # The primed world is long-lived: move it out of the collector's generations so full
        # collections do not walk every cached object again and again.
        gc.freeze()
        memo.controller = controller

        async def lead() -> None:
            controller.start()
            controller.enqueue_all()
            log.info(
                "controller started",
                workers=options.workers,
                namespaces=options.namespaces or ["*"],
                agents=len(controller.store.of(AGENTS)),
            )

        if not options.leader_election:
            await lead()
            return
        elector = LeaderElector(
            kube,
            namespace=options.election_namespace,
            name=options.election_name,
            identity=options.identity,
        )
        memo.elector = elector
        memo.election = asyncio.create_task(_elect(elector, lead, stop))
        log.info("waiting to lead", lease=f"{options.election_namespace}/{options.election_name}")

    @kopf.on.cleanup(registry=registry)
    async def cleanup(memo: Any, **_: Any) -> None:
        election: asyncio.Task[None] | None = getattr(memo, "election", None)
        if election is not None:
            election.cancel()
        controller: Controller | None = getattr(memo, "controller", None)
        if controller is not None:
            await controller.stop()
            elector: LeaderElector | None = getattr(memo, "elector", None)
            if elector is not None:  # only once our workers have stopped writing
                await elector.release()
            controller.api.close()

    @kopf.on.probe(id="queue", registry=registry)
    def queue_depth(memo: Any, **_: Any) -> int:
        controller: Controller | None = getattr(memo, "controller", None)
        return len(controller.queue) if controller else -1

    return registry


async def _elect(
    elector: LeaderElector, lead: Callable[[], Awaitable[None]], stop: asyncio.Event
) -> None:
    try:
        await elector.run(lead, stop)
    except LeadershipLostError as exc:
        log.exception("lost leadership; stopping", error=str(exc))
        stop.set()


def run(*, options: Options, liveness: str, metrics_port: int, log_level: str) -> int:
    """Check what the controller needs (raising ``PreflightError``), then run until stopped."""
    logs.configure(log_level)
    check_liveness_port(liveness)
    if metrics_port:
        check_port(metrics_port, "", "metrics server", "--metrics-port=PORT")
    check_cluster(load_client())
    if options.leader_election and not options.election_namespace:
        options = replace(options, election_namespace=default_namespace())
    if metrics_port:
        try:
            start_http_server(metrics_port)
        except OSError as exc:  # taken between the check and now
            raise port_in_use(metrics_port, "metrics server", "--metrics-port=PORT", exc) from exc
    log.info(
        "starting",
        mode="leader election" if options.leader_election else "standalone",
        lease=f"{options.election_namespace}/{options.election_name}"
        if options.leader_election
        else None,
    )

    async def main() -> None:
        stop = asyncio.Event()
        await kopf.operator(
            registry=build_registry(options, stop),
            memo=kopf.Memo(),
            clusterwide=not options.namespaces,
            namespaces=options.namespaces,
            standalone=True,  # one active replica is decided by our own Lease, not kopf peering
            liveness_endpoint=liveness or None,
            stop_flag=stop,
        )
        if stop.is_set() and options.leader_election:
            raise SystemExit(1)

    asyncio.run(main())
    return 0
