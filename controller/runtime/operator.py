"""Running the controller: kopf for watching, liveness and peering; our workers for reconciling.

The controller sees the whole world before its first pass: start-up lists what exists (metadata
only), kopf's own listing delivers the bodies, and the workers start once the view holds all of
it. A restarted controller therefore recomputes exactly the status it wrote before and writes
nothing, instead of flapping through half-known states while the watches catch up; and every
object crosses the wire once.
"""

from __future__ import annotations

import asyncio
import gc
from collections.abc import Awaitable, Callable
from dataclasses import replace
from typing import Any

import aiohttp
import kopf
import structlog
from multidict import CIMultiDict
from prometheus_client import start_http_server

from controller.domain.models import GROUP
from controller.domain.work import WorkScope
from controller.k8s.api import AGENTS, ApiError, KubeApi, decode_json, load_api_client
from controller.reconcile import Controller
from controller.reconcile.catchup import Listing
from controller.runtime import handlers, logs
from controller.runtime.exits import Exit
from controller.runtime.leader import LeaderElector, LeadershipLostError
from controller.runtime.preflight import (
    PreflightError,
    check_cluster,
    check_liveness_port,
    check_port,
    default_namespace,
    load_client,
    port_in_use,
    unserved,
)
from controller.runtime.settings import Settings

log = structlog.get_logger("bindery.operator")

GC_THRESHOLD = 50_000
"""Allocations between the garbage collector's youngest-generation collections."""


class JsonResponse(aiohttp.ClientResponse):
    """kopf's responses, decoded by the controller's JSON parser: kopf reads every body it lists
    through ``json()``, and at start-up that is every object of the five kinds."""

    async def json(
        self,
        *,
        encoding: str | None = None,
        loads: Callable[[str], Any] = decode_json,
        content_type: str | None = "application/json",
    ) -> Any:
        return await super().json(encoding=encoding, loads=loads, content_type=content_type)


async def login(**kwargs: Any) -> kopf.ConnectionInfo | kopf.AiohttpSession | None:
    """kopf's own login from the client's configuration (basic auth, if any, is in its
    headers), in a session like kopf's own but for two things: the kubeconfig user's
    impersonation (``as``, ``as-groups``), which kopf's login does not read (kopf's watches then
    see what the controller's own requests see), and the JSON parser its responses are decoded
    with. Run on the event loop (the session belongs to it)."""
    info = kopf.login_via_client(**kwargs)
    if info is None:
        return None
    impersonate = load_api_client().impersonation.headers()
    session = aiohttp.ClientSession(
        connector=aiohttp.TCPConnector(limit=0, ssl=info.as_ssl_context()),
        headers=CIMultiDict([*info.as_http_headers().items(), *impersonate]),
        proxy=info.proxy_url,
        trust_env=info.trust_env,
        response_class=JsonResponse,
    )
    return kopf.AiohttpSession(
        server=info.server,
        default_namespace=info.default_namespace,
        priority=info.priority,
        expiration=info.expiration,
        aiohttp_session=session,
    )


def build_registry(settings: Settings, stop: asyncio.Event) -> kopf.OperatorRegistry:
    registry = kopf.OperatorRegistry()
    handlers.register(registry)
    # A private registry gets none of kopf's defaults: log in the way kopf would by default,
    # as the kubeconfig user's impersonation says.
    kopf.on.login(registry=registry)(login)

    # Retried every 2 s (kopf's default is 60 s): a controller started while the API server is
    # away begins as soon as it is back.
    @kopf.on.startup(registry=registry, backoff=2.0)
    async def startup(memo: Any, **kwargs: Any) -> None:
        kopf_settings: kopf.OperatorSettings = kwargs["settings"]
        handlers.configure_watching(kopf_settings, namespaced=bool(settings.namespaces))
        kube = KubeApi(load_api_client(), connections=max(4, settings.workers * 2))
        # kopf discovers what to watch once, right after this activity: a kind its discovery
        # misses (an API server restarting since the preflight) goes unwatched until some CRD
        # changes. Hold the start back until all five are served again.
        missing = await unserved(kube)
        if missing:
            await kube.close()
            raise kopf.TemporaryError(
                f"the API server does not serve {', '.join(missing)} ({GROUP}) right now (it may "
                "be restarting); waiting, so that kopf watches every Bindery kind",
                delay=2.0,
            )
        controller = Controller(
            kube,
            workers=settings.workers,
            instance=settings.identity,
            session_service_account=settings.session_service_account,
            namespaces=settings.namespaces,
            resync_period=settings.resync_seconds,
            delivery_image=settings.delivery_image,
            unacknowledged_release=settings.unacknowledged_release,
            acknowledge_timeout=settings.acknowledge_timeout,
            work_scope=settings.work_scope,
            work_hold_namespace=settings.work_hold_namespace,
        )
        memo.controller = controller
        elector = (
            LeaderElector(
                kube,
                namespace=settings.election_namespace,
                name=settings.election_name,
                identity=settings.identity,
            )
            if settings.leader_election
            else None
        )
        memo.elector = elector

        async def lead() -> None:
            controller.start()
            controller.enqueue_all()
            log.info(
                "controller started",
                workers=settings.workers,
                namespaces=settings.namespaces or ["*"],
                agents=len(controller.store.of(AGENTS)),
            )

        async def begin() -> None:
            # What exists now, listed while kopf lists the bodies (it starts watching once this
            # handler returns); a follower keeps its view current too, so it catches up before
            # it campaigns.
            controller.watch()
            await controller.catch_up(await _list_until_answered(controller))
            # The world is long-lived: move it out of the collector's generations so full
            # collections do not walk every cached object again and again.
            gc.freeze()
            if elector is None:
                await lead()
                return
            log.info(
                "waiting to lead", lease=f"{settings.election_namespace}/{settings.election_name}"
            )
            await _elect(elector, lead, stop)

        memo.running = asyncio.create_task(begin())
        memo.running.add_done_callback(lambda task: _stop_on_failure(task, stop))

    @kopf.on.cleanup(registry=registry)
    async def cleanup(memo: Any, **_: Any) -> None:
        running: asyncio.Task[None] | None = getattr(memo, "running", None)
        if running is not None:
            running.cancel()
        controller: Controller | None = getattr(memo, "controller", None)
        if controller is not None:
            await controller.stop()
            elector: LeaderElector | None = getattr(memo, "elector", None)
            if elector is not None:  # only once our workers have stopped writing
                await elector.release()
            await controller.api.close()

    @kopf.on.probe(id="queue", registry=registry)
    def queue_depth(memo: Any, **_: Any) -> int:
        controller: Controller | None = getattr(memo, "controller", None)
        return len(controller.queue) if controller else -1

    return registry


async def _list_until_answered(controller: Controller, retry: float = 2.0) -> Listing:
    """The start-up listing, tried again every ``retry`` seconds while the API server is away."""
    while True:
        try:
            return await controller.listing()
        except ApiError as exc:
            log.warning(
                "listing what exists failed; trying again",
                error=str(exc),
                retry_seconds=retry,
            )
            await asyncio.sleep(retry)


def _stop_on_failure(task: asyncio.Task[None], stop: asyncio.Event) -> None:
    """A controller that can no longer start or lead exits (and is restarted), never idles."""
    if task.cancelled() or task.exception() is None:
        return
    log.error("the controller failed to start; stopping", error=repr(task.exception()))
    stop.set()


async def _elect(
    elector: LeaderElector, lead: Callable[[], Awaitable[None]], stop: asyncio.Event
) -> None:
    try:
        await elector.run(lead, stop)
    except LeadershipLostError as exc:
        log.exception("lost leadership; stopping", error=str(exc))
        stop.set()


def _placed(settings: Settings) -> Settings:
    """``settings`` with the Lease and the cluster-scope holds placed in a namespace (the
    kubeconfig context's when none is given), refused when the holds' would not be watched."""
    if not settings.work_hold_namespace:
        hold_ns = settings.election_namespace or default_namespace()
        settings = replace(settings, work_hold_namespace=hold_ns)
    watched = not settings.namespaces or settings.work_hold_namespace in settings.namespaces
    if settings.work_scope is WorkScope.CLUSTER and not watched:
        raise PreflightError(
            f"--work-scope=cluster keeps work holds in namespace "
            f"{settings.work_hold_namespace!r}, which this controller does not watch "
            f"(--namespace {' '.join(settings.namespaces)}): add --namespace "
            f"{settings.work_hold_namespace}, or choose another --work-hold-namespace",
            Exit.USAGE,
        )
    if settings.leader_election and not settings.election_namespace:
        settings = replace(settings, election_namespace=default_namespace())
    return settings


def run(settings: Settings) -> Exit:
    """Check what the controller needs (raising ``PreflightError``), then run until stopped."""
    logs.configure(settings.log_level)
    check_liveness_port(settings.liveness)
    settings = _placed(settings)
    if settings.metrics_port:
        check_port(settings.metrics_port, "", "metrics server", "--metrics-port=PORT")
    api = load_client()
    server = check_cluster(api, wait=settings.api_wait)
    if settings.metrics_port:
        try:
            start_http_server(settings.metrics_port)
        except OSError as exc:  # taken between the check and now
            raise port_in_use(
                settings.metrics_port, "metrics server", "--metrics-port=PORT", exc
            ) from exc
    log.info(
        "starting",
        kubernetes=server.git_version,
        mode="leader election" if settings.leader_election else "standalone",
        work_scope=str(settings.work_scope),
        work_holds=settings.work_hold_namespace
        if settings.work_scope is WorkScope.CLUSTER
        else "in each agent's namespace",
        lease=f"{settings.election_namespace}/{settings.election_name}"
        if settings.leader_election
        else None,
    )

    # The controller keeps every object it watches; a collection every 700 allocations (the
    # default) walks that growing heap again and again while a start-up lists thousands of them.
    gc.set_threshold(GC_THRESHOLD, *gc.get_threshold()[1:])
    # What is loaded by now (modules, classes, functions) lives as long as the process: out of
    # the collector's generations, so that no collection walks it again.
    gc.freeze()

    async def main() -> Exit:
        stop = asyncio.Event()
        await kopf.operator(
            registry=build_registry(settings, stop),
            memo=kopf.Memo(),
            clusterwide=not settings.namespaces,
            namespaces=settings.namespaces,
            standalone=True,  # one active replica is decided by our own Lease, not kopf peering
            liveness_endpoint=settings.liveness or None,
            stop_flag=stop,
        )
        # Stopped by us: leadership lost, or the controller could not start.
        return Exit.FAILURE if stop.is_set() else Exit.OK

    return asyncio.run(main())
