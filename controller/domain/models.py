"""The wire shapes of Bindery's four custom resources, read as frozen pydantic models.

The CRD schemas under ``crds/`` are the source of truth for what the API server accepts; these
models read the same shapes (camelCase on the wire, snake_case in Python) and a test keeps the two
from drifting. Models carry no I/O.
"""

from __future__ import annotations

from enum import StrEnum
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationInfo, model_validator
from pydantic.alias_generators import to_camel

GROUP = "bindery.dev"
VERSION = "v1alpha1"
API_VERSION = f"{GROUP}/{VERSION}"

WORK_ROLE = "work"
"""The binding name whose URI is held by at most one agent at a time."""


class WireModel(BaseModel):
    """Base for every spec model: frozen, camelCase aliases, unknown fields rejected."""

    model_config = ConfigDict(
        frozen=True,
        extra="forbid",
        alias_generator=to_camel,
        populate_by_name=True,
    )


class Access(StrEnum):
    READ_ONLY = "read_only"
    READ_WRITE = "read_write"
    WRITE_ONLY = "write_only"


class BindingMode(StrEnum):
    CONTEXTUAL = "contextual"
    STATIC = "static"
    PARAMETER = "parameter"
    DIRECT = "direct"
    """Not a slot mode: marks an agent's own URI-identified bindings in resolution results."""


SlotBinding = Literal["contextual", "static", "parameter"]


# --------------------------------------------------------------------------------------------
# ResourceType (cluster-scoped)


class ResourceTypeSpec(WireModel):
    parent_types: list[str] = Field(default_factory=list)
    uri_schemes: list[str] = Field(default_factory=list)
    description: str = ""


# --------------------------------------------------------------------------------------------
# Resource (namespaced)


class ResourceSpec(WireModel):
    type: str
    uri: str
    alias: str | None = None
    attributes: dict[str, str] = Field(default_factory=dict)


# --------------------------------------------------------------------------------------------
# Tool (namespaced)


class ResourceSlot(WireModel):
    name: str
    resource_type: str
    access: Access = Access.READ_WRITE
    binding: SlotBinding = "contextual"
    static_resource: str | None = None
    required: bool = True
    description: str = ""


class ToolSpec(WireModel):
    description: str = ""
    resource_slots: list[ResourceSlot] = Field(default_factory=list)


# --------------------------------------------------------------------------------------------
# AgentSpec (namespaced)


class DirectBinding(WireModel):
    name: str
    tag: str
    uri: str


class ToolUse(WireModel):
    name: str
    params: dict[str, str] = Field(default_factory=dict)


class LabelSelectorRequirement(WireModel):
    key: str
    operator: Literal["In", "NotIn", "Exists", "DoesNotExist"]
    values: list[str] = Field(default_factory=list)


class LabelSelector(WireModel):
    match_labels: dict[str, str] = Field(default_factory=dict)
    match_expressions: list[LabelSelectorRequirement] = Field(default_factory=list)


class EnvVar(WireModel):
    name: str
    value: str = ""


class Runtime(WireModel):
    image: str
    command: list[str] = Field(default_factory=list)
    args: list[str] = Field(default_factory=list)
    env: list[EnvVar] = Field(default_factory=list)
    model: str = ""
    instructions: str = ""


DUPLICATE_NAMES_REPORTED = "duplicate_names_reported"
"""Validation-context key: the caller reports duplicate binding names itself (see
:meth:`AgentSpecSpec._one_binding_per_name`)."""


class AgentSpecSpec(WireModel):
    resources: list[DirectBinding] = Field(default_factory=list)
    tools: list[ToolUse] = Field(default_factory=list)
    resource_selector: LabelSelector | None = None
    runtime: Runtime | None = None
    relaunch_generation: Annotated[int, Field(ge=0)] = 0

    @model_validator(mode="after")
    def _one_binding_per_name(self, info: ValidationInfo) -> AgentSpecSpec:
        """Binding names are unique, so an agent has at most one ``work`` binding.

        The CRD already refuses duplicates (a list-map keyed by name); the model refuses them too,
        because delivery withholds only the first ``work`` binding while its URI is held elsewhere.
        A caller that reports duplicates itself, with their positions in a file, says so with the
        validation context ``{DUPLICATE_NAMES_REPORTED: True}`` (the KDL and manifest checks).
        """
        if info.context and info.context.get(DUPLICATE_NAMES_REPORTED):
            return self
        seen: set[str] = set()
        for binding in self.resources:
            if binding.name in seen:
                why = (
                    "an agent has at most one work binding"
                    if binding.name == WORK_ROLE
                    else "binding names are unique"
                )
                raise ValueError(
                    f"spec.resources has a second binding named {binding.name!r}: {why}; "
                    "remove or rename one of them"
                )
            seen.add(binding.name)
        return self

    def work(self) -> DirectBinding | None:
        """The agent's ``work`` binding, if it has one (names are unique)."""
        return next((b for b in self.resources if b.name == WORK_ROLE), None)


# --------------------------------------------------------------------------------------------
# Objects: spec plus the metadata the domain needs. Built from API objects at the edge.


class ObjectMeta(BaseModel):
    model_config = ConfigDict(frozen=True)

    name: str
    namespace: str = ""
    uid: str = ""
    labels: dict[str, str] = Field(default_factory=dict)
    generation: int = 0
    creation_timestamp: str = ""

    @property
    def key(self) -> str:
        """``namespace/name`` for namespaced objects, ``name`` for cluster-scoped ones."""
        return f"{self.namespace}/{self.name}" if self.namespace else self.name


class ResourceTypeObject(BaseModel):
    model_config = ConfigDict(frozen=True)
    meta: ObjectMeta
    spec: ResourceTypeSpec


class ResourceObject(BaseModel):
    model_config = ConfigDict(frozen=True)
    meta: ObjectMeta
    spec: ResourceSpec


class ToolObject(BaseModel):
    model_config = ConfigDict(frozen=True)
    meta: ObjectMeta
    spec: ToolSpec


class AgentObject(BaseModel):
    model_config = ConfigDict(frozen=True)
    meta: ObjectMeta
    spec: AgentSpecSpec


def meta_from_body(body: dict[str, Any]) -> ObjectMeta:
    """Read the metadata the domain uses from an API object (a plain mapping)."""
    md = body.get("metadata") or {}
    return ObjectMeta(
        name=md.get("name", ""),
        namespace=md.get("namespace") or "",
        uid=md.get("uid") or "",
        labels=dict(md.get("labels") or {}),
        generation=int(md.get("generation") or 0),
        creation_timestamp=str(md.get("creationTimestamp") or ""),
    )
