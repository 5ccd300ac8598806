"""Where the adapter may listen, and whether it may resolve deferred slots.

* :func:`loopback_listen`: the adapter serves the pod's loopback only (127.0.0.1 or ::1).
* :func:`host_network`: whether the pod shares the node's network namespace. The pod passes its
  own IP and its node's through the downward API (``POD_IP`` from ``status.podIP``, ``HOST_IP``
  from ``status.hostIP``); a pod with ``hostNetwork: true`` has the node's IP as its own, and
  its loopback is the node's, where any process on the node could reach the adapter. The adapter
  refuses to start there. Without both variables (outside a pod) nothing is refused.
* :func:`session_resolver`: a resolver for ``bindery_resolve`` when the session's credentials
  may read what resolving reads (checked once, at start, with SelfSubjectAccessReviews), else
  None and the tool is not listed.
"""

from __future__ import annotations

import ipaddress
import os
from collections.abc import Mapping
from typing import Any

import structlog
from kubernetes import client

from controller.domain.errors import InvalidInputError
from controller.domain.models import GROUP
from controller.domain.results import BoundResource
from controller.mcp._session import (
    Bindings,
    KubeReader,
    ResolveError,
    SessionResolver,
    session_api_client,
)
from controller.mcp.adapter import Resolver

log = structlog.get_logger("bindery.mcp")

POD_IP_ENV = "POD_IP"
HOST_IP_ENV = "HOST_IP"


class AccessError(InvalidInputError):
    """The adapter must not serve here (an address off the loopback, the node's network)."""


def loopback_listen(listen: str) -> tuple[str, int]:
    """``HOST:PORT`` (``[::1]:PORT`` for IPv6) on a loopback address, as (host, port)."""
    host, sep, port_text = listen.rpartition(":")
    host = host.strip("[]")
    try:
        port = int(port_text)
        loopback = ipaddress.ip_address(host).is_loopback
    except ValueError:
        loopback, port = False, -1
    if not sep or not loopback or not 0 < port < 65536:
        raise AccessError(
            f"--listen {listen!r}: expected a loopback address and a port, e.g. "
            "127.0.0.1:7411; the adapter serves the pod's own containers only, never the network"
        )
    return host, port


def host_network(environ: Mapping[str, str] | None = None) -> bool:
    """Whether the pod runs in the node's network namespace (its IP is the node's)."""
    env = os.environ if environ is None else environ
    pod, node = env.get(POD_IP_ENV, ""), env.get(HOST_IP_ENV, "")
    return bool(pod) and pod == node


def refuse_host_network(environ: Mapping[str, str] | None = None) -> None:
    env = os.environ if environ is None else environ
    if host_network(env):
        raise AccessError(
            f"the pod shares the node's network (its IP {env.get(POD_IP_ENV)} is the node's: "
            "hostNetwork: true), so the node's every process could reach this adapter on "
            "127.0.0.1; refusing to start. Run the session without hostNetwork, or remove "
            "spec.runtime.mcp"
        )


RESOLVE_READS = (
    {"group": GROUP, "resource": "resources", "verb": "list", "namespaced": True},
    {"group": GROUP, "resource": "resourcetypes", "verb": "get", "namespaced": False},
)
"""What resolving a deferred slot reads (:mod:`controller.session.resolver`)."""


def may_resolve(api_client: client.ApiClient, namespace: str) -> list[str]:
    """What the session's credentials may not read of :data:`RESOLVE_READS` (empty: all)."""
    api = client.AuthorizationV1Api(api_client)
    denied = []
    for read in RESOLVE_READS:
        attributes: dict[str, Any] = {
            "group": read["group"],
            "resource": read["resource"],
            "verb": read["verb"],
        }
        if read["namespaced"]:
            attributes["namespace"] = namespace
        review = client.V1SelfSubjectAccessReview(
            spec=client.V1SelfSubjectAccessReviewSpec(
                resource_attributes=client.V1ResourceAttributes(**attributes)
            )
        )
        answer = api.create_self_subject_access_review(review)
        if not (answer.status and answer.status.allowed):
            where = f" in namespace {namespace}" if read["namespaced"] else ""
            denied.append(f"{read['verb']} {read['resource']}.{read['group']}{where}")
    return denied


def session_resolver(namespace: str, kubeconfig: str | None = None) -> Resolver | None:
    """A resolver over the session's credentials, if they may resolve; None (logged) if not."""
    try:
        api = session_api_client(kubeconfig)
    except ResolveError as exc:
        log.info("bindery_resolve not offered: no credentials", reason=str(exc))
        return None
    try:
        denied = may_resolve(api, namespace)
    except Exception as exc:  # the API unreachable or refusing the review: not offered
        log.info("bindery_resolve not offered: access not checked", reason=str(exc))
        return None
    if denied:
        log.info("bindery_resolve not offered: the session may not read", denied=denied)
        return None

    def resolve(bindings: Bindings, tool: str, slot: str, value: str) -> BoundResource:
        return SessionResolver(bindings, KubeReader(api)).resolve(tool, slot, value)

    return resolve
