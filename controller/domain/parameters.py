"""A parameter slot given a value: what the value names, by the first lookup rule that finds
anything, and the slot bound to it.

An agent names resources in its own namespace: a Resource (by name, namespace/name, uid or URI)
or one of its direct bindings (by URI). A Resource of another namespace (by namespace/name or
uid) only when a ResourceGrant there admits the agent's namespace for parameter values; without
one, a namespace/name is refused naming the grant that would allow it, and a uid names nothing
(as if it did not exist: no existence oracle).
"""

from __future__ import annotations

from collections.abc import Sequence

from controller.domain.crossing import granted, refused
from controller.domain.grants import GrantUse
from controller.domain.linked import Linked, registered
from controller.domain.registry_view import RegistryView
from controller.domain.results import ErrorCause, SlotResult
from controller.domain.slots import SlotCall


def parameter_slot(
    call: SlotCall,
    value: str,
    namespace: str,
    view: RegistryView,
    direct_linked: Sequence[Linked],
) -> SlotResult:
    """The slot of ``call``, in an agent of ``namespace``, bound to what ``value`` names (one of
    the Resources of ``view`` or, by URI, of the agent's ``direct_linked`` bindings)."""
    elsewhere, _, _ = value.rpartition("/")
    reach = call.context.reach
    if elsewhere and "/" not in elsewhere and ":" not in value and elsewhere != namespace:
        resource = view.resource(value)
        grant = granted(view, namespace, value, resource, use=GrantUse.PARAMETER, reach=reach)
        if grant is None:  # refused before saying whether it exists: no existence oracle
            why, fix = refused(namespace, value, GrantUse.PARAMETER)
            # Missing, not a conflict: the owner's grant, applied later, admits it as it stands.
            return call.error(
                f"its parameter value names another namespace's Resource: {why}",
                f"{fix}; or register the resource in namespace {namespace!r}",
                cause=ErrorCause.MISSING,
            )
        if resource is None:
            return call.error(
                f"its parameter value {value!r} names Resource {value}, which does not exist",
                "create that Resource, or set the parameter to an existing one",
                cause=ErrorCause.MISSING,
            )
        linked = registered(resource, view.types, grant)
        return call.bind(linked, f"its parameter value {value!r} (by namespace/name)", _fix(call))
    found, how = _lookup(value, namespace, view, direct_linked, reach)
    if not found:
        return call.error(
            f"its parameter value {value!r} names no resource: it is not the name of a "
            f"Resource in namespace {namespace!r}, a namespace/name, a uid, or the URI "
            "of a Resource in the namespace or of a direct binding",
            "set the parameter to one of those",
            cause=ErrorCause.MISSING,
        )
    if len(found) > 1:
        return call.error(
            f"its parameter value {value!r} is the URI of {len(found)} resources",
            "keep one Resource per URI, or name the Resource by namespace/name",
            [item.candidate(f"another resource also has URI {value!r}") for item in found],
        )
    return call.bind(found[0], f"its parameter value {value!r} (by {how})", _fix(call))


def _fix(call: SlotCall) -> str:
    return (
        f"set the parameter to a resource of type {call.slot.resource_type!r} "
        "(or a subtype), or change the slot's resourceType"
    )


def _lookup(
    value: str,
    namespace: str,
    view: RegistryView,
    direct_linked: Sequence[Linked],
    reach: set[str],
) -> tuple[list[Linked], str]:
    """What a parameter value names, by the first rule that finds anything.

    Rules in order: a Resource name in the agent's namespace, ``namespace/name``, a uid (of
    another namespace's Resource only with a grant), then a URI among the namespace's Resources
    and, failing those, the agent's direct bindings.
    """
    types = view.types
    by_name = view.resource(f"{namespace}/{value}")
    if by_name is not None:
        return [registered(by_name, types)], "name"
    by_key = view.resource(value)
    if by_key is not None and by_key.meta.namespace == namespace:
        return [registered(by_key, types)], "namespace/name"
    by_uid = view.resource_by_uid(value)
    if by_uid is not None and by_uid.meta.namespace == namespace:
        return [registered(by_uid, types)], "uid"
    if by_uid is not None:  # another's: only by its grant, else as if it did not exist
        grant = granted(
            view, namespace, by_uid.meta.key, by_uid, use=GrantUse.PARAMETER, reach=reach
        )
        if grant is not None:
            return [registered(by_uid, types, grant)], "uid"
    by_uri = [registered(r, types) for r in view.resources_with_uri(namespace, value)]
    return by_uri or [item for item in direct_linked if item.resource.uri == value], "URI"
