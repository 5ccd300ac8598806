"""Short builders for the domain objects the resolution tests feed into a registry."""

from __future__ import annotations

from collections.abc import Iterable

from controller.domain.grants import ResourceGrantObject
from controller.domain.models import (
    AgentObject,
    AgentSpecSpec,
    DirectBinding,
    LabelSelector,
    ObjectMeta,
    ResourceObject,
    ResourceSlot,
    ResourceSpec,
    ResourceTypeObject,
    ResourceTypeSpec,
    SlotBinding,
    ToolObject,
    ToolSpec,
    ToolUse,
)
from controller.domain.registry import Affected, Registry

Object = ResourceTypeObject | ResourceObject | ToolObject | AgentObject | ResourceGrantObject


def _meta(key: str, **fields: object) -> ObjectMeta:
    namespace, _, name = key.rpartition("/")
    return ObjectMeta.model_validate({"name": name, "namespace": namespace, **fields})


def rtype(name: str, *parents: str, schemes: Iterable[str] = ()) -> ResourceTypeObject:
    spec = ResourceTypeSpec(parent_types=list(parents), uri_schemes=list(schemes))
    return ResourceTypeObject(meta=_meta(name), spec=spec)


def resource(
    key: str,
    type_name: str,
    uri: str,
    *,
    alias: str | None = None,
    labels: dict[str, str] | None = None,
    uid: str | None = None,
    attributes: dict[str, str] | None = None,
) -> ResourceObject:
    """A Resource ``namespace/name``; its uid defaults to ``uid-<namespace>-<name>``."""
    meta = _meta(
        key, labels=labels or {}, uid=uid if uid is not None else "uid-" + key.replace("/", "-")
    )
    spec = ResourceSpec(type=type_name, uri=uri, alias=alias, attributes=attributes or {})
    return ResourceObject(meta=meta, spec=spec)


def slot(
    name: str,
    type_name: str,
    binding: SlotBinding = "contextual",
    *,
    static: str | None = None,
    required: bool = True,
) -> ResourceSlot:
    return ResourceSlot(
        name=name,
        resource_type=type_name,
        binding=binding,
        static_resource=static,
        required=required,
    )


def tool(key: str, *slots: ResourceSlot) -> ToolObject:
    return ToolObject(meta=_meta(key), spec=ToolSpec(resource_slots=list(slots)))


def use(name: str, **params: str) -> ToolUse:
    return ToolUse(name=name, params=params)


def agent(
    key: str,
    *,
    bindings: Iterable[tuple[str, str, str]] = (),
    tools: Iterable[ToolUse | str] = (),
    selector: LabelSelector | None = None,
    generation: int = 1,
) -> AgentObject:
    """An agent; ``bindings`` are ``(name, tag, uri)``; ``tools`` are names or :func:`use`."""
    spec = AgentSpecSpec(
        resources=[DirectBinding(name=n, tag=t, uri=u) for n, t, u in bindings],
        tools=[t if isinstance(t, ToolUse) else ToolUse(name=t) for t in tools],
        resource_selector=selector,
    )
    return AgentObject(meta=_meta(key, generation=generation), spec=spec)


def upsert(registry: Registry, obj: Object) -> Affected:
    match obj:
        case ResourceTypeObject():
            return registry.upsert_type(obj)
        case ResourceObject():
            return registry.upsert_resource(obj)
        case ToolObject():
            return registry.upsert_tool(obj)
        case AgentObject():
            return registry.upsert_agent(obj)
        case ResourceGrantObject():
            return registry.upsert_grant(obj)


def registry_of(*objects: Object) -> Registry:
    registry = Registry()
    for obj in objects:
        upsert(registry, obj)
    return registry
