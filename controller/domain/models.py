"""The wire shapes of Bindery's four custom resources, read as frozen pydantic models.

The CRD schemas under ``crds/`` are the source of truth for what the API server accepts; these
models read the same shapes (camelCase on the wire, snake_case in Python) and a test keeps the two
from drifting. Models carry no I/O.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Annotated, Any, Literal, TypeVar

from bindery_session.wire import Access
from pydantic import (
    AfterValidator,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    ValidationInfo,
    model_validator,
)
from pydantic.alias_generators import to_camel
from pydantic_core import PydanticCustomError

from controller.domain import rules

GROUP = "bindery.dev"
VERSION = "v1alpha1"
API_VERSION = f"{GROUP}/{VERSION}"

WORK_ROLE = "work"
"""The binding name whose URI is held by at most one agent at a time."""


_T = TypeVar("_T")


def _rule(check: Callable[[_T], str | None]) -> AfterValidator:
    """A validator that applies one of ``rules``; its message is the rule's, verbatim."""

    def validate(value: _T) -> _T:
        if why := check(value):
            raise PydanticCustomError(RULE_ERROR, why)
        return value

    return AfterValidator(validate)


def _keys(check: Callable[[str], str | None]) -> AfterValidator:
    """A validator that applies one of ``rules`` to every key of a mapping."""

    def validate(value: dict[str, str]) -> dict[str, str]:
        for key in value:
            if why := check(key):
                raise PydanticCustomError(RULE_ERROR, why)
        return value

    return AfterValidator(validate)


RULE_ERROR = "bindery_rule"
"""The pydantic error type of a ``rules`` violation: its message names the value and the fix."""

Uri = Annotated[str, _rule(rules.uri_problem)]
"""A resource identity: printable ASCII (RFC 3986), a scheme, at most 2048 bytes."""

ParamValue = Annotated[str, _rule(rules.param_problem)]
"""A Resource name, namespace/name, uid or URI: printable ASCII, at most 2048 bytes."""

Attributes = Annotated[
    dict[str, str], _keys(rules.attribute_key_problem), _rule(rules.attributes_problem)
]
"""Resource attributes: keys follow the label-key rule; 16 KiB of keys and values at most."""


class WireModel(BaseModel):
    """Base for every spec model: frozen, camelCase aliases, unknown fields rejected."""

    model_config = ConfigDict(
        frozen=True,
        extra="forbid",
        alias_generator=to_camel,
        populate_by_name=True,
    )


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
    uri: Uri
    alias: str | None = None
    attributes: Attributes = Field(default_factory=dict)


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
    uri: Uri


class ToolUse(WireModel):
    name: str
    params: dict[str, ParamValue] = Field(default_factory=dict)


class LabelSelectorRequirement(WireModel):
    key: str
    operator: Literal["In", "NotIn", "Exists", "DoesNotExist"]
    values: list[str] = Field(default_factory=list)


class LabelSelector(WireModel):
    match_labels: dict[str, str] = Field(default_factory=dict)
    match_expressions: list[LabelSelectorRequirement] = Field(default_factory=list)


class ResourceSelector(LabelSelector):
    """An agent's ``resourceSelector``: a label selector, in the agent's own namespace and in
    the other ``namespaces`` it lists (where a ResourceGrant must admit each Resource it
    selects)."""

    namespaces: list[str] = Field(default_factory=list)


def _as_resource_selector(value: Any) -> Any:
    """A plain :class:`LabelSelector` given where a resource selector is wanted: the same
    selector, in the agent's own namespace only."""
    if isinstance(value, LabelSelector) and not isinstance(value, ResourceSelector):
        return ResourceSelector(
            match_labels=value.match_labels, match_expressions=value.match_expressions
        )
    return value


class EnvVar(WireModel):
    name: str
    value: str = ""


Quantity = Annotated[int | str, _rule(rules.quantity_problem)]
"""A Kubernetes resource quantity, e.g. 500m, 2Gi or 1."""

Id = Annotated[int, Field(ge=0)]
"""A user or group id."""


def _seccomp_localhost(profile: SeccompProfile) -> SeccompProfile:
    if (profile.type == "Localhost") != (profile.localhost_profile is not None):
        raise PydanticCustomError(
            RULE_ERROR,
            "seccompProfile: localhostProfile is required for type Localhost and only "
            "allowed with it",
        )
    return profile


def _no_escalation_when_privileged(context: ContainerSecurityContext) -> ContainerSecurityContext:
    if context.privileged and context.allow_privilege_escalation is False:
        raise PydanticCustomError(
            RULE_ERROR,
            "containerSecurityContext: allowPrivilegeEscalation cannot be false when privileged "
            "is true (a privileged container can always escalate); leave it unset",
        )
    return context


def _toleration(t: Toleration) -> Toleration:
    exists = t.operator == "Exists"
    if not t.key and not exists:
        raise PydanticCustomError(
            RULE_ERROR,
            "toleration: a toleration without a key must have operator Exists (it then "
            "tolerates every taint)",
        )
    if exists and t.value:
        raise PydanticCustomError(
            RULE_ERROR, "toleration: value must be empty when operator is Exists"
        )
    if t.toleration_seconds is not None and t.effect != "NoExecute":
        raise PydanticCustomError(
            RULE_ERROR, "toleration: tolerationSeconds is only allowed with effect NoExecute"
        )
    return t


class ResourceRequirements(WireModel):
    requests: Annotated[dict[str, Quantity], _keys(rules.resource_name_problem)] = Field(
        default_factory=dict
    )
    limits: Annotated[dict[str, Quantity], _keys(rules.resource_name_problem)] = Field(
        default_factory=dict
    )


class SeccompProfile(WireModel):
    type: Literal["RuntimeDefault", "Localhost", "Unconfined"]
    localhost_profile: str | None = None


class PodSecurityContext(WireModel):
    """The session pod's securityContext: a subset of the core PodSecurityContext."""

    run_as_user: Id | None = None
    run_as_group: Id | None = None
    run_as_non_root: bool | None = None
    fs_group: Id | None = None
    fs_group_change_policy: Literal["OnRootMismatch", "Always"] | None = None
    supplemental_groups: list[Id] | None = None
    seccomp_profile: Annotated[SeccompProfile, AfterValidator(_seccomp_localhost)] | None = None


class Capabilities(WireModel):
    add: list[str] | None = None
    drop: list[str] | None = None


class ContainerSecurityContext(WireModel):
    """The session container's securityContext: a subset of the core SecurityContext."""

    run_as_user: Id | None = None
    run_as_group: Id | None = None
    run_as_non_root: bool | None = None
    read_only_root_filesystem: bool | None = None
    allow_privilege_escalation: bool | None = None
    privileged: bool | None = None
    capabilities: Capabilities | None = None
    seccomp_profile: Annotated[SeccompProfile, AfterValidator(_seccomp_localhost)] | None = None


class Toleration(WireModel):
    key: str | None = None
    operator: Literal["Exists", "Equal"] | None = None
    value: str | None = None
    effect: Literal["NoSchedule", "PreferNoSchedule", "NoExecute"] | None = None
    toleration_seconds: int | None = None


class LocalObjectReference(WireModel):
    name: Annotated[str, _rule(lambda v: rules.object_name_problem(v, "Secret"))]


class EmptyDirVolumeSource(WireModel):
    medium: Literal["", "Memory"] | None = None
    size_limit: Quantity | None = None


class ConfigMapVolumeSource(WireModel):
    name: Annotated[str, _rule(lambda v: rules.object_name_problem(v, "ConfigMap"))]
    optional: bool | None = None


class SecretVolumeSource(WireModel):
    secret_name: Annotated[str, _rule(lambda v: rules.object_name_problem(v, "Secret"))]
    optional: bool | None = None


class PersistentVolumeClaimVolumeSource(WireModel):
    claim_name: Annotated[
        str, _rule(lambda v: rules.object_name_problem(v, "PersistentVolumeClaim"))
    ]
    read_only: bool | None = None


class Volume(WireModel):
    """A volume of the session pod: only kinds that stay inside the namespace (no hostPath)."""

    name: Annotated[str, _rule(rules.volume_name_problem)]
    empty_dir: EmptyDirVolumeSource | None = None
    config_map: ConfigMapVolumeSource | None = None
    secret: SecretVolumeSource | None = None
    persistent_volume_claim: PersistentVolumeClaimVolumeSource | None = None


def _one_source(volume: Volume) -> Volume:
    sources = [volume.empty_dir, volume.config_map, volume.secret, volume.persistent_volume_claim]
    if sum(s is not None for s in sources) != 1:
        raise PydanticCustomError(
            RULE_ERROR,
            f"volume {rules.shown(volume.name)}: expected exactly one of emptyDir, configMap, "
            "secret or persistentVolumeClaim",
        )
    return volume


class VolumeMount(WireModel):
    name: str
    mount_path: Annotated[str, _rule(rules.mount_path_problem)]
    read_only: bool | None = None
    sub_path: Annotated[str, _rule(rules.sub_path_problem)] | None = None


def _storage_class_problem(value: str) -> str | None:
    return rules.object_name_problem(value, "StorageClass")


class Workspace(WireModel):
    """A PersistentVolumeClaim ``<agent>-workspace`` mounted in the session at ``mountPath``.

    Only ``mountPath`` is part of the trajectory (it is in the pod template); the claim's size,
    class and reclaim policy are the claim's, applied to it without touching the session.
    """

    size: Annotated[int | str, _rule(rules.storage_size_problem)]
    storage_class_name: Annotated[str, _rule(_storage_class_problem)] | None = None
    mount_path: Annotated[str, _rule(rules.mount_path_problem)] = "/workspace"
    reclaim_policy: Literal["Delete", "Retain"] = "Delete"


def _service_account_problem(value: str) -> str | None:
    return rules.object_name_problem(value, "ServiceAccount") if value else None


def _label_values(value: dict[str, str]) -> dict[str, str]:
    for v in value.values():
        if why := rules.label_value_problem(v):
            raise PydanticCustomError(RULE_ERROR, f"nodeSelector: {why}")
    return value


class McpSettings(WireModel):
    """The session's MCP adapter (``spec.runtime.mcp``): a sidecar serving the bindings over the
    Model Context Protocol on the pod's loopback, at ``$BINDERY_MCP_URL`` in the runtime.

    Part of the trajectory: enabling, disabling or moving it changes the pod (drift until a
    relaunch)."""

    port: Annotated[int, Field(ge=1024, le=65535)] = 7411
    """The loopback port (1024 and above: the sidecar runs as a non-root user without
    capabilities)."""


class IdlePolicy(WireModel):
    """What happens to the session of an idle agent (see :mod:`controller.domain.suspend`)."""

    suspend_after_seconds: Annotated[int, Field(ge=1, le=31_536_000)]


class Runtime(WireModel):
    image: str
    command: list[str] = Field(default_factory=list)
    args: list[str] = Field(default_factory=list)
    env: list[EnvVar] = Field(default_factory=list)
    model: str = ""
    instructions: str = ""
    idle: IdlePolicy | None = None
    """The idle policy; not part of the trajectory (see launch.trajectory_hash)."""
    # Pod settings (none of them is part of the hash while unset: see launch.trajectory_hash).
    resources: ResourceRequirements | None = None
    security_context: PodSecurityContext | None = None
    container_security_context: (
        Annotated[ContainerSecurityContext, AfterValidator(_no_escalation_when_privileged)] | None
    ) = None
    service_account_name: Annotated[str, _rule(_service_account_problem)] = ""
    automount_service_account_token: bool | None = None
    node_selector: Annotated[
        dict[str, str], _keys(rules.node_selector_key_problem), AfterValidator(_label_values)
    ] = Field(default_factory=dict)
    tolerations: list[Annotated[Toleration, AfterValidator(_toleration)]] = Field(
        default_factory=list
    )
    image_pull_secrets: list[LocalObjectReference] = Field(default_factory=list)
    volumes: list[Annotated[Volume, AfterValidator(_one_source)]] = Field(default_factory=list)
    volume_mounts: list[VolumeMount] = Field(default_factory=list)
    workspace: Workspace | None = None
    mcp: McpSettings | None = None
    """The MCP adapter sidecar; unset: none."""

    @model_validator(mode="after")
    def _workspace_has_its_own_path(self) -> Runtime:
        if self.workspace and self.workspace.mount_path in {
            m.mount_path for m in self.volume_mounts
        }:
            raise PydanticCustomError(
                RULE_ERROR,
                f"workspace: mountPath {rules.shown(self.workspace.mount_path)} is also a "
                "volumeMounts path; choose another path for one of them",
            )
        return self

    @model_validator(mode="after")
    def _mounts_name_volumes(self) -> Runtime:
        names = {v.name for v in self.volumes}
        paths = [m.mount_path for m in self.volume_mounts]
        if len(names) != len(self.volumes) or len(set(paths)) != len(paths):
            raise PydanticCustomError(
                RULE_ERROR, "volumes and volumeMounts: expected each name and mountPath once"
            )
        for mount in self.volume_mounts:
            if mount.name not in names:
                raise PydanticCustomError(
                    RULE_ERROR,
                    f"volumeMounts: {rules.shown(mount.mount_path)} mounts volume "
                    f"{rules.shown(mount.name)}, which spec.runtime.volumes does not define",
                )
        return self


DUPLICATE_NAMES_REPORTED = "duplicate_names_reported"
"""Validation-context key: the caller reports duplicate binding names itself (see
:meth:`AgentSpecSpec._one_binding_per_name`)."""


class AgentSpecSpec(WireModel):
    resources: list[DirectBinding] = Field(default_factory=list)
    tools: list[ToolUse] = Field(default_factory=list)
    resource_selector: Annotated[
        ResourceSelector | None, BeforeValidator(_as_resource_selector)
    ] = None
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


RegisteredObject = ResourceTypeObject | ResourceObject | ToolObject | AgentObject


def parse_object(kind: str, body: dict[str, Any]) -> RegisteredObject:
    """An API body of one of the four kinds (``ResourceType``, ``Resource``, ``Tool``,
    ``AgentSpec``) as the domain object the registry holds. Raises pydantic's ValidationError
    for a spec the models refuse: the controller and ``bindery why`` parse with this one
    function, so they can never disagree about what is valid."""
    meta = meta_from_body(body)
    spec = body.get("spec") or {}
    match kind:
        case "ResourceType":
            return ResourceTypeObject(meta=meta, spec=ResourceTypeSpec.model_validate(spec))
        case "Resource":
            return ResourceObject(meta=meta, spec=ResourceSpec.model_validate(spec))
        case "Tool":
            return ToolObject(meta=meta, spec=ToolSpec.model_validate(spec))
        case "AgentSpec":
            return AgentObject(meta=meta, spec=AgentSpecSpec.model_validate(spec))
    raise ValueError(f"{kind!r} is not one of Bindery's kinds")
