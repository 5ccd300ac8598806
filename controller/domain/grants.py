"""Cross-namespace use of a Resource, by its owner's grant (issue 28's first step).

A ResourceGrant lives in the namespace of the Resources it shares, so only someone who may write
there can make one: the owner grants, the referrer cannot (Gateway API's ReferenceGrant). It says
which namespaces (by name or label selector) may bind which of its Resources (by name or label
selector), and how (a Tool's static slot, a parameter value, an agent's resource selector).

This module is the pure decision: given the grants of the target namespace, may a referrer in one
namespace use one Resource in one way, and if not, which grant would allow it. Nothing here reads
the API; the registry and the resolver call it with what they hold.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from controller.domain.label_selectors import matches
from controller.domain.models import LabelSelector, ObjectMeta, WireModel, meta_from_body


class GrantUse(StrEnum):
    """How a referrer may bind a granted Resource."""

    STATIC = "static"
    """A Tool's ``staticResource: namespace/name``."""
    PARAMETER = "parameter"
    """An agent's ``spec.tools[].params`` value naming it (``namespace/name``, uid or URI)."""
    SELECTOR = "selector"
    """An agent's ``resourceSelector`` reaching into the namespace."""


class GrantFrom(WireModel):
    """Namespaces a grant admits: by name, or by a label selector on the Namespace object."""

    namespace: str = ""
    namespace_selector: LabelSelector | None = None

    def admits(self, namespace: str, labels: Mapping[str, str]) -> bool:
        if self.namespace:
            return self.namespace == namespace
        return self.namespace_selector is not None and matches(self.namespace_selector, labels)


class GrantTo(WireModel):
    """Resources of the grant's namespace it shares: by name, or by a label selector."""

    name: str = ""
    selector: LabelSelector | None = None

    def covers(self, name: str, labels: Mapping[str, str]) -> bool:
        if self.name:
            return self.name == name
        return self.selector is not None and matches(self.selector, labels)


class ResourceGrantSpec(WireModel):
    from_: list[GrantFrom] = Field(alias="from")
    to: list[GrantTo]
    uses: list[GrantUse] = Field(default_factory=lambda: list(GrantUse))


class ResourceGrantObject(BaseModel):
    model_config = ConfigDict(frozen=True)
    meta: ObjectMeta
    spec: ResourceGrantSpec


def parse_grant(body: Mapping[str, Any]) -> ResourceGrantObject:
    """An API body of kind ResourceGrant as the object the registry holds. Raises pydantic's
    ValidationError for a spec the model refuses."""
    spec = ResourceGrantSpec.model_validate(body.get("spec") or {})
    return ResourceGrantObject(meta=meta_from_body(dict(body)), spec=spec)


@dataclass(frozen=True, slots=True)
class Referrer:
    """Who asks: the namespace of the Tool or agent, with that Namespace object's labels."""

    namespace: str
    labels: Mapping[str, str]


@dataclass(frozen=True, slots=True)
class Target:
    """What is asked for: a registered Resource in another namespace."""

    namespace: str
    name: str
    labels: Mapping[str, str]

    @property
    def key(self) -> str:
        return f"{self.namespace}/{self.name}"


def granting(
    grants: Iterable[ResourceGrantObject], referrer: Referrer, target: Target, use: GrantUse
) -> ResourceGrantObject | None:
    """The first grant (by name) in the target's namespace that lets ``referrer`` bind ``target``
    by ``use``; None when none does. A Resource in the referrer's own namespace needs none: the
    caller asks only across namespaces."""
    for grant in sorted(grants, key=lambda g: g.meta.name):
        if grant.meta.namespace != target.namespace or use not in grant.spec.uses:
            continue
        if not any(f.admits(referrer.namespace, referrer.labels) for f in grant.spec.from_):
            continue
        if any(t.covers(target.name, target.labels) for t in grant.spec.to):
            return grant
    return None


def refusal(referrer: Referrer, target: Target, use: GrantUse) -> tuple[str, str]:
    """Why a cross-namespace use is refused, and the grant that would allow it (what to do)."""
    why = (
        f"Resource {target.key!r} is in namespace {target.namespace!r}, and no ResourceGrant "
        f"there lets namespace {referrer.namespace!r} bind it by {use.value}"
    )
    fix = (
        f"ask the owners of namespace {target.namespace!r} for a ResourceGrant: "
        f"spec.from: [{{namespace: {referrer.namespace}}}], spec.to: [{{name: {target.name}}}], "
        f"spec.uses: [{use.value}]"
    )
    return why, fix
