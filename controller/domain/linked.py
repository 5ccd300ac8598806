"""Linked resources: what an agent's slots can be bound to.

An agent links resources two ways: its direct bindings (``spec.resources``), each merged with the
registered Resource of its URI when there is one, and the Resources its ``resourceSelector``
selects. This module makes both into :class:`Linked` resources, the form a slot is matched
against, and gives each direct binding its result.

Results are built with :meth:`ResultModel.trusted <controller.domain.results.ResultModel.trusted>`
(no validation): every value put in them comes from validated objects or is made here.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from operator import attrgetter
from typing import NamedTuple

from bindery_session.wire import BindingState

from controller.domain.crossing import granted
from controller.domain.grants import GrantUse
from controller.domain.messages import message, type_fix
from controller.domain.models import AgentObject, DirectBinding, ResourceObject
from controller.domain.registry_view import RegistryView
from controller.domain.resource_validity import scheme_problem
from controller.domain.results import (
    BoundResource,
    Candidate,
    DirectResult,
    ErrorCause,
)
from controller.domain.types import TypeGraph


def bound_resource(
    resource: ResourceObject, alias: str | None = None, grant: str = ""
) -> BoundResource:
    """A registered Resource as bindings report it, with its own alias unless given another, and
    the grant that lets it be bound when it is another namespace's."""
    meta, spec = resource.meta, resource.spec
    return BoundResource.trusted(
        {
            "uri": spec.uri,
            "type": spec.type,
            "alias": (spec.alias or "") if alias is None else alias,
            "name": meta.name,
            "namespace": meta.namespace,
            "uid": meta.uid,
            "attributes": dict(spec.attributes),
            "grant": grant,
        }
    )


@dataclass(slots=True)
class Linked:
    """A resource a slot may be bound to, with the names a slot name is matched against.

    Internal to one agent's resolution, and never changed after creation but for its cache of
    candidates (not frozen because frozen dataclasses are several times slower to create, and
    resolution creates many).
    """

    resource: BoundResource
    names: tuple[tuple[str, str], ...]
    """``(what, value)`` pairs, e.g. ``("alias", "repo")``, in the order they are tried."""
    stands_for: frozenset[str]
    """The slot types it can fill (see :meth:`TypeGraph.stands_for`); empty when in error."""
    problem: str = ""
    """Why it can fill no slot at all (its direct binding is in error); empty if it can."""
    candidates: dict[str, Candidate] = field(default_factory=dict)
    """The candidates made of it so far, by reason: an agent's slots often give it the same one
    (results are frozen, so they can share it)."""
    members: tuple[Linked, ...] = ()
    """When several direct bindings share one URI (one resource under several roles): those that
    are not in error, in spec order. Empty for a resource linked once."""

    def filling(self, wanted: str, slot_name: str = "") -> BoundResource:
        """The resource as bound to a slot asking for ``wanted``: for a URI bound under several
        roles, as the role named like the slot if its type fits, else the first that fits."""
        fitting = [m for m in self.members if wanted in m.stands_for]
        named = next((m for m in fitting if m.name_matching(slot_name)), None)
        if named is not None:
            return named.resource
        return fitting[0].resource if fitting else self.resource

    def types_read(self) -> Iterable[str]:
        """The types it was examined as (one per role for a URI bound under several)."""
        return (m.resource.type for m in self.members) if self.members else (self.resource.type,)

    def candidate(self, reason: str) -> Candidate:
        made = self.candidates.get(reason)
        if made is None:
            r = self.resource
            made = self.candidates[reason] = Candidate.trusted(
                {"uri": r.uri, "type": r.type, "alias": r.alias, "reason": reason}
            )
        return made

    def name_matching(self, slot_name: str) -> str:
        """Which of its names equals ``slot_name`` (e.g. ``"alias"``), or "" if none does."""
        return next((what for what, value in self.names if value == slot_name), "")

    def names_text(self) -> str:
        return " and ".join(f"{what} {value!r}" for what, value in self.names)


_LINKED_ORDER = attrgetter("resource.uri", "resource.alias", "resource.namespace", "resource.name")
"""How linked resources are ordered (and so candidates listed): by URI, then alias, then key."""


def registered(resource: ResourceObject, types: TypeGraph, grant: str = "") -> Linked:
    """A registered Resource as a slot sees it: matched by its alias, then its name (``grant``:
    the ResourceGrant that lets another namespace bind it)."""
    alias, name = resource.spec.alias, resource.meta.name
    names = (("alias", alias), ("name", name)) if alias else (("name", name),)
    bound = bound_resource(resource, grant=grant)
    return Linked(bound, names, types.stands_for(resource.spec.type))


def _one_per_uri(direct: Sequence[Linked]) -> list[Linked]:
    """An agent's direct bindings as linked resources, one per URI: a URI identifies one resource,
    so bindings sharing it (e.g. ``work`` and ``review``) are one candidate, matched by any of
    their names and able to fill a slot any of them can."""
    groups: dict[str, list[Linked]] = {}
    for item in direct:
        groups.setdefault(item.resource.uri, []).append(item)
    out: list[Linked] = []
    for group in groups.values():
        if len(group) == 1:
            out.append(group[0])
            continue
        fine = tuple(item for item in group if not item.problem)
        first = fine[0] if fine else group[0]
        names = tuple(dict.fromkeys(name for item in group for name in item.names))
        stands_for = frozenset().union(*(item.stands_for for item in fine))
        problem = ""
        if not fine:
            roles = " and ".join(repr(value) for item in group for _, value in item.names[:1])
            problem = f"its direct bindings {roles} are in error"
        out.append(Linked(first.resource, names, stands_for, problem, members=fine))
    return out


def _as_tagged(binding: DirectBinding) -> BoundResource:
    """A direct binding on its own: its URI, with its tag as type and its name as alias."""
    return BoundResource.trusted(
        {
            "uri": binding.uri,
            "type": binding.tag,
            "alias": binding.name,
            "name": "",
            "namespace": "",
            "uid": "",
            "attributes": {},
            "grant": "",
        }
    )


class _Merged(NamedTuple):
    """A direct binding merged with the registered Resource of its URI (or standing alone)."""

    resource: BoundResource
    names: tuple[tuple[str, str], ...]
    """The binding name, then the registered Resource's alias and name: a Resource keeps its
    names when an agent also binds it directly."""


class LinkedResources(NamedTuple):
    """What one agent links, and what its direct bindings resolved to."""

    direct: list[DirectResult]
    """Each direct binding's result, in spec order."""
    direct_linked: list[Linked]
    """The direct bindings as linked resources, one per URI."""
    linked: list[Linked]
    """Those and the Resources its selector selects (but for the URIs it binds directly), in
    candidate order."""


def link_resources(
    agent: AgentObject, view: RegistryView, pairs: set[tuple[str, str]], reach: set[str]
) -> LinkedResources:
    """The agent's direct bindings and selected Resources as linked resources; the type checks
    made on the way (a registered Resource against a binding's tag) are added to ``pairs``, and
    the other namespaces its selector reaches into to ``reach``.

    A Resource selected in another namespace (``resourceSelector.namespaces``) is linked only
    when a ResourceGrant there admits the agent's namespace for selectors; the others are left
    out, as if the selector did not select them."""
    key, namespace, types = agent.meta.key, agent.meta.namespace, view.types
    direct = [_direct(binding, key, namespace, view, pairs) for binding in agent.spec.resources]
    direct_linked = _one_per_uri([linked for _, linked in direct])
    direct_uris = {binding.uri for binding in agent.spec.resources}
    selector = agent.spec.resource_selector
    if selector is not None:
        reach.update(other for other in selector.namespaces if other != namespace)
    selected = []
    for r in view.selected_resources(key):
        if r.spec.uri in direct_uris:
            continue
        if r.meta.namespace == namespace:
            selected.append(registered(r, types))
        elif grant := granted(view, namespace, r.meta.key, r, use=GrantUse.SELECTOR, reach=reach):
            selected.append(registered(r, types, grant))
    linked = sorted(direct_linked + selected, key=_LINKED_ORDER)
    return LinkedResources([result for result, _ in direct], direct_linked, linked)


def _direct(
    binding: DirectBinding,
    agent_key: str,
    namespace: str,
    view: RegistryView,
    pairs: set[tuple[str, str]],
) -> tuple[DirectResult, Linked]:
    names = (("binding name", binding.name),)
    outcome = _merge(binding, namespace, view, pairs)
    name, tag, uri = binding.name, binding.tag, binding.uri
    if isinstance(outcome, _Merged):
        bound = outcome.resource
        result = DirectResult.trusted(
            {
                "name": name,
                "tag": tag,
                "uri": uri,
                "state": BindingState.BOUND,
                "resource": bound,
                "message": "",
                "cause": None,
            }
        )
        return result, Linked(bound, outcome.names, view.types.stands_for(bound.type))
    subject = f"agent {agent_key}, direct binding {binding.name!r}"
    problem, fix, cause = outcome
    said = message(subject, problem, fix)
    result = DirectResult.trusted(
        {
            "name": name,
            "tag": tag,
            "uri": uri,
            "state": BindingState.ERROR,
            "resource": None,
            "message": said,
            "cause": cause,
        }
    )
    problem = f"its direct binding {binding.name!r} is in error"
    return result, Linked(_as_tagged(binding), names, frozenset(), problem)


def _merge(
    binding: DirectBinding, namespace: str, view: RegistryView, pairs: set[tuple[str, str]]
) -> _Merged | tuple[str, str, ErrorCause]:
    """The resource a direct binding stands for: the registered Resource with its URI (whose
    more precise type then stands, as it must be compatible with the tag), or else the URI
    with the tag as its type.

    Returns what is wrong with the binding, how to fix it and what clears it instead, when it
    cannot be bound.
    """
    types = view.types
    tag_type = types.get(binding.tag)
    if tag_type is None:
        return (
            f"its tag {binding.tag!r} is not a registered ResourceType",
            f"create a ResourceType named {binding.tag!r}, or change the tag",
            ErrorCause.MISSING,
        )
    wrong_scheme = scheme_problem(
        binding.uri, tag_type.spec.uri_schemes, f"its tag, ResourceType {binding.tag!r},"
    )
    if wrong_scheme:
        return (
            wrong_scheme,
            "use a URI with one of those schemes, or change the tag to a type that accepts it",
            ErrorCause.CONFLICT,
        )
    own_name = (("binding name", binding.name),)
    found = view.resources_with_uri(namespace, binding.uri)
    if not found:
        return _Merged(_as_tagged(binding), own_name)
    if len(found) > 1:
        keys = ", ".join(r.meta.key for r in found)
        return (
            f"its URI {binding.uri!r} is registered by {len(found)} Resources ({keys}), "
            "so which one it is is ambiguous",
            "delete all but one of those Resources",
            ErrorCause.CONFLICT,
        )
    resource = found[0]
    pairs.add((resource.spec.type, binding.tag))
    if binding.tag not in types.stands_for(resource.spec.type):
        reason = types.incompatibility(resource.spec.type, binding.tag)
        return (
            f"its URI {binding.uri!r} is Resource {resource.meta.key}, and its {reason}",
            type_fix(types, [resource.spec.type], "change the tag or the Resource's type"),
            ErrorCause.MISSING if resource.spec.type not in types else ErrorCause.CONFLICT,
        )
    alias, name = resource.spec.alias, resource.meta.name
    kept = (("alias", alias), ("name", name)) if alias else (("name", name),)
    names = own_name + tuple(pair for pair in kept if pair[1] != binding.name)
    return _Merged(bound_resource(resource, alias=binding.name), names)
