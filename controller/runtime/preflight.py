"""Checks ``bindery run`` makes before it starts: each failure is one line and its own exit code.

Without them a missing kubeconfig, an API server that is down, CRDs that were never applied or a
port another process holds show up as kopf retrying every minute with a traceback, or as a
traceback from the metrics server. Each check here says what is wrong, where, and what to do,
and ``bindery run`` exits with its code (:class:`controller.runtime.exits.Exit`), so scripts
and supervisors can tell them apart.
"""

from __future__ import annotations

import asyncio
import errno
import os
import socket
import time
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlsplit

import structlog
from kubernetes import client, config

from controller.domain.errors import RunError
from controller.domain.models import GROUP, VERSION
from controller.domain.versions import ServerVersion, support_note
from controller.k8s.api import (
    ApiError,
    ImpersonatingClient,
    KubeApi,
    kubeconfig_path,
    load_api_client,
)
from controller.runtime.exits import Exit

log = structlog.get_logger("bindery.preflight")

PLURALS = ("resourcetypes", "resources", "tools", "agentspecs", "resourcegrants")
SERVICE_ACCOUNT_NAMESPACE = Path("/var/run/secrets/kubernetes.io/serviceaccount/namespace")


@dataclass
class PreflightError(RunError):
    """A start-up check failed: ``message`` is the one line to print, ``code`` the exit code."""

    message: str
    code: int
    transient: bool = False
    """The API server gave no answer (or said it is not ready): it may be back in a moment."""

    def __str__(self) -> str:
        return self.message


def load_client() -> ImpersonatingClient:
    """In-cluster configuration in a pod, else the kubeconfig (with its user's impersonation:
    ``as``, ``as-groups``); a clear error when neither."""
    try:
        return load_api_client()
    except (config.ConfigException, OSError) as exc:
        where = kubeconfig_path()
        detail = " ".join(str(exc).split())
        raise PreflightError(
            f"no kubeconfig: not in a pod, and {where} (from "
            f"{'$KUBECONFIG' if 'KUBECONFIG' in os.environ else 'the default path'}) "
            f"gives no cluster ({detail}); set KUBECONFIG to a kubeconfig file (in a source "
            "checkout, 'make cluster' starts a local control plane)",
            Exit.NO_KUBECONFIG,
        ) from exc


def default_namespace() -> str:
    """The namespace to hold the leader Lease in when none is given: the pod's own namespace,
    else the kubeconfig context's namespace, else ``default``."""
    if pod_namespace := os.environ.get("POD_NAMESPACE"):
        return pod_namespace
    try:
        return SERVICE_ACCOUNT_NAMESPACE.read_text().strip() or "default"
    except OSError:
        pass
    try:
        _, active = config.list_kube_config_contexts()
    except (config.ConfigException, OSError):
        return "default"
    return str((active or {}).get("context", {}).get("namespace") or "default")


async def _ready(kube: KubeApi) -> bool:
    """The API server says it is ready (``/readyz``: every post-start hook done, the CRDs read
    back from etcd among them)."""
    try:
        await kube.request("GET", "/readyz", accept="*/*")
    except ApiError:
        return False
    return True


async def unserved(kube: KubeApi) -> list[str]:
    """The Bindery kinds (plurals) the API server's discovery does not list now: all of them
    while a just-restarted API server has yet to read the CRDs back from etcd."""
    groups = await kube.request("GET", "/apis")
    served_versions = {
        str(v.get("version", ""))
        for g in groups.get("groups") or []
        if g.get("name") == GROUP
        for v in g.get("versions") or []
    }
    discovery = (
        await kube.request("GET", f"/apis/{GROUP}/{VERSION}") if VERSION in served_versions else {}
    )
    served = {str(r.get("name", "")) for r in discovery.get("resources") or []}
    return [p for p in PLURALS if p not in served]


async def _check_api(api: client.ApiClient) -> ServerVersion:
    server = api.configuration.host
    kube = KubeApi(api, connections=1)
    try:
        try:
            version = ServerVersion.of(await kube.request("GET", "/version"))
        except ApiError as exc:
            if exc.away:
                raise PreflightError(
                    f"the API server at {server} is unreachable ({exc.message}); check that it "
                    "runs and that the kubeconfig's current context points at it",
                    Exit.UNREACHABLE,
                    transient=True,
                ) from exc
            if exc.status in (401, 403):
                raise PreflightError(
                    f"the API server at {server} refused our credentials (HTTP {exc.status} "
                    f"{exc.reason}); check the kubeconfig's user or the pod's ServiceAccount",
                    Exit.UNREACHABLE,
                ) from exc
            raise
        missing = await unserved(kube)
        if missing and not await _ready(kube):
            # Just started: it serves discovery before it has read the CRDs back from etcd.
            raise PreflightError(
                f"the API server at {server} is not ready yet (its /readyz fails), so it does "
                "not serve Bindery's kinds yet; check its health if this lasts",
                Exit.UNREACHABLE,
                transient=True,
            )
        if missing:
            names = ", ".join(f"{p}.{GROUP}" for p in missing)
            raise PreflightError(
                f"the API server at {server} does not serve {GROUP}/{VERSION} {names}: the "
                "CRDs are not installed; apply them with 'kubectl apply --server-side -f crds/' "
                "(or the chart's crds/ directory)",
                Exit.NO_CRDS,
            )
        return version
    finally:
        await kube.close()


def check_cluster(api: client.ApiClient, *, wait: float = 0.0, retry: float = 2.0) -> ServerVersion:
    """The API server answers and serves the five Bindery kinds; its version is returned, and
    a minor outside the tested range is logged (a warning: the controller still runs).

    An API server that does not answer is asked again every ``retry`` seconds for up to ``wait``
    seconds (a controller restarted while the control plane restarts too should not exit, and be
    held back by its restart backoff); every other failure, and the last, is raised at once.
    """
    deadline = time.monotonic() + wait
    while True:
        try:
            version = asyncio.run(_check_api(api))
        except PreflightError as exc:
            left = deadline - time.monotonic()
            if not exc.transient or left <= 0:
                raise
            log.warning(
                "waiting for the API server",
                server=api.configuration.host,
                error=exc.message,
                seconds_left=round(left, 1),
            )
            time.sleep(min(retry, left))
            continue
        note = support_note(version)
        if note is not None:
            log.warning(note, server=api.configuration.host, kubernetes=version.git_version)
        return version


def check_port(port: int, host: str, what: str, flag: str) -> None:
    """Nothing listens on ``host:port`` yet (bound and released at once, as a server would)."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    with socket.socket(family, socket.SOCK_STREAM) as sock:
        # Like the servers that bind it next: a port in TIME_WAIT is free, a listening one not.
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind((host, port))
        except OSError as exc:
            if exc.errno != errno.EADDRINUSE:
                raise
            raise PreflightError(
                f"port {port} for the {what} is in use on {host or 'all interfaces'} (another "
                f"'bindery run'?); stop that process, or choose another port with {flag}",
                Exit.PORT_IN_USE,
            ) from exc


def check_liveness_port(url: str) -> None:
    """The port of kopf's liveness endpoint URL (``http://host:port/path``) is free."""
    if not url:
        return
    parts = urlsplit(url)
    if parts.port is None:
        return
    check_port(parts.port, parts.hostname or "", "liveness endpoint", "--liveness=URL")


def port_in_use(port: int, what: str, flag: str, exc: OSError) -> PreflightError:
    """The error for a server that failed to bind ``port`` after the check (a race)."""
    return PreflightError(
        f"port {port} for the {what} is in use ({exc.strerror}); stop the process that holds "
        f"it, or choose another port with {flag}",
        Exit.PORT_IN_USE,
    )
