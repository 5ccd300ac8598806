"""The five CRDs against the real kube-apiserver: what is accepted, what is rejected, and how.

Every invalid case must be refused at admission by the API server itself (OpenAPI schema and CEL
``x-kubernetes-validations``) with HTTP 422, naming the field and the rule, so that nothing
invalid is ever stored or seen by the controller. Every valid fixture, every example under
``examples/`` and the boundary values (a 2048-byte URI, 32 bindings...) must be accepted.

Unknown fields are the one deliberate exception to "422": the schemas are structural, so the API
server prunes fields it does not know (the default ``fieldValidation=Warn`` stores the object
without them and returns a warning), and rejects them with HTTP 400 when the client asks for
``fieldValidation=Strict`` (kubectl does by default).
"""

from __future__ import annotations

import copy
import json
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
import yaml
from kubernetes import client
from kubernetes.client.exceptions import ApiException

from tests.integration.kube import AGENT_COLUMNS
from tests.support import Cluster

pytestmark = [pytest.mark.integration, pytest.mark.compat]

GROUP, VERSION = "bindery.dev", "v1alpha1"
API_VERSION = f"{GROUP}/{VERSION}"
PLURALS = {
    "ResourceType": "resourcetypes",
    "Resource": "resources",
    "Tool": "tools",
    "AgentSpec": "agentspecs",
    "ResourceGrant": "resourcegrants",
}
CLUSTER_SCOPED = {"ResourceType"}

REPO_ROOT = Path(__file__).resolve().parents[2]
CASES_DIR = Path(__file__).resolve().parent / "cases"
EXAMPLES_DIR = REPO_ROOT / "examples"

URI_LIMIT = 2048


# --------------------------------------------------------------------------------------------
# Helpers


@dataclass
class Rejection:
    """An API error as the API server reported it."""

    status: int
    message: str
    causes: list[tuple[str, str]] = field(default_factory=list)

    def names(self, path: str, fragment: str) -> bool:
        """Whether one cause is on exactly ``path`` and its message contains ``fragment``."""
        return any(f == path and fragment in m for f, m in self.causes)


def rejection(call: Callable[[], object]) -> Rejection:
    with pytest.raises(ApiException) as info:
        call()
    body = json.loads(info.value.body or "{}")
    causes = [
        (str(c.get("field", "")), str(c.get("message", "")))
        for c in (body.get("details") or {}).get("causes") or []
    ]
    return Rejection(int(info.value.status), str(body.get("message", "")), causes)


def assert_422(found: Rejection, path: str, fragment: str) -> None:
    """HTTP 422 whose message names ``path`` and the rule (``fragment``)."""
    assert found.status == 422, found
    assert found.names(path, fragment), (
        f"expected a cause on {path!r} containing {fragment!r}; got {found.causes}"
    )
    assert f"{path}: " in found.message, found.message
    assert fragment in found.message, found.message


def obj(kind: str, name: str, spec: dict[str, Any] | None = None) -> dict[str, Any]:
    body: dict[str, Any] = {"apiVersion": API_VERSION, "kind": kind, "metadata": {"name": name}}
    if spec is not None:
        body["spec"] = spec
    return body


class Objects:
    """Create, read, patch and delete the four kinds, namespaced ones in one namespace."""

    def __init__(self, api: client.CustomObjectsApi, namespace: str) -> None:
        self.api = api
        self.namespace = namespace

    def create(self, body: dict[str, Any], **kwargs: Any) -> dict[str, Any]:
        kind = body["kind"]
        if kind in CLUSTER_SCOPED:
            out = self.api.create_cluster_custom_object(
                GROUP, VERSION, PLURALS[kind], body, **kwargs
            )
        else:
            out = self.api.create_namespaced_custom_object(
                GROUP, VERSION, self.namespace, PLURALS[kind], body, **kwargs
            )
        assert isinstance(out, dict)
        return out

    def apply(self, body: dict[str, Any], **kwargs: Any) -> dict[str, Any]:
        """Server-side apply (as kubectl apply --server-side does), with strict field checks."""
        kind, name = body["kind"], body["metadata"]["name"]
        options: dict[str, Any] = {
            "field_manager": "bindery-crd-tests",
            "force": True,
            "field_validation": "Strict",
            "_content_type": "application/apply-patch+yaml",
            # The generated client maps only a 200 response to a body; an apply that creates
            # answers 201, so read the raw response.
            "_preload_content": False,
            **kwargs,
        }
        response: Any
        if kind in CLUSTER_SCOPED:
            response = self.api.patch_cluster_custom_object(
                GROUP, VERSION, PLURALS[kind], name, body, **options
            )
        else:
            response = self.api.patch_namespaced_custom_object(
                GROUP, VERSION, self.namespace, PLURALS[kind], name, body, **options
            )
        out = json.loads(response.data)
        assert isinstance(out, dict)
        return out

    def get(self, kind: str, name: str) -> dict[str, Any]:
        if kind in CLUSTER_SCOPED:
            out = self.api.get_cluster_custom_object(GROUP, VERSION, PLURALS[kind], name)
        else:
            out = self.api.get_namespaced_custom_object(
                GROUP, VERSION, self.namespace, PLURALS[kind], name
            )
        assert isinstance(out, dict)
        return out

    def patch(
        self, kind: str, name: str, patch: dict[str, Any], *, status: bool = False
    ) -> dict[str, Any]:
        """A JSON merge patch of the object, or of its status subresource."""
        plural = PLURALS[kind]
        if kind in CLUSTER_SCOPED and status:
            out = self.api.patch_cluster_custom_object_status(GROUP, VERSION, plural, name, patch)
        elif kind in CLUSTER_SCOPED:
            out = self.api.patch_cluster_custom_object(GROUP, VERSION, plural, name, patch)
        elif status:
            out = self.api.patch_namespaced_custom_object_status(
                GROUP, VERSION, self.namespace, plural, name, patch
            )
        else:
            out = self.api.patch_namespaced_custom_object(
                GROUP, VERSION, self.namespace, plural, name, patch
            )
        assert isinstance(out, dict)
        return out

    def delete(self, kind: str, name: str) -> None:
        if kind in CLUSTER_SCOPED:
            self.api.delete_cluster_custom_object(GROUP, VERSION, PLURALS[kind], name)
        else:
            self.api.delete_namespaced_custom_object(
                GROUP, VERSION, self.namespace, PLURALS[kind], name
            )

    def absent(self, kind: str, name: str) -> bool:
        try:
            self.get(kind, name)
        except ApiException as e:
            return int(e.status) == 404
        return False


@pytest.fixture(scope="module")
def api(cluster: Cluster, crds: list[str]) -> client.CustomObjectsApi:
    assert {f"{p}.{GROUP}" for p in PLURALS.values()} <= set(crds)
    return client.CustomObjectsApi(cluster.api_client())


@pytest.fixture(scope="module")
def shared_ns(cluster: Cluster, crds: list[str]) -> Iterator[str]:
    """One namespace for the many cases that store nothing (rejections, dry runs)."""
    name = f"crd-cases-{uuid.uuid4().hex[:8]}"
    core = client.CoreV1Api(cluster.api_client())
    core.create_namespace(client.V1Namespace(metadata=client.V1ObjectMeta(name=name)))
    yield name
    core.delete_namespace(name)


@pytest.fixture
def objects(api: client.CustomObjectsApi, namespace: str) -> Objects:
    return Objects(api, namespace)


# --------------------------------------------------------------------------------------------
# Cases rejected at admission


@dataclass
class Case:
    id: str
    body: dict[str, Any]
    path: str
    fragment: str


def _slot(**fields: Any) -> dict[str, Any]:
    return {"name": "repo", "resourceType": "git-checkout", **fields}


def _binding(**fields: Any) -> dict[str, Any]:
    return {"name": "work", "tag": "github-issue", "uri": "github-issue://example/p/1", **fields}


def _without(d: dict[str, Any], key: str) -> dict[str, Any]:
    return {k: v for k, v in d.items() if k != key}


NOT_LABEL = "must be a ResourceType name: a DNS-1123 label"
NOT_IDENT = "must be an identifier: a lowercase letter"
NO_SCHEME = "must start with a URI scheme and ':'"
NOT_ASCII = "must be printable ASCII without spaces or control characters"
NOT_PARAM = "must be a Resource name, namespace/name, uid or URI: printable"
TOO_MANY_BYTES = "must be at most 2048 bytes long"
NOT_ATTRIBUTE_KEY = "attribute keys must follow the label-key rule"
REQUIRED = "Required value"
EMPTY = "should be at least 1 chars long"
TOO_LONG = "Too long: may not be more than"
TOO_MANY = "Too many:"
DUPLICATE = "Duplicate value"
UNSUPPORTED = "Unsupported value"
BAD_SCHEME = "must be a lowercase URI scheme name"
WORKSPACE_TOO_LARGE = "must be at most 1Pi, the largest workspace a session may ask for"
ATTRIBUTES_TOO_LARGE = "attribute keys and values together must be at most 16384 bytes"

LONG_URI = "https://example.com/" + "a" * (URI_LIMIT - len("https://example.com/") + 1)
# 2,048 characters (so within maxLength, which counts characters) but 8,168 bytes.
EMOJI_URI = "https://" + "\N{GRINNING FACE}" * (URI_LIMIT - len("https://"))
HANGUL_FILLER_URI = "github-issue://example/p/1\u3164"  # invisible
BRAILLE_BLANK_URI = "github-issue://example/\u2800p/1"  # invisible
LOOKALIKE_URI = "github-issue://example/t\u0430sk/1"  # Cyrillic a: looks like .../task/1


def _resource(**spec: Any) -> dict[str, Any]:
    base = {"type": "git-checkout", "uri": "git://example/repo"}
    return obj("Resource", "r", {**base, **spec})


def _tool(*slots: dict[str, Any]) -> dict[str, Any]:
    return obj("Tool", "t", {"resourceSlots": list(slots)})


def _agent(**spec: Any) -> dict[str, Any]:
    return obj("AgentSpec", "a", spec)


def _runtime(**runtime: Any) -> dict[str, Any]:
    return _agent(runtime={"image": "registry.example.com/agent:1", **runtime})


FULL_RUNTIME: dict[str, Any] = {
    "image": "registry.example.com/agent:1",
    "resources": {"requests": {"cpu": "250m", "memory": "512Mi"}, "limits": {"cpu": 2}},
    "securityContext": {
        "runAsUser": 10001,
        "runAsGroup": 10001,
        "runAsNonRoot": True,
        "fsGroup": 10001,
        "fsGroupChangePolicy": "OnRootMismatch",
        "supplementalGroups": [20000],
        "seccompProfile": {"type": "Localhost", "localhostProfile": "profiles/agent.json"},
    },
    "containerSecurityContext": {
        "runAsUser": 10002,
        "runAsGroup": 10002,
        "runAsNonRoot": True,
        "readOnlyRootFilesystem": True,
        "allowPrivilegeEscalation": False,
        "privileged": False,
        "capabilities": {"add": ["NET_BIND_SERVICE"], "drop": ["ALL"]},
        "seccompProfile": {"type": "RuntimeDefault"},
    },
    "serviceAccountName": "agent-runner",
    "automountServiceAccountToken": True,
    "nodeSelector": {"kubernetes.io/arch": "arm64", "pool": "agents"},
    "tolerations": [
        {"key": "dedicated", "operator": "Equal", "value": "agents", "effect": "NoSchedule"},
        {
            "key": "node.kubernetes.io/unreachable",
            "operator": "Exists",
            "effect": "NoExecute",
            "tolerationSeconds": 30,
        },
        {"operator": "Exists"},
    ],
    "imagePullSecrets": [{"name": "registry-creds"}, {"name": "mirror-creds"}],
    "volumes": [
        {"name": "scratch", "emptyDir": {"medium": "Memory", "sizeLimit": "64Mi"}},
        {"name": "config", "configMap": {"name": "agent-config", "optional": True}},
        {"name": "key", "secret": {"secretName": "agent-key", "optional": False}},
        {"name": "workspace", "persistentVolumeClaim": {"claimName": "ws", "readOnly": False}},
    ],
    "volumeMounts": [
        {"name": "scratch", "mountPath": "/scratch"},
        {"name": "config", "mountPath": "/etc/agent", "readOnly": True},
        {"name": "key", "mountPath": "/var/run/secrets/agent", "readOnly": True},
        {"name": "workspace", "mountPath": "/work", "subPath": "coder"},
        {"name": "workspace", "mountPath": "/var/run/binderyx"},
    ],
}


def _rtype(name: str = "case-rejected", **spec: Any) -> dict[str, Any]:
    return obj("ResourceType", name, spec)


def _selector(operator: str, values: list[str] | None = None) -> dict[str, Any]:
    expression: dict[str, Any] = {"key": "tier", "operator": operator}
    if values is not None:
        expression["values"] = values
    return {"matchExpressions": [expression]}


SLOT0 = "spec.resourceSlots[0]"
RES0 = "spec.resources[0]"
EXPR0 = "spec.resourceSelector.matchExpressions[0]"


# One case per entry: id, the object sent, the field the API server must name, a fragment of the
# rule's message. Kept as a table, one case to a line or two.
# fmt: off
INVALID: list[Case] = [
    # ResourceType ------------------------------------------------------------------------------
    Case("rtype-name-with-dot", _rtype("git.checkout"), "metadata.name", "must be a DNS-1123"),
    Case("rtype-name-uppercase", _rtype("Git-Checkout"), "metadata.name", "RFC 1123"),
    Case("rtype-name-too-long", _rtype("a" * 64), "metadata.name", TOO_LONG),
    Case("rtype-parent-not-label", _rtype(parentTypes=["git_checkout"]), "spec.parentTypes[0]",
         NOT_LABEL),
    Case("rtype-parent-empty", _rtype(parentTypes=[""]), "spec.parentTypes[0]", NOT_LABEL),
    Case("rtype-parent-duplicate", _rtype(parentTypes=["a", "a"]), "spec.parentTypes[1]",
         DUPLICATE),
    Case("rtype-parents-too-many", _rtype(parentTypes=[f"t{i}" for i in range(33)]),
         "spec.parentTypes", "must have at most 32 items"),
    Case("rtype-scheme-uppercase", _rtype(uriSchemes=["HTTPS"]), "spec.uriSchemes[0]", BAD_SCHEME),
    Case("rtype-scheme-digit-first", _rtype(uriSchemes=["1x"]), "spec.uriSchemes[0]", BAD_SCHEME),
    Case("rtype-scheme-with-colon", _rtype(uriSchemes=["https:"]), "spec.uriSchemes[0]",
         BAD_SCHEME),
    Case("rtype-schemes-duplicate", _rtype(uriSchemes=["https", "https"]), "spec.uriSchemes[1]",
         DUPLICATE),
    Case("rtype-schemes-too-many", _rtype(uriSchemes=[f"s{i}" for i in range(17)]),
         "spec.uriSchemes", "must have at most 16 items"),
    Case("rtype-description-too-long", _rtype(description="x" * 4097), "spec.description",
         TOO_LONG),
    # Resource ----------------------------------------------------------------------------------
    Case("resource-no-spec", obj("Resource", "r"), "spec", REQUIRED),
    Case("resource-no-uri", obj("Resource", "r", {"type": "git-checkout"}), "spec.uri", REQUIRED),
    Case("resource-no-type", obj("Resource", "r", {"uri": "git://x"}), "spec.type", REQUIRED),
    Case("resource-empty-uri", _resource(uri=""), "spec.uri", EMPTY),
    Case("resource-empty-type", _resource(type=""), "spec.type", EMPTY),
    Case("resource-uri-no-scheme", _resource(uri="example.com/repo"), "spec.uri", NO_SCHEME),
    Case("resource-uri-relative", _resource(uri="/srv/repo"), "spec.uri", NO_SCHEME),
    Case("resource-uri-bad-scheme", _resource(uri="1git://example/repo"), "spec.uri", NO_SCHEME),
    Case("resource-uri-space", _resource(uri="file:///my repo"), "spec.uri", NOT_ASCII),
    Case("resource-uri-newline", _resource(uri="file:///repo\n"), "spec.uri", NOT_ASCII),
    Case("resource-uri-tab", _resource(uri="file:///re\tpo"), "spec.uri", NOT_ASCII),
    Case("resource-uri-nul", _resource(uri="file:///re\x00po"), "spec.uri", NOT_ASCII),
    Case("resource-uri-del", _resource(uri="file:///re\x7fpo"), "spec.uri", NOT_ASCII),
    Case("resource-uri-nbsp", _resource(uri="file:///re\u00a0po"), "spec.uri", NOT_ASCII),
    Case("resource-uri-zero-width", _resource(uri="file:///re\u200bpo"), "spec.uri", NOT_ASCII),
    Case("resource-uri-bidi-override", _resource(uri="file:///\u202eop"), "spec.uri", NOT_ASCII),
    Case("resource-uri-hangul-filler", _resource(uri=HANGUL_FILLER_URI), "spec.uri", NOT_ASCII),
    Case("resource-uri-braille-blank", _resource(uri=BRAILLE_BLANK_URI), "spec.uri", NOT_ASCII),
    Case("resource-uri-cyrillic-lookalike", _resource(uri=LOOKALIKE_URI), "spec.uri", NOT_ASCII),
    Case("resource-uri-latin-1", _resource(uri="file:///caf\u00e9"), "spec.uri", NOT_ASCII),
    Case("resource-uri-emoji-chars", _resource(uri=EMOJI_URI), "spec.uri", NOT_ASCII),
    Case("resource-uri-emoji-bytes", _resource(uri=EMOJI_URI), "spec.uri", TOO_MANY_BYTES),
    Case("resource-uri-too-long", _resource(uri=LONG_URI), "spec.uri", TOO_LONG),
    Case("resource-type-not-label", _resource(type="Git_Checkout"), "spec.type", NOT_LABEL),
    Case("resource-type-too-long", _resource(type="a" * 64), "spec.type", TOO_LONG),
    Case("resource-alias-not-identifier", _resource(alias="Config Dir"), "spec.alias", NOT_IDENT),
    Case("resource-attributes-too-many", _resource(attributes={f"k{i}": "v" for i in range(65)}),
         "spec.attributes", TOO_MANY),
    Case("resource-attribute-value-too-long", _resource(attributes={"k": "v" * 4097}),
         "spec.attributes.k", TOO_LONG),
    Case("resource-attribute-key-too-long", _resource(attributes={"k" * 64: "v"}),
         "spec.attributes", NOT_ATTRIBUTE_KEY),
    Case("resource-attribute-key-prefix-too-long",
         _resource(attributes={"a" * 254 + "/k": "v"}), "spec.attributes", NOT_ATTRIBUTE_KEY),
    Case("resource-attribute-key-empty", _resource(attributes={"": "v"}), "spec.attributes",
         NOT_ATTRIBUTE_KEY),
    Case("resource-attribute-key-nul", _resource(attributes={"pass\x00word": "v"}),
         "spec.attributes", NOT_ATTRIBUTE_KEY),
    Case("resource-attribute-key-bidi-override", _resource(attributes={"\u202edrowssap": "v"}),
         "spec.attributes", NOT_ATTRIBUTE_KEY),
    Case("resource-attribute-key-ansi-escape", _resource(attributes={"\x1b[2Jowner": "v"}),
         "spec.attributes", NOT_ATTRIBUTE_KEY),
    Case("resource-attribute-key-space", _resource(attributes={"the owner": "v"}),
         "spec.attributes", NOT_ATTRIBUTE_KEY),
    Case("resource-attribute-key-non-ascii", _resource(attributes={"own\u0435r": "v"}),
         "spec.attributes", NOT_ATTRIBUTE_KEY),
    Case("resource-attribute-value-not-string", _resource(attributes={"n": 1}),
         "spec.attributes.n", "must be of type string"),
    # Tool --------------------------------------------------------------------------------------
    Case("tool-slot-name-uppercase", _tool(_slot(name="ConfigDir")), SLOT0 + ".name", NOT_IDENT),
    Case("tool-slot-name-digit-first", _tool(_slot(name="1dir")), SLOT0 + ".name", NOT_IDENT),
    Case("tool-slot-name-space", _tool(_slot(name="config dir")), SLOT0 + ".name", NOT_IDENT),
    Case("tool-slot-name-dot", _tool(_slot(name="config.dir")), SLOT0 + ".name", NOT_IDENT),
    Case("tool-slot-name-too-long", _tool(_slot(name="a" * 64)), SLOT0 + ".name", TOO_LONG),
    Case("tool-slot-no-name", _tool(_without(_slot(), "name")), SLOT0 + ".name", REQUIRED),
    Case("tool-slot-no-type", _tool(_without(_slot(), "resourceType")), SLOT0 + ".resourceType",
         REQUIRED),
    Case("tool-slot-type-not-label", _tool(_slot(resourceType="Git Checkout")),
         SLOT0 + ".resourceType", NOT_LABEL),
    Case("tool-slot-unknown-access", _tool(_slot(access="admin")), SLOT0 + ".access",
         UNSUPPORTED),
    Case("tool-slot-unknown-binding", _tool(_slot(binding="dynamic")), SLOT0 + ".binding",
         UNSUPPORTED),
    Case("tool-static-without-resource", _tool(_slot(binding="static")),
         SLOT0 + ".staticResource", "Required value: staticResource is required when binding is"),
    Case("tool-static-resource-on-contextual", _tool(_slot(staticResource="shared-config")),
         SLOT0 + ".staticResource", "Forbidden: staticResource may only be set when binding is"),
    Case("tool-static-resource-on-parameter",
         _tool(_slot(binding="parameter", staticResource="shared-config")),
         SLOT0 + ".staticResource", "Forbidden: staticResource may only be set when binding is"),
    Case("tool-static-resource-bad-name", _tool(_slot(binding="static", staticResource="a/b/c")),
         SLOT0 + ".staticResource", "must be a Resource name or namespace/name"),
    Case("tool-duplicate-slot", _tool(_slot(), _slot(resourceType="fs-directory")),
         "spec.resourceSlots[1]", DUPLICATE),
    Case("tool-too-many-slots", _tool(*[_slot(name=f"s{i}") for i in range(33)]),
         "spec.resourceSlots", "must have at most 32 items"),
    # AgentSpec ---------------------------------------------------------------------------------
    Case("agent-binding-name-uppercase", _agent(resources=[_binding(name="Work")]),
         RES0 + ".name", NOT_IDENT),
    Case("agent-binding-name-dash-first", _agent(resources=[_binding(name="-work")]),
         RES0 + ".name", NOT_IDENT),
    Case("agent-binding-no-name", _agent(resources=[_without(_binding(), "name")]),
         RES0 + ".name", REQUIRED),
    Case("agent-binding-no-tag", _agent(resources=[_without(_binding(), "tag")]),
         RES0 + ".tag", REQUIRED),
    Case("agent-binding-no-uri", _agent(resources=[_without(_binding(), "uri")]),
         RES0 + ".uri", REQUIRED),
    Case("agent-binding-empty-uri", _agent(resources=[_binding(uri="")]), RES0 + ".uri", EMPTY),
    Case("agent-binding-tag-not-label", _agent(resources=[_binding(tag="github_issue")]),
         RES0 + ".tag", NOT_LABEL),
    Case("agent-binding-uri-no-scheme", _agent(resources=[_binding(uri="example/p/1")]),
         RES0 + ".uri", NO_SCHEME),
    Case("agent-binding-uri-space", _agent(resources=[_binding(uri="github-issue://a b")]),
         RES0 + ".uri", NOT_ASCII),
    Case("agent-binding-uri-control", _agent(resources=[_binding(uri="github-issue://a\x1b")]),
         RES0 + ".uri", NOT_ASCII),
    Case("agent-binding-uri-hangul-filler", _agent(resources=[_binding(uri=HANGUL_FILLER_URI)]),
         RES0 + ".uri", NOT_ASCII),
    Case("agent-binding-uri-braille-blank", _agent(resources=[_binding(uri=BRAILLE_BLANK_URI)]),
         RES0 + ".uri", NOT_ASCII),
    Case("agent-binding-uri-cyrillic-lookalike",
         _agent(resources=[_binding(uri=LOOKALIKE_URI)]), RES0 + ".uri", NOT_ASCII),
    Case("agent-binding-uri-emoji-bytes", _agent(resources=[_binding(uri=EMOJI_URI)]),
         RES0 + ".uri", TOO_MANY_BYTES),
    Case("agent-param-lookalike-uri",
         _agent(tools=[{"name": "editor", "params": {"target": LOOKALIKE_URI}}]),
         "spec.tools[0].params[target]", NOT_PARAM),
    Case("agent-param-space", _agent(tools=[{"name": "editor", "params": {"target": "a b"}}]),
         "spec.tools[0].params[target]", NOT_PARAM),
    Case("agent-param-emoji-bytes",
         _agent(tools=[{"name": "editor", "params": {"target": EMOJI_URI}}]),
         "spec.tools[0].params[target]", TOO_MANY_BYTES),
    Case("agent-binding-uri-too-long", _agent(resources=[_binding(uri=LONG_URI)]),
         RES0 + ".uri", TOO_LONG),
    Case("agent-second-work-binding",
         _agent(resources=[_binding(), _binding(uri="github-issue://example/p/2")]),
         "spec.resources[1]", DUPLICATE),
    Case("agent-duplicate-binding",
         _agent(resources=[_binding(name="source"), _binding(name="source", tag="worktree")]),
         "spec.resources[1]", DUPLICATE),
    Case("agent-too-many-bindings", _agent(resources=[_binding(name=f"b{i}") for i in range(33)]),
         "spec.resources", "must have at most 32 items"),
    Case("agent-relaunch-negative", _agent(relaunchGeneration=-1), "spec.relaunchGeneration",
         "should be greater than or equal to 0"),
    Case("agent-relaunch-not-integer", _agent(relaunchGeneration="2"), "spec.relaunchGeneration",
         "must be of type integer"),
    Case("agent-tool-no-name", _agent(tools=[{"params": {}}]), "spec.tools[0].name", REQUIRED),
    Case("agent-tool-name-invalid", _agent(tools=[{"name": "Code_Editor"}]),
         "spec.tools[0].name", "must be a Tool name"),
    Case("agent-duplicate-tool", _agent(tools=[{"name": "editor"}, {"name": "editor"}]),
         "spec.tools[1]", DUPLICATE),
    Case("agent-too-many-tools", _agent(tools=[{"name": f"t{i}"} for i in range(33)]),
         "spec.tools", "must have at most 32 items"),
    Case("agent-param-key-not-slot-name",
         _agent(tools=[{"name": "editor", "params": {"Target Dir": "out"}}]),
         "spec.tools[0].params", "keys must be slot names"),
    Case("agent-param-empty-value", _agent(tools=[{"name": "editor", "params": {"target": ""}}]),
         "spec.tools[0].params.target", EMPTY),
    Case("agent-too-many-params",
         _agent(tools=[{"name": "e", "params": {f"p{i}": "x" for i in range(33)}}]),
         "spec.tools[0].params", TOO_MANY),
    Case("agent-selector-unknown-operator", _agent(resourceSelector=_selector("Like")),
         EXPR0 + ".operator", UNSUPPORTED),
    Case("agent-selector-in-without-values", _agent(resourceSelector=_selector("In")),
         EXPR0 + ".values", "values must be non-empty for In"),
    Case("agent-selector-exists-with-values", _agent(resourceSelector=_selector("Exists", ["x"])),
         EXPR0 + ".values", "empty for Exists"),
    Case("agent-runtime-no-image", _agent(runtime={"command": ["agent"]}), "spec.runtime.image",
         REQUIRED),
    Case("agent-runtime-empty-image", _agent(runtime={"image": ""}), "spec.runtime.image", EMPTY),
    Case("agent-runtime-env-name-invalid",
         _agent(runtime={"image": "x", "env": [{"name": "1ABC", "value": "v"}]}),
         "spec.runtime.env[0].name", "must be an environment variable name"),
    Case("agent-runtime-env-duplicate",
         _agent(runtime={"image": "x", "env": [{"name": "A"}, {"name": "A", "value": "v"}]}),
         "spec.runtime.env[1]", DUPLICATE),
    Case("agent-runtime-too-many-args", _agent(runtime={"image": "x", "args": ["a"] * 65}),
         "spec.runtime.args", "must have at most 64 items"),
    Case("agent-runtime-instructions-too-long",
         _agent(runtime={"image": "x", "instructions": "x" * 65537}),
         "spec.runtime.instructions", TOO_LONG),
    Case("agent-runtime-quantity-invalid", _runtime(resources={"limits": {"memory": "1 GB"}}),
         "spec.runtime.resources.limits.memory", "should match"),
    Case("agent-runtime-resource-name-invalid", _runtime(resources={"requests": {"CPU!": "1"}}),
         "spec.runtime.resources.requests", "keys must be resource names"),
    Case("agent-runtime-run-as-user-negative", _runtime(securityContext={"runAsUser": -1}),
         "spec.runtime.securityContext.runAsUser", "should be greater than or equal to 0"),
    Case("agent-runtime-fs-group-policy-unknown",
         _runtime(securityContext={"fsGroupChangePolicy": "Sometimes"}),
         "spec.runtime.securityContext.fsGroupChangePolicy", UNSUPPORTED),
    Case("agent-runtime-seccomp-localhost-without-profile",
         _runtime(securityContext={"seccompProfile": {"type": "Localhost"}}),
         "spec.runtime.securityContext.seccompProfile", "localhostProfile is required"),
    Case("agent-runtime-seccomp-profile-without-localhost",
         _runtime(containerSecurityContext={
             "seccompProfile": {"type": "RuntimeDefault", "localhostProfile": "p.json"}}),
         "spec.runtime.containerSecurityContext.seccompProfile", "localhostProfile is required"),
    Case("agent-runtime-privileged-without-escalation",
         _runtime(containerSecurityContext={"privileged": True,
                                            "allowPrivilegeEscalation": False}),
         "spec.runtime.containerSecurityContext", "allowPrivilegeEscalation cannot be false"),
    Case("agent-runtime-service-account-invalid", _runtime(serviceAccountName="Agent SA"),
         "spec.runtime.serviceAccountName", "must be a ServiceAccount name"),
    Case("agent-runtime-node-selector-key-invalid",
         _runtime(nodeSelector={"-bad-": "x"}), "spec.runtime.nodeSelector",
         "keys must be label keys"),
    Case("agent-runtime-node-selector-value-invalid",
         _runtime(nodeSelector={"pool": "a b"}), "spec.runtime.nodeSelector.pool",
         "should match"),
    Case("agent-runtime-volume-without-source", _runtime(volumes=[{"name": "v"}]),
         "spec.runtime.volumes[0]", "must have exactly one of emptyDir"),
    Case("agent-runtime-volume-two-sources",
         _runtime(volumes=[{"name": "v", "emptyDir": {}, "secret": {"secretName": "s"}}]),
         "spec.runtime.volumes[0]", "must have exactly one of emptyDir"),
    Case("agent-runtime-volume-named-bindings",
         _runtime(volumes=[{"name": "bindings", "emptyDir": {}}]),
         "spec.runtime.volumes[0].name", "is reserved for Bindery"),
    Case("agent-runtime-volume-duplicate",
         _runtime(volumes=[{"name": "v", "emptyDir": {}}, {"name": "v", "emptyDir": {}}]),
         "spec.runtime.volumes[1]", DUPLICATE),
    Case("agent-runtime-mount-of-no-volume",
         _runtime(volumeMounts=[{"name": "v", "mountPath": "/v"}]),
         "spec.runtime.volumeMounts", "every mount must name a volume"),
    Case("agent-runtime-mount-over-bindings",
         _runtime(volumes=[{"name": "v", "emptyDir": {}}],
                  volumeMounts=[{"name": "v", "mountPath": "/var/run/bindery/x"}]),
         "spec.runtime.volumeMounts[0].mountPath", "is where the session reads its bindings"),
    Case("agent-runtime-mount-relative",
         _runtime(volumes=[{"name": "v", "emptyDir": {}}],
                  volumeMounts=[{"name": "v", "mountPath": "work"}]),
         "spec.runtime.volumeMounts[0].mountPath", "must be an absolute path"),
    Case("agent-runtime-mount-sub-path-escapes",
         _runtime(volumes=[{"name": "v", "emptyDir": {}}],
                  volumeMounts=[{"name": "v", "mountPath": "/v", "subPath": "a/../../etc"}]),
         "spec.runtime.volumeMounts[0].subPath", "must be a relative path without '..'"),
    Case("agent-runtime-toleration-no-key-equal",
         _runtime(tolerations=[{"operator": "Equal", "value": "x"}]),
         "spec.runtime.tolerations[0]", "a toleration without a key must have operator Exists"),
    Case("agent-runtime-toleration-exists-with-value",
         _runtime(tolerations=[{"key": "k", "operator": "Exists", "value": "x"}]),
         "spec.runtime.tolerations[0].value", "must be empty when operator is Exists"),
    Case("agent-runtime-toleration-seconds-without-no-execute",
         _runtime(tolerations=[{"key": "k", "effect": "NoSchedule", "tolerationSeconds": 5}]),
         "spec.runtime.tolerations[0].tolerationSeconds", "only allowed with effect NoExecute"),
    Case("agent-runtime-pull-secret-duplicate",
         _runtime(imagePullSecrets=[{"name": "creds"}, {"name": "creds"}]),
         "spec.runtime.imagePullSecrets[1]", DUPLICATE),
    Case("agent-runtime-pull-secret-name-invalid", _runtime(imagePullSecrets=[{"name": "A_B"}]),
         "spec.runtime.imagePullSecrets[0].name", "must be a Secret name"),
    *(Case(f"agent-workspace-size-{size}", _runtime(workspace={"size": size}),
           "spec.runtime.workspace.size", WORKSPACE_TOO_LARGE)
      for size in ("1Ei", "1E", "2Pi", "1e18", "1025Ti", 2**50 + 1)),
    Case("agent-workspace-size-fractional-exponent", _runtime(workspace={"size": "1e1.5"}),
         "spec.runtime.workspace.size", "must be a storage quantity above zero"),
    Case("agent-workspace-size-zero", _runtime(workspace={"size": "0"}),
         "spec.runtime.workspace.size", "must be a storage quantity above zero"),
    Case("resource-attributes-too-large",
         _resource(attributes={f"k{i:02d}": "v" * 253 + "v" * (i == 0) for i in range(64)}),
         "spec.attributes", ATTRIBUTES_TOO_LARGE),
    Case("resource-attributes-too-large-in-bytes",
         _resource(attributes={f"k{i}": "\N{GRINNING FACE}" * 1024 for i in range(4)}),
         "spec.attributes", ATTRIBUTES_TOO_LARGE),
]
# fmt: on


@pytest.mark.parametrize("case", INVALID, ids=[c.id for c in INVALID])
def test_rejected_at_admission(api: client.CustomObjectsApi, shared_ns: str, case: Case) -> None:
    objects = Objects(api, shared_ns)
    found = rejection(lambda: objects.create(copy.deepcopy(case.body)))
    assert_422(found, case.path, case.fragment)
    # Nothing was stored, so the controller can never see it.
    assert objects.absent(case.body["kind"], case.body["metadata"]["name"])


def test_case_ids_are_unique() -> None:
    ids = [c.id for c in INVALID]
    assert len(ids) == len(set(ids))


# --------------------------------------------------------------------------------------------
# Accepted: fixtures, boundary values, examples


def _docs(path: Path) -> list[dict[str, Any]]:
    return [d for d in yaml.safe_load_all(path.read_text()) if isinstance(d, dict)]


VALID_DOCS = _docs(CASES_DIR / "valid.yaml")

BOUNDARY: list[tuple[str, dict[str, Any]]] = [
    ("uri-at-limit", _resource(uri=LONG_URI[:URI_LIMIT])),
    ("uri-percent-encoded", _resource(uri="file:///caf%C3%A9/t%D0%B0sk?q=a%20b#x")),
    ("uri-every-printable-ascii", _resource(uri="x:" + "".join(map(chr, range(0x21, 0x7F))))),
    ("uri-case-and-trailing-slash-kept", _resource(uri="HTTPS://Example.COM/Repo/")),
    ("rtype-name-at-limit", _rtype("a" * 63)),
    (
        "rtype-parents-at-limit",
        _rtype("case-many-parents", parentTypes=[f"t{i}" for i in range(32)]),
    ),
    ("rtype-schemes", _rtype("case-schemes", uriSchemes=["git+ssh", "s3", "a.b-c", "x"])),
    ("slot-name-config-dir", _tool(_slot(name="config_dir"))),
    ("slots-at-limit", _tool(*[_slot(name=f"s{i}") for i in range(32)])),
    ("static-with-namespace", _tool(_slot(binding="static", staticResource="ns-1/res.v1"))),
    ("bindings-at-limit", _agent(resources=[_binding(name=f"b{i}") for i in range(32)])),
    ("binding-uri-at-limit", _agent(resources=[_binding(uri=LONG_URI[:URI_LIMIT])])),
    ("attributes-at-limit", _resource(attributes={f"k{i:02d}": "v" * 253 for i in range(64)})),
    ("attribute-value-at-limit", _resource(attributes={"k": "v" * 4096})),
    ("workspace-size-at-limit", _runtime(workspace={"size": "1Pi"})),
    ("workspace-size-int-at-limit", _runtime(workspace={"size": 2**50})),
    ("workspace-size-exponent", _runtime(workspace={"size": "1e12"})),
    ("workspace-size-milli", _runtime(workspace={"size": "1500m"})),
    (
        "attribute-keys",
        _resource(
            attributes={
                "branch": "main",
                "example.com/owner": "a",
                "A.b_c-9": "",
                "k" * 63: "v",
                "a" * 253 + "/" + "k" * 63: "v",
            }
        ),
    ),
    ("param-at-limit", _agent(tools=[{"name": "e", "params": {"p": LONG_URI[:URI_LIMIT]}}])),
    ("runtime-full", _agent(runtime=FULL_RUNTIME)),
    ("selector-empty", _agent(resourceSelector={})),
    ("agent-empty", obj("AgentSpec", "a")),
]


@pytest.mark.parametrize(
    "body",
    [*VALID_DOCS, *(b for _, b in BOUNDARY)],
    ids=[f"valid-{d['kind']}-{d['metadata']['name']}" for d in VALID_DOCS]
    + [b for b, _ in BOUNDARY],
)
def test_accepted(api: client.CustomObjectsApi, shared_ns: str, body: dict[str, Any]) -> None:
    """Accepted by the API server, strictly (no unknown field either).

    A server-side dry-run apply: it runs every admission check, and neither a cluster-wide type
    that another test created nor a repeat run conflicts, since nothing is stored.
    """
    out = Objects(api, shared_ns).apply(copy.deepcopy(body), dry_run="All")
    assert out["kind"] == body["kind"]
    assert out["metadata"]["name"] == body["metadata"]["name"]


def _example_docs() -> list[tuple[str, dict[str, Any]]]:
    found = []
    for path in sorted(EXAMPLES_DIR.rglob("*.yaml")) if EXAMPLES_DIR.is_dir() else []:
        for i, doc in enumerate(_docs(path)):
            if str(doc.get("apiVersion", "")).startswith(f"{GROUP}/"):
                found.append((f"{path.relative_to(REPO_ROOT)}#{i}", doc))
    return found


EXAMPLES = _example_docs()


@pytest.mark.skipif(not EXAMPLES, reason=f"no {GROUP} objects in any examples/**/*.yaml yet")
@pytest.mark.parametrize("body", [d for _, d in EXAMPLES], ids=[i for i, _ in EXAMPLES])
def test_example_accepted(
    api: client.CustomObjectsApi, shared_ns: str, body: dict[str, Any]
) -> None:
    """Every Bindery object in examples/ is valid, strictly (a server-side dry-run apply)."""
    body = copy.deepcopy(body)
    if body["kind"] not in CLUSTER_SCOPED:
        body["metadata"].pop("namespace", None)
    out = Objects(api, shared_ns).apply(body, dry_run="All")
    assert out["metadata"]["name"] == body["metadata"]["name"]


def test_defaults_are_applied(objects: Objects) -> None:
    tool = objects.create(_tool(_slot(), _slot(name="cfg", binding="static", staticResource="c")))
    first, second = tool["spec"]["resourceSlots"]
    assert (first["access"], first["binding"], first["required"]) == (
        "read_write",
        "contextual",
        True,
    )
    assert (second["access"], second["binding"]) == ("read_write", "static")
    agent = objects.create(obj("AgentSpec", "bare"))
    assert agent["spec"] == {"relaunchGeneration": 0}


# --------------------------------------------------------------------------------------------
# Transition rules


def test_resource_uri_is_immutable(objects: Objects) -> None:
    objects.create(_resource(uri="git://example/repo"))
    found = rejection(
        lambda: objects.patch("Resource", "r", {"spec": {"uri": "git://example/other"}})
    )
    assert_422(found, "spec.uri", "is immutable")
    # Byte-exact: even a change only in case or a trailing slash is a different identity.
    found = rejection(
        lambda: objects.patch("Resource", "r", {"spec": {"uri": "git://example/repo/"}})
    )
    assert_422(found, "spec.uri", "is immutable")
    # Everything else may change; the URI may be written again unchanged.
    out = objects.patch("Resource", "r", {"spec": {"uri": "git://example/repo", "alias": "repo"}})
    assert out["spec"]["alias"] == "repo"
    assert objects.get("Resource", "r")["spec"]["uri"] == "git://example/repo"


def test_relaunch_generation_may_be_lowered_but_not_negative(objects: Objects) -> None:
    """A GitOps revert of a bump lowers it: the API server accepts that (the controller
    relaunches on any change)."""
    objects.create(_agent(relaunchGeneration=2))
    out = objects.patch("AgentSpec", "a", {"spec": {"relaunchGeneration": 1}})
    assert out["spec"]["relaunchGeneration"] == 1
    # Removing the field defaults it to 0.
    out = objects.patch("AgentSpec", "a", {"spec": {"relaunchGeneration": None}})
    assert out["spec"]["relaunchGeneration"] == 0
    found = rejection(lambda: objects.patch("AgentSpec", "a", {"spec": {"relaunchGeneration": -3}}))
    assert_422(found, "spec.relaunchGeneration", "greater than or equal to 0")
    out = objects.patch("AgentSpec", "a", {"spec": {"relaunchGeneration": 5}})
    assert out["spec"]["relaunchGeneration"] == 5


def test_second_work_binding_rejected_on_update(objects: Objects) -> None:
    objects.create(_agent(resources=[_binding()]))
    current = objects.get("AgentSpec", "a")
    current["spec"]["resources"].append(_binding(uri="github-issue://example/p/2"))
    found = rejection(
        lambda: objects.api.replace_namespaced_custom_object(
            GROUP, VERSION, objects.namespace, "agentspecs", "a", current
        )
    )
    assert_422(found, "spec.resources[1]", DUPLICATE)


def test_server_side_apply_merges_list_maps_per_entry(objects: Objects) -> None:
    """spec.resources, spec.tools and resourceSlots are list-maps: each entry has its own owner."""
    source = _binding(name="source", tag="worktree", uri="worktree://example/p/change")
    objects.apply(_agent(resources=[_binding()]), field_manager="gitops")
    objects.apply(_agent(resources=[source], tools=[{"name": "editor"}]), field_manager="ops")
    merged = objects.get("AgentSpec", "a")["spec"]
    assert [b["name"] for b in merged["resources"]] == ["work", "source"]
    assert merged["tools"] == [{"name": "editor"}]
    # The first manager drops its work binding (the handoff's first step); the other's stays.
    objects.apply(_agent(resources=[]), field_manager="gitops")
    assert objects.get("AgentSpec", "a")["spec"]["resources"] == [source]

    objects.apply(_tool(_slot()), field_manager="gitops")
    objects.apply(_tool(_slot(name="out", binding="parameter")), field_manager="ops")
    slots = objects.get("Tool", "t")["spec"]["resourceSlots"]
    assert [slot["name"] for slot in slots] == ["repo", "out"]


# --------------------------------------------------------------------------------------------
# Unknown fields: pruned by default, rejected under Strict


def test_unknown_fields_pruned_by_default(objects: Objects) -> None:
    body = _agent(resources=[_binding(priority=1)], color="blue")
    body["unknownTopLevel"] = True
    out = objects.create(body)  # no fieldValidation: the API server's default, Warn
    assert "color" not in out["spec"]
    assert "priority" not in out["spec"]["resources"][0]
    assert "unknownTopLevel" not in out
    stored = objects.get("AgentSpec", "a")
    assert stored["spec"]["resources"] == [_binding()]


def test_unknown_fields_rejected_when_strict(objects: Objects) -> None:
    body = _agent(resources=[_binding(priority=1)], color="blue")
    found = rejection(lambda: objects.create(body, field_validation="Strict"))
    assert found.status == 400, found
    assert 'unknown field "spec.color"' in found.message
    assert 'unknown field "spec.resources[0].priority"' in found.message
    assert objects.absent("AgentSpec", "a")


def test_kubectl_rejects_unknown_fields_and_warns_when_asked(
    cluster: Cluster, crds: list[str], namespace: str
) -> None:
    manifest = yaml.safe_dump(_agent(colour="blue"))
    strict = cluster.kubectl("apply", "-n", namespace, "-f", "-", input=manifest, check=False)
    assert strict.returncode != 0
    assert 'unknown field "spec.colour"' in strict.stderr
    warn = cluster.kubectl(
        "apply", "-n", namespace, "--validate=warn", "-f", "-", input=manifest, check=False
    )
    assert warn.returncode == 0, warn.stderr
    assert 'unknown field "spec.colour"' in warn.stderr  # a warning; the field is pruned
    stored = cluster.kubectl("get", "agentspec", "a", "-n", namespace, "-o", "json").stdout
    assert "colour" not in json.loads(stored)["spec"]


def test_server_side_apply_refuses_unknown_fields_in_the_words_the_readme_quotes(
    cluster: Cluster, crds: list[str], namespace: str
) -> None:
    """Server-side apply builds a typed patch, which has no room for an unknown field: refused
    whatever ``--validate`` says (the README quotes this text, not client-side apply's)."""
    manifest = yaml.safe_dump(_agent(colour="blue"))
    said = f"failed to create typed patch object ({namespace}/a; bindery.dev/v1alpha1, "
    for validate in ("--validate=strict", "--validate=warn", "--validate=false"):
        out = cluster.kubectl(
            "apply", "--server-side", validate, "-n", namespace, "-f", "-",
            input=manifest, check=False,
        )  # fmt: skip
        assert out.returncode != 0, validate
        assert said in out.stderr, out.stderr
        assert ".spec.colour: field not declared in schema" in out.stderr, out.stderr
    readme = (Path(__file__).resolve().parents[2] / "README.md").read_text()
    assert "Error from server: failed to create typed patch object (demo/typo;" in readme
    assert ".spec.resourceSlot: field not declared in schema" in readme


# --------------------------------------------------------------------------------------------
# Status subresource


def _condition(
    status: str = "True", reason: str = "Resolved", generation: int = 1
) -> dict[str, Any]:
    return {
        "type": "Ready",
        "status": status,
        "reason": reason,
        "message": "every binding resolved",
        "lastTransitionTime": "2025-01-01T00:00:00Z",
        "observedGeneration": generation,
    }


AGENT_STATUS: dict[str, Any] = {
    "observedGeneration": 1,
    "conditions": [_condition()],
    "state": "Working",
    "work": {
        "uri": "github-issue://example/p/1",
        "tag": "github-issue",
        "held": True,
        "holder": {"namespace": "ns", "name": "a"},
        "since": "2025-01-01T00:00:00Z",
    },
    "bindings": [
        {
            "name": "work",
            "tag": "github-issue",
            "uri": "github-issue://example/p/1",
            "mode": "direct",
            "state": "Bound",
            "resource": {
                "uri": "github-issue://example/p/1",
                "type": "github-issue",
                "alias": "work",
            },
        },
        {
            "tool": "editor",
            "slot": "repo",
            "mode": "contextual",
            "access": "read_write",
            "resourceType": "git-checkout",
            "required": True,
            "state": "Error",
            "message": "no linked resource fits",
            "candidates": [{"uri": "x:y", "type": "ding", "alias": "", "reason": "type ding"}],
        },
    ],
    "missingTools": ["ghost"],
    "bindingsConfigMap": "a-bindings",
    "launch": "1/2",
    "desiredLaunchGeneration": 2,
    "observedLaunchGeneration": 1,
    "desiredTrajectoryHash": "sha256:bbb",
    "launchedTrajectoryHash": "sha256:aaa",
    "lastLaunchTime": "2025-01-01T00:00:00Z",
}

STATUSES: dict[str, dict[str, Any]] = {
    "AgentSpec": AGENT_STATUS,
    "Resource": {
        "observedGeneration": 1,
        "conditions": [_condition()],
        "valid": True,
        "holder": {"namespace": "ns", "name": "a", "uid": "u-1", "since": "2025-01-01T00:00:00Z"},
        "delivered": "2/3",
        "rollout": {
            "generation": 1,
            "dependents": 3,
            "applied": 2,
            "pending": 1,
            "refused": 0,
            "suspended": 0,
            "laggards": [{"agent": "ns/b", "state": "Pending", "message": "applied nothing"}],
        },
    },
    "Tool": {
        "observedGeneration": 1,
        "conditions": [_condition("False", "StaticSlotInvalid")],
        "slotCount": 1,
        "staticSlotsValid": False,
        "staticSlots": [
            {
                "name": "cfg",
                "resourceType": "fs-directory",
                "staticResource": "shared-config",
                "state": "Error",
                "message": "Resource shared-config not found",
            }
        ],
    },
    "ResourceType": {
        "observedGeneration": 1,
        "conditions": [_condition("False", "Cycle")],
        "ancestors": ["b"],
        "unknownParents": ["c"],
        "cycle": ["a", "b", "a"],
    },
    "ResourceGrant": {"observedGeneration": 1, "conditions": [_condition()]},
}


def _bodies(suffix: str) -> dict[str, dict[str, Any]]:
    return {
        "AgentSpec": _agent(resources=[_binding()], tools=[{"name": "editor"}]),
        "Resource": _resource(),
        "Tool": _tool(_slot(name="cfg", binding="static", staticResource="shared-config")),
        "ResourceType": _rtype(f"case-status-{suffix}", parentTypes=["b"]),
        "ResourceGrant": obj(
            "ResourceGrant", "g", {"from": [{"namespace": "a"}], "to": [{"name": "shared-config"}]}
        ),
    }


SPEC_CHANGES: dict[str, dict[str, Any]] = {
    "AgentSpec": {"relaunchGeneration": 1},
    "Resource": {"alias": "repo"},
    "Tool": {"description": "edits"},
    "ResourceType": {"description": "a type"},
    "ResourceGrant": {"uses": ["static"]},
}


@pytest.mark.parametrize("kind", sorted(PLURALS))
def test_status_subresource(objects: Objects, kind: str) -> None:
    body = _bodies(uuid.uuid4().hex[:8])[kind]
    name = body["metadata"]["name"]
    created = objects.create(body)
    try:
        assert created["metadata"]["generation"] == 1
        # A new object reads as not yet observed (the schema default), so kstatus never
        # computes Current for it before the controller has written its status.
        assert created["status"] == {"observedGeneration": -1}
        # Status is ignored on create and on writes to the main resource.
        body_with_status = {"status": {"observedGeneration": 7}}
        after_main = objects.patch(kind, name, body_with_status)
        assert after_main["status"] == {"observedGeneration": -1}
        assert after_main["metadata"]["generation"] == 1

        # A status write is stored as written and does not bump generation.
        status = copy.deepcopy(STATUSES[kind])
        after_status = objects.patch(kind, name, {"status": status}, status=True)
        assert after_status["metadata"]["generation"] == 1
        assert after_status["status"] == status

        # A spec change bumps generation and keeps status; a metadata-only change does not.
        labelled = objects.patch(kind, name, {"metadata": {"labels": {"team": "a"}}})
        assert labelled["metadata"]["generation"] == 1
        changed = objects.patch(kind, name, {"spec": SPEC_CHANGES[kind]})
        assert changed["metadata"]["generation"] == 2
        assert changed["status"] == status

        # Spec fields are ignored when written through the status subresource.
        via_status = objects.patch(kind, name, {"spec": {"description": "ignored"}}, status=True)
        assert via_status["metadata"]["generation"] == 2
    finally:
        objects.delete(kind, name)


STATUS_INVALID = [
    ("AgentSpec", {"state": "Busy"}, "status.state", UNSUPPORTED),
    ("AgentSpec", {"bindings": [{"state": "Maybe"}]}, "status.bindings[0].state", UNSUPPORTED),
    ("AgentSpec", {"bindings": [{"mode": "magic"}]}, "status.bindings[0].mode", UNSUPPORTED),
    (
        "AgentSpec",
        {"observedLaunchGeneration": -1},
        "status.observedLaunchGeneration",
        "greater than or equal to 0",
    ),
    ("AgentSpec", {"lastLaunchTime": "yesterday"}, "status.lastLaunchTime", "date-time"),
    (
        "Tool",
        {"conditions": [{**_condition(), "status": "Yes"}]},
        "status.conditions[0].status",
        UNSUPPORTED,
    ),
    (
        "Tool",
        {"conditions": [_without(_condition(), "reason")]},
        "status.conditions[0].reason",
        REQUIRED,
    ),
    ("Resource", {"conditions": [_condition(), _condition()]}, "status.conditions[1]", DUPLICATE),
    ("Resource", {"valid": "yes"}, "status.valid", "must be of type boolean"),
]


@pytest.mark.parametrize(
    ("kind", "status", "path", "fragment"),
    STATUS_INVALID,
    ids=[f"{k}-{p}" for k, _, p, _ in STATUS_INVALID],
)
def test_status_is_validated(
    objects: Objects, kind: str, status: dict[str, Any], path: str, fragment: str
) -> None:
    body = _bodies("x")[kind]
    objects.create(body)
    name = body["metadata"]["name"]
    found = rejection(lambda: objects.patch(kind, name, {"status": status}, status=True))
    assert_422(found, path, fragment)


# --------------------------------------------------------------------------------------------
# kubectl ergonomics: category, short names, printer columns, explain


def test_kubectl_get_bindery_and_columns(cluster: Cluster, objects: Objects) -> None:
    ns = objects.namespace
    for kind, body in _bodies(uuid.uuid4().hex[:8]).items():
        if kind in CLUSTER_SCOPED:
            continue
        objects.create(body)
        objects.patch(kind, body["metadata"]["name"], {"status": STATUSES[kind]}, status=True)

    # kubectl resolves a category from its discovery cache without refreshing it on a miss: a
    # cache written before the CRDs were served would not know "bindery". api-resources rewrites it.
    cluster.kubectl("api-resources", "--api-group=bindery.dev")
    listed = cluster.kubectl("get", "bindery", "-n", ns, "-o", "name").stdout.split()
    assert {"agentspec.bindery.dev/a", "resource.bindery.dev/r", "tool.bindery.dev/t"} <= set(
        listed
    )

    agents = cluster.kubectl("get", "bagent", "-n", ns).stdout.splitlines()
    assert agents[0].split() == AGENT_COLUMNS
    # Its status is written by hand here (no controller): no delivery, an empty Synced column.
    assert agents[1].split()[:5] == ["a", "github-issue://example/p/1", "Working", "1/2", "True"]

    resources = cluster.kubectl("get", "bres", "-n", ns).stdout.splitlines()
    assert resources[0].split() == [
        "NAME", "TYPE", "URI", "HOLDER", "READY", "REASON", "DELIVERED", "AGE"
    ]  # fmt: skip
    assert resources[1].split()[:4] == ["r", "git-checkout", "git://example/repo", "a"]
    assert "2/3" in resources[1].split()

    tools = cluster.kubectl("get", "btool", "-n", ns).stdout.splitlines()
    assert tools[0].split() == ["NAME", "SLOTS", "READY", "REASON", "DELIVERED", "AGE"]
    assert tools[1].split()[:3] == ["t", "1", "False"]

    wide = cluster.kubectl("get", "agentspecs.bindery.dev", "-n", ns, "-o", "wide")
    assert "BINDINGS" in wide.stdout.splitlines()[0].split()
    assert "MESSAGE" in wide.stdout.splitlines()[0].split()
    assert "a-bindings" in wide.stdout.splitlines()[1].split()

    # The plurals other projects' CRDs use (kagent's `agents`) are not claimed as short names.
    for foreign in ("agents", "agent"):
        out = cluster.kubectl("get", foreign, "-n", ns, check=False)
        assert out.returncode != 0, f"kubectl get {foreign} resolved to Bindery: {out.stdout}"
        assert "the server doesn't have a resource type" in out.stderr


def test_kubectl_resource_types_columns(cluster: Cluster, objects: Objects) -> None:
    name = f"case-cols-{uuid.uuid4().hex[:8]}"
    objects.create(_rtype(name, parentTypes=["git-checkout", "fs-path"]))
    try:
        for short in ("rtype", "resourcetype", "resourcetypes.bindery.dev"):
            out = cluster.kubectl("get", short, name).stdout.splitlines()
            assert out[0].split() == ["NAME", "PARENTS", "READY", "REASON", "DELIVERED", "AGE"]
            assert out[1].split()[:2] == [name, '["git-checkout","fs-path"]']
        listed = cluster.kubectl("get", "bindery", "-A", "-o", "name").stdout.split()
        assert f"resourcetype.bindery.dev/{name}" in listed
    finally:
        objects.delete("ResourceType", name)


def test_kubectl_explain_teaches_the_model(cluster: Cluster, crds: list[str]) -> None:
    def explain(path: str) -> str:
        return " ".join(cluster.kubectl("explain", path).stdout.split())  # unwrap lines

    out = explain("agentspec.spec.resources")
    assert "KIND: AgentSpec" in out
    assert "GROUP: bindery.dev" in out
    assert "zero or one binding named work" in out
    for name in ("name", "tag", "uri"):
        assert f"{name} <string> -required-" in out
    assert "Compared byte for byte" in out
    assert "Unknown fields are pruned by the API server" in explain("agentspec")
    for path in ("tool.spec.resourceSlots.binding", "resource.spec.uri", "resourcetype.spec"):
        explained = explain(path)
        assert "DESCRIPTION:" in explained
        assert "<empty>" not in explained, f"{path} has no description"
    runtime = explain("agentspec.spec.runtime")
    for shown in (
        "resources <Object>",
        "securityContext <Object>",
        "containerSecurityContext <Object>",
        "serviceAccountName <string>",
        "automountServiceAccountToken <boolean>",
        "nodeSelector <map[string]string>",
        "tolerations <[]Object>",
        "imagePullSecrets <[]Object>",
        "volumes <[]Object>",
        "volumeMounts <[]Object>",
    ):
        assert shown in runtime, shown
    security = explain("agentspec.spec.runtime.securityContext")
    assert "Pod Security restricted" in security
    assert "runAsNonRoot true, seccompProfile RuntimeDefault" in security
    assert "no token mounted" in explain("agentspec.spec.runtime.serviceAccountName")
    assert "No hostPath" in explain("agentspec.spec.runtime.volumes")
    assert "percent-encoded" in explain("resource.spec.uri")
    assert "label-key rule" in explain("resource.spec.attributes")
