"""Pure manifest builders, pinned by golden files.

Golden files live in ``tests/unit/golden/`` and are compared byte for byte with
``builders.canonical()``. After an intended change to a builder, regenerate them with::

    BINDERY_UPDATE_GOLDEN=1 .venv/bin/pytest tests/unit/test_builders.py

and review the diff before committing it.
"""

from __future__ import annotations

import json
import os
import re
from pathlib import Path
from typing import Any

import pytest
from bindery_session.wire import BindingState

from controller.domain import delivery
from controller.domain.launch import Launched, plan_launch, trajectory_hash
from controller.domain.models import (
    API_VERSION,
    AgentObject,
    AgentSpecSpec,
    ObjectMeta,
    Runtime,
    Workspace,
)
from controller.domain.results import AgentResolution, BoundResource, DirectResult
from controller.domain.work import hold_name
from controller.k8s import builders

GOLDEN = Path(__file__).parent / "golden"
UPDATE = os.environ.get("BINDERY_UPDATE_GOLDEN") == "1"

WORK_URI = "github-issue://example/project/123"
LAUNCHED_AT = "2024-05-01T12:00:00Z"
LAUNCH_KEY = "bindery.dev/launch-generation"

RUNTIME = Runtime.model_validate(
    {
        "image": "ghcr.io/example/agent:1.4.2",
        "command": ["/bin/agent"],
        "args": ["--serve", "--port=8080"],
        "env": [{"name": "LOG_LEVEL", "value": "debug"}, {"name": "EMPTY"}],
        "model": "claude-sonnet",
        "instructions": "Fix the issue you are bound to.",
    }
)

AGENT = AgentObject(
    meta=ObjectMeta(
        name="coder",
        namespace="team-a",
        uid="6f1c2a9e-3b1d-4c55-9a7e-0d2f5b8c1e44",
        labels={"team": "a"},
        generation=7,
    ),
    spec=AgentSpecSpec.model_validate(
        {
            "resources": [{"name": "work", "tag": "github-issue", "uri": WORK_URI}],
            "runtime": RUNTIME.model_dump(by_alias=True),
            "relaunchGeneration": 3,
        }
    ),
)

RESOLUTION = AgentResolution(
    agent="team-a/coder",
    direct=[
        DirectResult(
            name="work",
            tag="github-issue",
            uri=WORK_URI,
            state=BindingState.BOUND,
            resource=BoundResource(uri=WORK_URI, type="github-issue", alias="work"),
        )
    ],
)
RENDERED = delivery.render(delivery.bindings_document(AGENT, RESOLUTION, deliver_work=True))

DNS1123_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
DNS1123_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
LABEL_VALUE = re.compile(r"^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$")


def workload(agent: AgentObject = AGENT, **kw: Any) -> dict[str, Any]:
    args: dict[str, Any] = {
        "launch_generation": 3,
        "trajectory_hash": trajectory_hash(RUNTIME),
        "launched_at": LAUNCHED_AT,
        "service_account": "bindery-session",
    }
    args.update(kw)
    return builders.session_workload(agent, RUNTIME, **args)


FULL_RUNTIME = Runtime.model_validate(
    {
        "image": "registry.example.com/agent:2.0",
        "resources": {"requests": {"cpu": "250m", "memory": "512Mi"}, "limits": {"memory": "1Gi"}},
        "securityContext": {"runAsUser": 10001, "fsGroup": 10001},
        "containerSecurityContext": {
            "readOnlyRootFilesystem": True,
            "capabilities": {"add": ["NET_BIND_SERVICE"]},
        },
        "serviceAccountName": "coder-sa",
        "nodeSelector": {"kubernetes.io/arch": "arm64"},
        "tolerations": [
            {"key": "dedicated", "operator": "Equal", "value": "agents", "effect": "NoSchedule"}
        ],
        "imagePullSecrets": [{"name": "registry-creds"}],
        "volumes": [
            {"name": "workspace", "persistentVolumeClaim": {"claimName": "coder-workspace"}},
            {"name": "tmp", "emptyDir": {"sizeLimit": "1Gi"}},
        ],
        "volumeMounts": [
            {"name": "workspace", "mountPath": "/work"},
            {"name": "tmp", "mountPath": "/scratch"},
        ],
    }
)


def full_workload(**kw: Any) -> dict[str, Any]:
    args: dict[str, Any] = {
        "launch_generation": 1,
        "trajectory_hash": trajectory_hash(FULL_RUNTIME),
        "launched_at": LAUNCHED_AT,
    }
    args.update(kw)
    return builders.session_workload(AGENT, FULL_RUNTIME, **args)


WORKSPACE_RUNTIME = Runtime.model_validate(
    {
        "image": "ghcr.io/example/agent:1.4.2",
        "env": [{"name": "BINDERY_WORKSPACE", "value": "/elsewhere"}],
        "workspace": {"size": "10Gi", "storageClassName": "fast", "mountPath": "/home/agent"},
    }
)


def workspace_workload() -> dict[str, Any]:
    return builders.session_workload(
        AGENT,
        WORKSPACE_RUNTIME,
        launch_generation=3,
        trajectory_hash=trajectory_hash(WORKSPACE_RUNTIME),
        launched_at=LAUNCHED_AT,
        service_account="bindery-session",
    )


def pod_of(runtime: Runtime, service_account: str = "") -> dict[str, Any]:
    spec: dict[str, Any] = builders.session_workload(
        AGENT,
        runtime,
        launch_generation=0,
        trajectory_hash="sha256:x",
        launched_at="",
        service_account=service_account,
    )["spec"]["template"]["spec"]
    return spec


def manifests() -> dict[str, dict[str, Any]]:
    return {
        "session_workload.json": workload(),
        "session_workload_full_runtime.json": full_workload(),
        "bindings_config_map.json": builders.bindings_config_map(AGENT, RENDERED),
        "session_workload_workspace.json": workspace_workload(),
        "workspace_claim.json": builders.workspace_claim(
            AGENT, Workspace(size="10Gi", storage_class_name="fast", mount_path="/home/agent")
        ),
        "workspace_claim_retain.json": builders.workspace_claim(
            AGENT,
            Workspace.model_validate({"size": "1Gi", "reclaimPolicy": "Retain"}),
        ),
        "work_hold.json": builders.work_hold(AGENT, WORK_URI),
        "event.json": builders.event(
            {
                "apiVersion": "bindery.dev/v1alpha1",
                "kind": "AgentSpec",
                "metadata": {"name": "coder", "namespace": "team-a", "uid": "coder-uid"},
            },
            reason="WaitingForWork",
            note="work URI 'gh://x' is held by another agent; waiting for team-a/other",
            warning=False,
            instance="bindery-0_1a2b3c4d",
            event_time="2026-12-01T06:00:00.000000Z",
            suffix="0123456789abcdef",
        ),
    }


# ------------------------------------------------------------------------------- golden files


@pytest.mark.parametrize("filename", sorted(manifests()))
def test_golden(filename: str) -> None:
    actual = builders.canonical(manifests()[filename])
    path = GOLDEN / filename
    if UPDATE:
        GOLDEN.mkdir(exist_ok=True)
        path.write_text(actual, encoding="utf-8")
    assert path.exists(), f"{path} is missing; regenerate with BINDERY_UPDATE_GOLDEN=1"
    expected = path.read_text(encoding="utf-8")
    assert actual == expected, (
        f"{filename} differs from its golden file; if the change is intended, regenerate with "
        "BINDERY_UPDATE_GOLDEN=1 and review the diff"
    )


def test_canonical_is_sorted_indented_and_newline_terminated() -> None:
    text = builders.canonical({"b": 1, "a": {"d": 2, "c": 3}})
    assert text == '{\n  "a": {\n    "c": 3,\n    "d": 2\n  },\n  "b": 1\n}\n'


def test_builders_are_deterministic() -> None:
    assert builders.canonical(workload()) == builders.canonical(workload())
    assert manifests() == manifests()


# ------------------------------------------------------------------------------- common metadata


OWNED = sorted(
    f
    for f in manifests()
    if f not in ("event.json", "work_hold.json", "workspace_claim_retain.json")
)


def test_a_work_hold_is_not_garbage_collected_with_its_holder() -> None:
    # Foreground deletion of the holder would otherwise delete the hold before the holder's
    # finalizer withdrew the URI from its delivered bindings.
    hold = builders.work_hold(AGENT, WORK_URI)
    assert "ownerReferences" not in hold["metadata"]
    assert hold["metadata"]["labels"]["app.kubernetes.io/managed-by"] == "bindery"


@pytest.mark.parametrize("filename", OWNED)
def test_owner_reference_and_labels(filename: str) -> None:
    manifest = manifests()[filename]
    md = manifest["metadata"]
    assert md["namespace"] == "team-a"
    assert md["ownerReferences"] == [
        {
            "apiVersion": API_VERSION,
            "kind": "AgentSpec",
            "name": "coder",
            "uid": AGENT.meta.uid,
            "controller": True,
            "blockOwnerDeletion": True,
        }
    ]
    assert md["labels"]["app.kubernetes.io/managed-by"] == "bindery"
    assert "team" not in md["labels"]  # user labels on the agent are not copied


def test_component_labels() -> None:
    m = manifests()
    assert m["session_workload.json"]["metadata"]["labels"] == {
        "app.kubernetes.io/managed-by": "bindery",
        "bindery.dev/agent": "coder",
        "app.kubernetes.io/component": "session",
    }
    assert m["bindings_config_map.json"]["metadata"]["labels"] == {
        "app.kubernetes.io/managed-by": "bindery",
        "bindery.dev/agent": "coder",
        "app.kubernetes.io/component": "bindings",
    }
    assert m["work_hold.json"]["metadata"]["labels"]["app.kubernetes.io/component"] == "work-hold"


# ------------------------------------------------------------------------------- ConfigMap


def test_config_map_carries_the_rendered_document_verbatim() -> None:
    cm = builders.bindings_config_map(AGENT, RENDERED)
    assert cm["apiVersion"] == "v1"
    assert cm["kind"] == "ConfigMap"
    assert cm["metadata"]["name"] == "coder-bindings" == builders.bindings_config_map_name("coder")
    assert cm["data"] == {"bindings.json": RENDERED}


# ------------------------------------------------------------------------------- work hold


def test_work_hold_lease() -> None:
    lease = builders.work_hold(AGENT, WORK_URI)
    assert lease["apiVersion"] == "coordination.k8s.io/v1"
    assert lease["kind"] == "Lease"
    assert lease["metadata"]["name"] == hold_name(WORK_URI)
    assert lease["metadata"]["annotations"] == {
        "bindery.dev/uri": WORK_URI,
        "bindery.dev/holder-uid": AGENT.meta.uid,
    }
    assert lease["spec"] == {"holderIdentity": "team-a/coder"}


def test_two_agents_race_for_one_hold_name() -> None:
    other = AGENT.model_copy(
        update={"meta": ObjectMeta(name="reviewer", namespace="team-a", uid="u-2")}
    )
    a = builders.work_hold(AGENT, WORK_URI)
    b = builders.work_hold(other, WORK_URI)
    assert a["metadata"]["name"] == b["metadata"]["name"]
    assert a["spec"] != b["spec"]
    assert builders.work_hold(AGENT, WORK_URI + "/")["metadata"]["name"] != a["metadata"]["name"]


# ------------------------------------------------------------------------------- session


def test_session_is_a_stateful_set_of_one() -> None:
    """A StatefulSet never runs a replacement pod before the old one is gone."""
    d = workload()
    assert d["apiVersion"] == "apps/v1"
    assert d["kind"] == "StatefulSet"
    assert d["metadata"]["name"] == "coder-session" == builders.session_name("coder")
    assert d["spec"]["replicas"] == 1
    # Parallel: a rolling update must replace a pod that is not Ready (a relaunch is how a
    # crash-looping session is fixed); one replica with one fixed pod name still means one pod.
    assert d["spec"]["podManagementPolicy"] == "Parallel"
    assert d["spec"]["updateStrategy"] == {"type": "RollingUpdate"}


def test_selector_matches_template_labels() -> None:
    d = workload()
    selector = d["spec"]["selector"]["matchLabels"]
    labels = d["spec"]["template"]["metadata"]["labels"]
    assert selector
    assert all(labels[k] == v for k, v in selector.items())


def test_template_carries_launch_identity() -> None:
    d = workload()
    annotations = d["spec"]["template"]["metadata"]["annotations"]
    assert annotations["bindery.dev/launch-generation"] == "3"
    assert annotations["bindery.dev/trajectory-hash"] == trajectory_hash(RUNTIME)
    assert annotations["bindery.dev/launched-at"] == LAUNCHED_AT
    assert d["metadata"]["annotations"] == annotations


def test_template_carries_nothing_derived_from_bindings() -> None:
    d = workload()
    template = json.dumps(d["spec"]["template"], sort_keys=True)
    assert RENDERED.strip() not in template
    assert json.dumps(RENDERED) not in template  # not even as an escaped string value
    assert WORK_URI not in template  # nor the bound URI from spec.resources
    assert "github-issue" not in template


def test_template_is_independent_of_bindings() -> None:
    """Changing bindings never rolls the pod: the template only depends on runtime + launch."""
    rebound = AGENT.model_copy(
        update={
            "spec": AGENT.spec.model_copy(
                update={"resources": [], "tools": [], "resource_selector": None}
            )
        }
    )
    assert workload(rebound)["spec"]["template"] == workload()["spec"]["template"]


def test_bindings_file_is_mounted_and_announced() -> None:
    d = workload()
    pod = d["spec"]["template"]["spec"]
    (container,) = pod["containers"]
    env = {e["name"]: e["value"] for e in container["env"]}
    path = env["BINDERY_BINDINGS_FILE"]
    assert path == f"{builders.BINDINGS_MOUNT}/{delivery.BINDINGS_FILE}"
    (mount,) = container["volumeMounts"]
    assert path.startswith(mount["mountPath"] + "/")
    assert mount["readOnly"] is True
    (volume,) = [v for v in pod["volumes"] if v["name"] == mount["name"]]
    assert volume["configMap"]["name"] == builders.bindings_config_map_name("coder")


def test_container_runs_the_runtime() -> None:
    pod = workload()["spec"]["template"]["spec"]
    (container,) = pod["containers"]
    assert container["image"] == RUNTIME.image
    assert container["command"] == ["/bin/agent"]
    assert container["args"] == ["--serve", "--port=8080"]
    assert container["env"] == [
        {"name": "BINDERY_BINDINGS_FILE", "value": "/var/run/bindery/bindings.json"},
        {"name": "BINDERY_MODEL", "value": "claude-sonnet"},
        {"name": "BINDERY_INSTRUCTIONS", "value": "Fix the issue you are bound to."},
        {"name": "LOG_LEVEL", "value": "debug"},
        {"name": "EMPTY", "value": ""},
    ]
    assert pod["serviceAccountName"] == "bindery-session"


def test_minimal_runtime_omits_optional_fields() -> None:
    d = builders.session_workload(
        AGENT, Runtime(image="img"), launch_generation=0, trajectory_hash="sha256:x", launched_at=""
    )
    pod = d["spec"]["template"]["spec"]
    (container,) = pod["containers"]
    assert "command" not in container
    assert "args" not in container
    assert [e["name"] for e in container["env"]] == ["BINDERY_BINDINGS_FILE"]
    assert "serviceAccountName" not in pod


# ------------------------------------------------------------------------------- pod security


RESTRICTED_POD = {"runAsNonRoot": True, "seccompProfile": {"type": "RuntimeDefault"}}
RESTRICTED_CONTAINER = {"allowPrivilegeEscalation": False, "capabilities": {"drop": ["ALL"]}}


def test_a_runtime_without_settings_passes_pod_security_restricted() -> None:
    """What Pod Security ``restricted`` checks, on the pod a bare runtime renders."""
    pod = pod_of(Runtime(image="img"))
    (container,) = pod["containers"]
    assert pod["securityContext"] == RESTRICTED_POD
    assert container["securityContext"] == RESTRICTED_CONTAINER
    assert all("hostPath" not in v for v in pod["volumes"])
    assert not {"hostNetwork", "hostPID", "hostIPC"} & set(pod)


def test_user_settings_merge_over_the_restricted_defaults() -> None:
    pod = pod_of(FULL_RUNTIME)
    (container,) = pod["containers"]
    assert pod["securityContext"] == {**RESTRICTED_POD, "runAsUser": 10001, "fsGroup": 10001}
    assert container["securityContext"] == {
        "allowPrivilegeEscalation": False,
        "capabilities": {"drop": ["ALL"], "add": ["NET_BIND_SERVICE"]},
        "readOnlyRootFilesystem": True,
    }


def test_a_setting_replaces_its_default() -> None:
    runtime = Runtime.model_validate(
        {
            "image": "img",
            "securityContext": {"runAsNonRoot": False, "seccompProfile": {"type": "Unconfined"}},
            "containerSecurityContext": {
                "allowPrivilegeEscalation": True,
                "capabilities": {"drop": []},
            },
        }
    )
    pod = pod_of(runtime)
    assert pod["securityContext"] == {
        "runAsNonRoot": False,
        "seccompProfile": {"type": "Unconfined"},
    }
    assert pod["containers"][0]["securityContext"] == {
        "allowPrivilegeEscalation": True,
        "capabilities": {"drop": []},
    }


@pytest.mark.parametrize(
    "context",
    [{"privileged": True}, {"capabilities": {"add": ["SYS_ADMIN"]}}],
    ids=["privileged", "sys-admin"],
)
def test_no_escalation_default_where_the_api_server_would_refuse_it(
    context: dict[str, Any],
) -> None:
    """allowPrivilegeEscalation=false next to privileged or SYS_ADMIN is an invalid pod."""
    runtime = Runtime.model_validate({"image": "img", "containerSecurityContext": context})
    security = pod_of(runtime)["containers"][0]["securityContext"]
    assert "allowPrivilegeEscalation" not in security
    assert security["capabilities"]["drop"] == ["ALL"]


def test_resources_and_scheduling_are_passed_through() -> None:
    pod = pod_of(FULL_RUNTIME)
    assert pod["containers"][0]["resources"] == {
        "requests": {"cpu": "250m", "memory": "512Mi"},
        "limits": {"memory": "1Gi"},
    }
    assert pod["nodeSelector"] == {"kubernetes.io/arch": "arm64"}
    assert pod["tolerations"] == [
        {"key": "dedicated", "operator": "Equal", "value": "agents", "effect": "NoSchedule"}
    ]
    assert pod["imagePullSecrets"] == [{"name": "registry-creds"}]


def test_volumes_follow_the_bindings_volume() -> None:
    pod = pod_of(FULL_RUNTIME)
    assert pod["volumes"] == [
        {"name": "bindings", "configMap": {"name": "coder-bindings"}},
        {"name": "workspace", "persistentVolumeClaim": {"claimName": "coder-workspace"}},
        {"name": "tmp", "emptyDir": {"sizeLimit": "1Gi"}},
    ]
    assert pod["containers"][0]["volumeMounts"] == [
        {"name": "bindings", "mountPath": "/var/run/bindery", "readOnly": True},
        {"name": "workspace", "mountPath": "/work"},
        {"name": "tmp", "mountPath": "/scratch"},
    ]


@pytest.mark.parametrize(
    "empty",
    [{"resources": {}}, {"resources": {"requests": {}}}, {"securityContext": {}}],
    ids=json.dumps,
)
def test_empty_settings_render_as_absent(empty: dict[str, Any]) -> None:
    """Same pod as without them, as their trajectory hash is the same (test_launch.py)."""
    assert pod_of(Runtime.model_validate({"image": "img", **empty})) == pod_of(Runtime(image="img"))


def test_integer_quantities_stay_integers() -> None:
    runtime = Runtime.model_validate({"image": "img", "resources": {"limits": {"cpu": 2}}})
    assert pod_of(runtime)["containers"][0]["resources"] == {"limits": {"cpu": 2}}


# ------------------------------------------------------------------------------- service account


def test_no_service_account_named_no_token() -> None:
    pod = pod_of(Runtime(image="img"))
    assert "serviceAccountName" not in pod
    assert pod["automountServiceAccountToken"] is False


def test_a_service_account_named_by_the_runtime_gets_its_token_as_it_says() -> None:
    """Unset automount: the ServiceAccount's own automountServiceAccountToken decides."""
    pod = pod_of(FULL_RUNTIME, service_account="installation-sa")
    assert pod["serviceAccountName"] == "coder-sa"  # the runtime's wins over the installation's
    assert "automountServiceAccountToken" not in pod


def test_the_installation_service_account_is_named_too() -> None:
    pod = pod_of(Runtime(image="img"), service_account="installation-sa")
    assert pod["serviceAccountName"] == "installation-sa"
    assert "automountServiceAccountToken" not in pod


@pytest.mark.parametrize(("account", "automount"), [("", True), ("sa", False), ("sa", True)])
def test_the_runtime_decides_the_token_when_it_says(account: str, automount: bool) -> None:
    runtime = Runtime.model_validate(
        {"image": "img", "serviceAccountName": account, "automountServiceAccountToken": automount}
    )
    assert pod_of(runtime)["automountServiceAccountToken"] is automount


# ------------------------------------------------------------------------------- launched_from


def test_launched_from_reads_back_what_session_workload_wrote() -> None:
    assert builders.launched_from(workload()) == Launched(3, trajectory_hash(RUNTIME), LAUNCHED_AT)
    assert builders.launched_from(
        workload(launch_generation=0, trajectory_hash="sha256:abc", launched_at="")
    ) == Launched(0, "sha256:abc", "")


def test_launched_from_feeds_plan_launch_without_relaunching() -> None:
    """A restarted controller adopts the session as found: no relaunch, no drift."""
    read = builders.launched_from(workload())
    assert read is not None
    plan = plan_launch(RUNTIME, 3, read)
    assert plan.action.value == "Keep"
    assert not plan.drift


def test_launched_from_ignores_workload_metadata_annotations() -> None:
    """The pod template is what runs; the object's own annotations are not the source."""
    d = workload()
    d["metadata"]["annotations"]["bindery.dev/launch-generation"] = "99"
    read = builders.launched_from(d)
    assert read is not None
    assert read.generation == 3


@pytest.mark.parametrize(
    "body",
    [
        {},
        {"spec": None},
        {"spec": {}},
        {"spec": {"template": None}},
        {"spec": {"template": {"metadata": None}}},
        {"spec": {"template": {"metadata": {"annotations": None}}}},
        {"spec": {"template": {"metadata": {"annotations": {}}}}},
        {"spec": {"template": {"metadata": {"annotations": {"other": "1"}}}}},
        {"spec": {"template": {"metadata": {"annotations": {LAUNCH_KEY: ""}}}}},
        {"spec": {"template": {"metadata": {"annotations": {LAUNCH_KEY: "three"}}}}},
        {"spec": {"template": {"metadata": {"annotations": {LAUNCH_KEY: "1.5"}}}}},
    ],
)
def test_launched_from_missing_or_garbage(body: dict[str, Any]) -> None:
    assert builders.launched_from(body) is None


def test_launched_from_defaults_missing_hash_and_time() -> None:
    body = {"spec": {"template": {"metadata": {"annotations": {LAUNCH_KEY: "2"}}}}}
    assert builders.launched_from(body) == Launched(2, "", "")


# ------------------------------------------------------------------------------- long names


LONG = "a" + "-b" * 31  # 63 characters: the longest AgentSpec name the CRD admits


def long_agent(name: str) -> AgentObject:
    return AGENT.model_copy(update={"meta": ObjectMeta(name=name, namespace="team-a", uid="u")})


def test_long_name_is_the_longest_admitted_agent_name() -> None:
    """The AgentSpec CRD admits DNS-1123 labels only (<= 63), so the name fits in a label."""
    assert len(LONG) == 63
    assert DNS1123_SUBDOMAIN.match(LONG)


@pytest.mark.parametrize("name", ["a" * 63, LONG])
def test_owned_objects_are_valid_for_any_admitted_agent_name(name: str) -> None:
    """Every label value must be <= 63 characters and every owned object name <= 253."""
    agent = long_agent(name)
    for manifest in (
        builders.bindings_config_map(agent, RENDERED),
        workload(agent),
        builders.work_hold(agent, WORK_URI),
    ):
        md = manifest["metadata"]
        assert len(md["name"]) <= 253, md["name"]
        assert DNS1123_SUBDOMAIN.match(md["name"]), md["name"]
        for key, value in md["labels"].items():
            assert len(value) <= 63, f"label {key}={value!r} is longer than 63"
            assert LABEL_VALUE.match(value), f"label {key}={value!r}"
        if manifest["kind"] == "StatefulSet":
            for value in manifest["spec"]["selector"]["matchLabels"].values():
                assert len(value) <= 63


# ------------------------------------------------------------------------------- workspace


def test_the_workspace_claim_is_mounted_in_the_runtime_container_only() -> None:
    pod = workspace_workload()["spec"]["template"]["spec"]
    claim = {"claimName": "coder-workspace"}
    assert {"name": "bindery-workspace", "persistentVolumeClaim": claim} in pod["volumes"]
    agent_container = pod["containers"][0]
    assert {"name": "bindery-workspace", "mountPath": "/home/agent"} in agent_container[
        "volumeMounts"
    ]
    env = [e for e in agent_container["env"] if e["name"] == "BINDERY_WORKSPACE"]
    assert env == [{"name": "BINDERY_WORKSPACE", "value": "/home/agent"}]  # the user's is not
    for side in pod.get("initContainers", []):
        assert all(m["name"] != "bindery-workspace" for m in side.get("volumeMounts", []))
    assert "volumeClaimTemplates" not in workspace_workload()["spec"]


def test_a_retained_claim_has_no_owner_and_names_its_agent() -> None:
    claim = manifests()["workspace_claim_retain.json"]
    assert "ownerReferences" not in claim["metadata"]
    assert claim["metadata"]["labels"]["bindery.dev/agent"] == "coder"
    assert claim["metadata"]["labels"]["app.kubernetes.io/component"] == "workspace"
    assert "storageClassName" not in claim["spec"]  # the cluster's default class


def test_only_the_workspace_mount_path_is_part_of_the_trajectory() -> None:
    def with_workspace(**ws: Any) -> Runtime:
        return Runtime.model_validate({"image": "x", "workspace": {"size": "1Gi", **ws}})

    base = trajectory_hash(with_workspace())
    assert trajectory_hash(with_workspace(size="20Gi")) == base
    assert trajectory_hash(with_workspace(storageClassName="fast")) == base
    assert trajectory_hash(with_workspace(reclaimPolicy="Retain")) == base
    assert trajectory_hash(with_workspace(mountPath="/data")) != base
    assert trajectory_hash(Runtime.model_validate({"image": "x"})) != base


def test_the_delivery_sidecar_keeps_its_own_user_under_a_root_pod() -> None:
    """A runtime that runs as root (a pod-level runAsUser 0) must not pass that user on to the
    sidecar: it runs as the image's non-root user, which its runAsNonRoot then accepts."""
    runtime = Runtime.model_validate(
        {
            **RUNTIME.model_dump(by_alias=True, exclude_none=True),
            "securityContext": {"runAsUser": 0, "runAsNonRoot": False},
        }
    )
    d = builders.session_workload(
        AGENT,
        runtime,
        launch_generation=3,
        trajectory_hash=trajectory_hash(runtime),
        launched_at=LAUNCHED_AT,
        delivery=builders.SessionDelivery(image="localhost/bindery:dev"),
    )
    pod = d["spec"]["template"]["spec"]
    assert pod["securityContext"]["runAsUser"] == 0
    (sidecar,) = [c for c in pod["initContainers"] if c["name"] == builders.DELIVERY_CONTAINER]
    assert sidecar["securityContext"]["runAsNonRoot"] is True
    assert sidecar["securityContext"]["runAsUser"] == builders.SIDECAR_UID != 0
