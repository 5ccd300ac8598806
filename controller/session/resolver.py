"""Resolving a deferred ``parameter`` slot when the tool is invoked, from inside the session.

A parameter slot with no value in ``spec.tools[].params`` is delivered as ``Deferred``: the caller
supplies the value when it calls the tool. :class:`SessionResolver` resolves it with the session's
own credentials (its ServiceAccount token in a pod, or a kubeconfig), reading only what the
engine's parameter rule reads: the Resources in the agent's namespace and the ResourceTypes of the
type closures involved. It then runs the controller's own pure resolution
(:mod:`controller.domain`) over those objects, so a value is accepted or refused exactly as the
controller would, with the same messages.

A session reads only its own namespace: a ``namespace/name`` in another namespace is refused
(the controller resolves one when it is set in ``spec.tools[].params``).
"""

from __future__ import annotations

import json
import os
import re
from typing import Any, Protocol, cast

from bindery_session import BindingMode, Bindings, DeliveredSlot, load_bindings
from bindery_session.wire import BindingState
from kubernetes import client, config
from kubernetes.client.exceptions import ApiException

from controller.domain.errors import InvalidInputError
from controller.domain.models import (
    GROUP,
    VERSION,
    AgentObject,
    AgentSpecSpec,
    DirectBinding,
    ObjectMeta,
    ResourceObject,
    ResourceSlot,
    ResourceSpec,
    ResourceTypeObject,
    ResourceTypeSpec,
    ToolObject,
    ToolSpec,
    ToolUse,
    meta_from_body,
)
from controller.domain.registry import Registry
from controller.domain.results import BoundResource

_NAMESPACED = re.compile(r"([a-z0-9](?:[-a-z0-9]*[a-z0-9])?)/([a-z0-9](?:[-a-z0-9.]*[a-z0-9])?)")
"""``namespace/name`` (a URI has a scheme and a colon, so it never matches)."""

RBAC_HINT = (
    "bind the chart's session-resolver ClusterRole to the session's ServiceAccount with a "
    "RoleBinding in this namespace (docs/session.md)"
)


class ResolveError(InvalidInputError):
    """The value cannot fill the slot; the message says why and what to do."""


class ResourceReader(Protocol):
    """The two reads resolution needs (plain API objects)."""

    def list_resources(self, namespace: str) -> list[dict[str, Any]]: ...

    def get_resource_type(self, name: str) -> dict[str, Any] | None: ...


class KubeReader:
    """:class:`ResourceReader` over the Kubernetes client (as the session's identity)."""

    def __init__(self, api_client: client.ApiClient) -> None:
        self._api = client.CustomObjectsApi(api_client)

    def list_resources(self, namespace: str) -> list[dict[str, Any]]:
        items: list[dict[str, Any]] = []
        token = ""
        while True:
            try:
                page = cast(
                    "dict[str, Any]",
                    self._api.list_namespaced_custom_object(
                        GROUP, VERSION, namespace, "resources", limit=500, _continue=token or None
                    ),
                )
            except ApiException as exc:
                raise _api_error(exc, f"list resources.{GROUP} in namespace {namespace!r}") from exc
            items += page.get("items") or []
            token = (page.get("metadata") or {}).get("continue") or ""
            if not token:
                return items

    def get_resource_type(self, name: str) -> dict[str, Any] | None:
        try:
            body = cast(
                "dict[str, Any]",
                self._api.get_cluster_custom_object(GROUP, VERSION, "resourcetypes", name),
            )
        except ApiException as exc:
            if exc.status == 404:
                return None
            raise _api_error(exc, f"get resourcetypes.{GROUP} {name!r}") from exc
        return body


def _api_error(exc: ApiException, what: str) -> ResolveError:
    if exc.status in (401, 403):
        return ResolveError(
            f"the API server refused to {what} (HTTP {exc.status}) for the session's "
            f"credentials: {RBAC_HINT}"
        )
    return ResolveError(f"could not {what}: HTTP {exc.status} {exc.reason}; retry later")


def session_api_client(kubeconfig: str | os.PathLike[str] | None = None) -> client.ApiClient:
    """The session's own credentials: ``kubeconfig`` if given, else the pod's ServiceAccount
    (in a cluster), else ``$KUBECONFIG`` or ``~/.kube/config``."""
    cfg = client.Configuration()
    try:
        if kubeconfig is None:
            try:
                config.load_incluster_config(client_configuration=cfg)
            except config.ConfigException:
                config.load_kube_config(client_configuration=cfg)
        else:
            config.load_kube_config(config_file=str(kubeconfig), client_configuration=cfg)
    except (config.ConfigException, OSError) as exc:
        raise ResolveError(
            f"no credentials for the API server: not in a pod with a ServiceAccount token, and "
            f"no usable kubeconfig ({exc}); run in the session's pod, or pass --kubeconfig"
        ) from exc
    return client.ApiClient(cfg)


def resource_json(resource: BoundResource) -> str:
    """A bound resource as the bindings document shows one (camelCase, defaults left out)."""
    data = resource.model_dump(mode="json", by_alias=True, exclude_defaults=True)
    return json.dumps(data, indent=2, sort_keys=True, ensure_ascii=False)


def _resource(body: dict[str, Any]) -> ResourceObject | None:
    try:
        return ResourceObject(
            meta=meta_from_body(body), spec=ResourceSpec.model_validate(body.get("spec") or {})
        )
    except ValueError:
        return None  # the controller reports it on its status and resolves nothing to it


def _resource_type(body: dict[str, Any]) -> ResourceTypeObject | None:
    try:
        spec = ResourceTypeSpec.model_validate(body.get("spec") or {})
    except ValueError:
        return None
    return ResourceTypeObject(meta=meta_from_body(body), spec=spec)


class SessionResolver:
    """Resolves values for the deferred parameter slots of one agent's bindings."""

    def __init__(self, bindings: Bindings, reader: ResourceReader) -> None:
        self.bindings = bindings
        self.reader = reader

    @property
    def agent_key(self) -> str:
        return self.bindings.agent.key

    def _slot(self, tool: str, slot: str) -> DeliveredSlot:
        who = f"agent {self.agent_key}"
        delivered_tool = self.bindings.tool(tool)
        if delivered_tool is None:
            names = ", ".join(repr(t.name) for t in self.bindings.tools) or "none"
            raise ResolveError(
                f"{who}: tool {tool!r} is not in its bindings (tools: {names}). Fix: name the "
                "tool in the AgentSpec's spec.tools, and check that the Tool exists in namespace "
                f"{self.bindings.agent.namespace!r}."
            )
        found = delivered_tool.slot(slot)
        if found is None:
            names = ", ".join(repr(s.name) for s in delivered_tool.slots) or "none"
            raise ResolveError(
                f"{who}, tool {tool!r}: it has no slot {slot!r} (slots: {names}). Fix: use one "
                "of those slot names."
            )
        subject = f"{who}, tool {tool!r}, slot {slot!r}"
        if found.mode is not BindingMode.PARAMETER:
            raise ResolveError(
                f"{subject}: it is a {found.mode.value} slot, which the controller binds; only a "
                "parameter slot takes a value at invocation. Fix: use the resource the bindings "
                "document gives the slot."
            )
        if not found.deferred:
            raise ResolveError(
                f"{subject}: its value is set in spec.tools[].params (state {found.state.value}), "
                "so it is not deferred. Fix: use the resource the bindings document gives the "
                "slot, or remove the value from spec.tools[].params to choose it at invocation."
            )
        return found

    def resolve(self, tool: str, slot: str, value: str) -> BoundResource:
        """The resource ``value`` names for the deferred parameter slot ``slot`` of ``tool``.

        ``value`` is a Resource's name, ``namespace/name`` (the agent's namespace only), uid, or
        URI, as for a value in ``spec.tools[].params``. Raises :class:`ResolveError`.
        """
        delivered = self._slot(tool, slot)
        namespace = self.bindings.agent.namespace
        other = _NAMESPACED.fullmatch(value)
        if other is not None and other.group(1) != namespace:
            raise ResolveError(
                f"agent {self.agent_key}, tool {tool!r}, slot {slot!r}: its parameter value "
                f"{value!r} names a Resource in namespace {other.group(1)!r}, and a session "
                f"resolves only Resources in its own namespace {namespace!r}. Fix: pass the name, "
                f"uid or URI of a Resource in namespace {namespace!r}, or set the value in "
                "spec.tools[].params for the controller to resolve."
            )
        resources = [
            r for r in map(_resource, self.reader.list_resources(namespace)) if r is not None
        ]
        registry = Registry()
        for obj in self._types_for(delivered, value, resources):
            registry.upsert_type(obj)
        for resource in resources:
            registry.upsert_resource(resource)
        agent, tool_obj = self._agent(tool, delivered, value)
        registry.upsert_tool(tool_obj)
        registry.upsert_agent(agent)
        (result,) = registry.resolve(agent.meta.key).slots
        if result.state is BindingState.BOUND and result.resource is not None:
            return result.resource
        raise ResolveError(result.message)

    def _agent(
        self, tool: str, delivered: DeliveredSlot, value: str
    ) -> tuple[AgentObject, ToolObject]:
        """The agent as far as this slot's resolution reads it: its delivered direct bindings,
        and the tool with this one slot, given ``value``."""
        ref = self.bindings.agent
        agent = AgentObject(
            meta=ObjectMeta(name=ref.name, namespace=ref.namespace),
            spec=AgentSpecSpec(
                resources=[
                    DirectBinding(name=b.name, tag=b.tag, uri=b.uri)
                    for b in self.bindings.resources
                ],
                tools=[ToolUse(name=tool, params={delivered.name: value})],
            ),
        )
        slot = ResourceSlot(
            name=delivered.name,
            resource_type=delivered.resource_type,
            access=delivered.access.value,
            binding="parameter",
        )
        tool_obj = ToolObject(
            meta=ObjectMeta(name=tool, namespace=ref.namespace),
            spec=ToolSpec(resource_slots=[slot]),
        )
        return agent, tool_obj

    def _types_for(
        self, delivered: DeliveredSlot, value: str, resources: list[ResourceObject]
    ) -> list[ResourceTypeObject]:
        """The ResourceTypes resolution reads: those of the slot, of the direct bindings' tags,
        of every Resource ``value`` may name or a direct binding's URI is, and all they reach
        through ``parentTypes`` (fetched one by one: usually a handful)."""
        namespace = self.bindings.agent.namespace
        uris = {b.uri for b in self.bindings.resources} | {value}
        wanted = {delivered.resource_type} | {b.tag for b in self.bindings.resources}
        wanted |= {
            r.spec.type
            for r in resources
            if value in (r.meta.name, f"{namespace}/{r.meta.name}", r.meta.uid)
            or r.spec.uri in uris
        }
        fetched: dict[str, ResourceTypeObject | None] = {}
        queue = sorted(wanted)
        while queue:
            name = queue.pop()
            if name in fetched:
                continue
            body = self.reader.get_resource_type(name)
            obj = fetched[name] = None if body is None else _resource_type(body)
            if obj is not None:
                queue += [p for p in obj.spec.parent_types if p not in fetched]
        return [obj for obj in fetched.values() if obj is not None]


def resolve(
    tool: str,
    slot: str,
    value: str,
    *,
    bindings: Bindings | None = None,
    api_client: client.ApiClient | None = None,
    kubeconfig: str | os.PathLike[str] | None = None,
) -> BoundResource:
    """Resolve ``value`` for a deferred parameter slot with the session's credentials.

    ``bindings`` defaults to the delivered document (:func:`load_bindings`), ``api_client`` to
    :func:`session_api_client` (with ``kubeconfig``). Raises :class:`ResolveError` (or
    ``BindingsError``).
    """
    bindings = bindings if bindings is not None else load_bindings()
    own_client = api_client is None
    api = session_api_client(kubeconfig) if api_client is None else api_client
    try:
        return SessionResolver(bindings, KubeReader(api)).resolve(tool, slot, value)
    finally:
        if own_client:
            api.close()
