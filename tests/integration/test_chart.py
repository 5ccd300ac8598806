"""The Helm chart against the real local API server.

- `helm lint --strict` passes for the main value combinations, and the values schema rejects
  unknown keys, globbed namespaces and several replicas without leader election.
- What `helm template` renders is accepted by the API server (`kubectl apply --dry-run=server`,
  strict field validation) for the default values, watchNamespaces, HA and the starter
  ResourceTypes; a real `helm install` and `helm uninstall` work.
- The RBAC is exactly what the controller calls: the rendered rules are pinned, every kind the
  controller's API seam names is covered, `kubectl auth can-i` as the ServiceAccount allows each
  needed call and refuses wider ones, and the real controller, run with a token of that
  ServiceAccount, takes the examples through Ready, holds, a work move, relaunch, session
  removal and deletion without a single refusal.
- With HA, two replicas under that ServiceAccount elect one leader on the chart's Lease: one
  reconciles, the other stands by.
"""

from __future__ import annotations

import json
import os
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml

from controller.domain.work import hold_name
from controller.k8s import api
from harness.cluster import ensure_binaries
from tests.integration.kube import apply_examples, get, must_get, ready, state, wait_status
from tests.support import REPO_ROOT, Cluster, ControllerProcess, wait_for

pytestmark = pytest.mark.integration

CHART = REPO_ROOT / "helm" / "bindery"
RBAC_KINDS = {"ServiceAccount", "Role", "RoleBinding", "ClusterRole", "ClusterRoleBinding"}

Rules = dict[tuple[str, str], set[str]]
"""(apiGroup, resource) -> verbs."""

OWNED = ("get", "list", "watch", "create", "patch", "delete")
"""Verbs on a kind of object the controller makes per agent, keeps as it wants and deletes."""

# The rules the controller needs, and nothing else (see controller/reconcile/ and
# controller/k8s/api.py for the calls, and the comments in helm/bindery/templates/_helpers.tpl).
NAMESPACED_RULES: Rules = {
    ("bindery.dev", "resources"): {"get", "list", "watch"},
    ("bindery.dev", "tools"): {"get", "list", "watch"},
    ("bindery.dev", "resourcegrants"): {"get", "list", "watch"},
    ("bindery.dev", "agentspecs"): {"get", "list", "watch", "patch"},
    ("bindery.dev", "resources/status"): {"patch"},
    ("bindery.dev", "tools/status"): {"patch"},
    ("bindery.dev", "agentspecs/status"): {"patch"},
    ("bindery.dev", "resourcegrants/status"): {"patch"},
    ("bindery.dev", "agentspecs/finalizers"): {"update"},
    ("", "configmaps"): {"get", "list", "watch", "create", "patch"},
    ("apps", "statefulsets"): {"get", "list", "watch", "create", "patch", "delete"},
    ("", "persistentvolumeclaims"): {"get", "list", "watch", "create", "patch"},
    ("coordination.k8s.io", "leases"): {"get", "list", "watch", "create", "patch", "delete"},
    ("", "serviceaccounts"): {*OWNED},
    ("rbac.authorization.k8s.io", "roles"): {*OWNED},
    ("rbac.authorization.k8s.io", "rolebindings"): {*OWNED},
    ("", "pods"): {"get", "list", "watch"},
    ("events.k8s.io", "events"): {"create"},
    ("", "events"): {"create", "list"},
}
CLUSTER_RULES: Rules = {
    ("bindery.dev", "resourcetypes"): {"get", "list", "watch"},
    ("bindery.dev", "resourcetypes/status"): {"patch"},
    ("apiextensions.k8s.io", "customresourcedefinitions"): {"list", "watch"},
    # Their labels, for ResourceGrants' namespaceSelector (and kopf's following of watched ones).
    ("", "namespaces"): {"list", "watch"},
    ("storage.k8s.io", "storageclasses"): {"get"},
}
NAMESPACE = "@namespace"
"""In a chart_rbac parameter: the test's namespace."""


# ------------------------------------------------------------------------------------ helpers


@pytest.fixture(scope="module")
def helm_bin() -> Path:
    """helm from the local control-plane build (no cluster needed to lint or render)."""
    return ensure_binaries() / "helm"


def helm(
    helm_path: Path, *args: str, kubeconfig: Path | None = None, check: bool = True
) -> subprocess.CompletedProcess[str]:
    env = {**os.environ}
    if kubeconfig is not None:
        env["KUBECONFIG"] = str(kubeconfig)
    proc = subprocess.run(
        [str(helm_path), *args], capture_output=True, text=True, check=False, env=env
    )
    if check and proc.returncode != 0:
        raise AssertionError(f"helm {' '.join(args)} exited {proc.returncode}:\n{proc.stderr}")
    return proc


def sets(values: dict[str, Any]) -> list[str]:
    """--set-json arguments for a flat {dotted.key: value} dict."""
    out: list[str] = []
    for key, value in values.items():
        out += ["--set-json", f"{key}={json.dumps(value)}"]
    return out


def render(
    helm_path: Path, release: str, namespace: str, values: dict[str, Any] | None = None
) -> list[dict[str, Any]]:
    proc = helm(
        helm_path, "template", release, str(CHART), "--namespace", namespace,
        *sets(values or {}),
    )  # fmt: skip
    return [doc for doc in yaml.safe_load_all(proc.stdout) if doc]


def only(objects: list[dict[str, Any]], kind: str) -> list[dict[str, Any]]:
    return [o for o in objects if o["kind"] == kind]


SESSION_RESOLVER_RULES: Rules = {
    ("bindery.dev", "resources"): {"get", "list", "watch"},
    ("bindery.dev", "resourcetypes"): {"get", "list", "watch"},
}
"""What code in a session reads to resolve a deferred parameter slot (controller/session)."""
TYPES_RULES: Rules = {("bindery.dev", "resourcetypes"): {"get", "list", "watch"}}


def _for_sessions(obj: dict[str, Any]) -> bool:
    labels = obj["metadata"].get("labels") or {}
    return labels.get("app.kubernetes.io/component") == "session-resolver"


def controller_cluster_roles(objects: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The controller's ClusterRoles (not those for agent sessions or for people)."""
    return [
        o
        for o in only(objects, "ClusterRole")
        if not _for_sessions(o)
        and o["metadata"]["labels"].get("app.kubernetes.io/component") != "user-rbac"
    ]


def session_resolver_roles(objects: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The ClusterRoles for agent sessions: the one namespaces bind, the ResourceTypes one."""
    return [o for o in only(objects, "ClusterRole") if _for_sessions(o)]


def rules_of(role: dict[str, Any]) -> Rules:
    rules: Rules = {}
    for rule in role["rules"]:
        assert set(rule) == {"apiGroups", "resources", "verbs"}, rule
        for group in rule["apiGroups"]:
            for resource in rule["resources"]:
                rules.setdefault((group, resource), set()).update(rule["verbs"])
    return rules


def container_args(objects: list[dict[str, Any]]) -> list[str]:
    (deployment,) = only(objects, "Deployment")
    args: list[str] = deployment["spec"]["template"]["spec"]["containers"][0]["args"]
    return args


def to_yaml(objects: list[dict[str, Any]]) -> str:
    return "\n---\n".join(yaml.safe_dump(o) for o in objects)


def leader_election_rules(lease: str) -> list[dict[str, Any]]:
    return [
        {"apiGroups": ["coordination.k8s.io"], "resources": ["leases"], "verbs": ["create"]},
        {
            "apiGroups": ["coordination.k8s.io"],
            "resources": ["leases"],
            "resourceNames": [lease],
            "verbs": ["get", "patch"],
        },
    ]


# ------------------------------------------------------------------------------- lint, schema

LINT_VARIANTS: dict[str, dict[str, Any]] = {
    "defaults": {},
    "watch-namespaces": {"watchNamespaces": ["team-a", "team-b"]},
    "ha": {"ha.enabled": True, "replicas": 3},
    "ha-watch-namespaces": {"ha.enabled": True, "replicas": 2, "watchNamespaces": ["team-a"]},
    "everything-optional": {
        "defaultResourceTypes.enabled": True,
        "metrics.serviceMonitor.enabled": True,
        "metrics.serviceMonitor.scrapeTimeout": "10s",
        "metrics.prometheusRule.enabled": True,
        "metrics.dashboard.enabled": True,
        "sessionServiceAccount": "agents",
        "podSecurityContext.runAsUser": None,
        "imagePullSecrets": [{"name": "registry"}],
        "tolerations": [{"key": "dedicated", "operator": "Exists", "effect": "NoSchedule"}],
    },
    "no-metrics-no-rbac": {"metrics.enabled": False, "rbac.create": False, "rbac.userRoles": False},
}


@pytest.mark.parametrize("variant", sorted(LINT_VARIANTS))
def test_helm_lint_passes(helm_bin: Path, variant: str) -> None:
    proc = helm(helm_bin, "lint", "--strict", str(CHART), *sets(LINT_VARIANTS[variant]))
    assert "0 chart(s) failed" in proc.stdout, proc.stdout


@pytest.mark.parametrize(
    "key", ["bogus", "image.bogus", "metrics.serviceMonitor.bogus", "ha.leasename"]
)
def test_the_values_schema_rejects_unknown_keys(helm_bin: Path, key: str) -> None:
    leaf = key.rsplit(".", 1)[-1]
    for command in ("lint", "template"):
        proc = helm(helm_bin, command, str(CHART), "--set", f"{key}=1", check=False)
        out = proc.stdout + proc.stderr
        assert proc.returncode != 0, f"helm {command} accepted the unknown key {key}"
        assert f"additional properties '{leaf}' not allowed" in out, out


def test_the_values_schema_rejects_globbed_namespaces(helm_bin: Path) -> None:
    proc = helm(helm_bin, "template", str(CHART), *sets({"watchNamespaces": ["team-*"]}),
                check=False)  # fmt: skip
    assert proc.returncode != 0
    assert "/watchNamespaces/0" in proc.stderr, proc.stderr


def test_the_sweep_period_is_a_value_and_must_be_positive(helm_bin: Path) -> None:
    args = container_args(render(helm_bin, "bindery", "ops", {"resyncSeconds": 600}))
    assert "--resync-seconds=600" in args
    for bad in ("0", "-5"):
        proc = helm(helm_bin, "template", str(CHART), "--set", f"resyncSeconds={bad}",
                    check=False)  # fmt: skip
        assert proc.returncode != 0, f"the chart accepted resyncSeconds={bad}"
        assert "/resyncSeconds" in proc.stderr, proc.stderr


def test_several_replicas_need_ha(helm_bin: Path) -> None:
    proc = helm(helm_bin, "template", str(CHART), "--set", "replicas=2", check=False)
    assert proc.returncode != 0
    assert "replicas=2 needs ha.enabled=true" in proc.stderr, proc.stderr


def test_the_work_scope_is_a_value_and_its_holds_namespace_must_be_watched(
    helm_bin: Path,
) -> None:
    args = container_args(render(helm_bin, "bindery", "ops", {"workScope": "cluster"}))
    assert "--work-scope=cluster" in args
    assert "--work-hold-namespace=ops" in args
    watched = {"workScope": "cluster", "watchNamespaces": ["ops", "team-a"]}
    assert "--work-scope=cluster" in container_args(render(helm_bin, "bindery", "ops", watched))
    proc = helm(helm_bin, "template", str(CHART), "--namespace", "ops", "--set",
                "workScope=cluster", "--set", "watchNamespaces={team-a}", check=False)  # fmt: skip
    assert proc.returncode != 0
    assert "add it to watchNamespaces" in proc.stderr, proc.stderr
    proc = helm(helm_bin, "template", str(CHART), "--set", "workScope=teams", check=False)
    assert proc.returncode != 0
    assert "workScope" in proc.stderr, proc.stderr


# ------------------------------------------------------------------------------- rendering


def test_default_rendering_is_one_standalone_restricted_controller(helm_bin: Path) -> None:
    objects = render(helm_bin, "bindery", "bindery-system")
    kinds = sorted(o["kind"] for o in objects)
    assert kinds == [
        "ClusterRole", "ClusterRole", "ClusterRole", "ClusterRole", "ClusterRole",
        "ClusterRoleBinding", "ClusterRoleBinding", "Deployment", "Service", "ServiceAccount",
        # work holds, acks, session access
        "ValidatingAdmissionPolicy", "ValidatingAdmissionPolicy", "ValidatingAdmissionPolicy",
        "ValidatingAdmissionPolicyBinding", "ValidatingAdmissionPolicyBinding",
        "ValidatingAdmissionPolicyBinding",
    ]  # fmt: skip
    assert len(controller_cluster_roles(objects)) == 1  # the others: for people and sessions
    assert container_args(objects) == [
        "--liveness=http://0.0.0.0:8080/healthz",
        "--metrics-port=9090",
        "--standalone",
        "--log-level=INFO",
        "--resync-seconds=30",
        "--work-scope=namespace",
        "--work-hold-namespace=bindery-system",
    ]
    (deployment,) = only(objects, "Deployment")
    assert deployment["spec"]["replicas"] == 1
    assert deployment["spec"]["strategy"] == {"type": "Recreate"}
    pod = deployment["spec"]["template"]["spec"]
    assert pod["securityContext"]["runAsNonRoot"] is True
    assert pod["securityContext"]["seccompProfile"] == {"type": "RuntimeDefault"}
    (container,) = pod["containers"]
    assert container["securityContext"] == {
        "allowPrivilegeEscalation": False,
        "privileged": False,
        "readOnlyRootFilesystem": True,
        "runAsNonRoot": True,
        "capabilities": {"drop": ["ALL"]},
        "seccompProfile": {"type": "RuntimeDefault"},
    }
    assert container["livenessProbe"]["httpGet"] == {"path": "/healthz", "port": "health"}
    ports = {p["name"]: p["containerPort"] for p in container["ports"]}
    assert ports == {"health": 8080, "metrics": 9090}
    env = {e["name"]: e for e in container["env"]}
    assert env["POD_NAME"]["valueFrom"] == {"fieldRef": {"fieldPath": "metadata.name"}}
    (service,) = only(objects, "Service")
    assert service["spec"]["ports"][0]["targetPort"] == "metrics"


def test_watch_namespaces_become_repeated_flags_and_roles(helm_bin: Path) -> None:
    objects = render(helm_bin, "bindery", "ops", {"watchNamespaces": ["team-a", "team-b"]})
    args = container_args(objects)
    assert args[:2] == ["--namespace=team-a", "--namespace=team-b"]
    roles = {r["metadata"]["namespace"]: r for r in only(objects, "Role")}
    assert sorted(roles) == ["team-a", "team-b"]
    bindings = only(objects, "RoleBinding")
    assert sorted(b["metadata"]["namespace"] for b in bindings) == ["team-a", "team-b"]
    for binding in bindings:
        assert binding["subjects"] == [
            {"kind": "ServiceAccount", "name": "bindery", "namespace": "ops"}
        ]


def test_ha_renders_leader_election_a_disruption_budget_and_a_rolling_update(
    helm_bin: Path,
) -> None:
    objects = render(helm_bin, "bindery", "ops", {"ha.enabled": True, "replicas": 2})
    args = container_args(objects)
    assert "--standalone" not in args
    assert args[2:5] == [
        "--leader-elect",
        "--leader-election-namespace=ops",
        "--leader-election-id=bindery",
    ]
    (pdb,) = only(objects, "PodDisruptionBudget")
    assert pdb["spec"]["minAvailable"] == 1
    (deployment,) = only(objects, "Deployment")
    assert deployment["spec"]["strategy"]["type"] == "RollingUpdate"
    env = {e["name"]: e for e in deployment["spec"]["template"]["spec"]["containers"][0]["env"]}
    assert env["POD_NAMESPACE"]["valueFrom"] == {"fieldRef": {"fieldPath": "metadata.namespace"}}
    (role,) = only(objects, "Role")
    assert (role["metadata"]["name"], role["metadata"]["namespace"]) == (
        "bindery-leader-election",
        "ops",
    )
    assert role["rules"] == leader_election_rules("bindery")
    (binding,) = only(objects, "RoleBinding")
    assert binding["roleRef"]["name"] == "bindery-leader-election"
    assert not only(render(helm_bin, "bindery", "ops"), "PodDisruptionBudget")


def test_default_resource_types_match_the_examples(helm_bin: Path) -> None:
    assert not only(render(helm_bin, "bindery", "ops"), "ResourceType"), "opt-in only"
    rendered = only(
        render(helm_bin, "bindery", "ops", {"defaultResourceTypes.enabled": True}),
        "ResourceType",
    )
    examples = [
        doc
        for doc in yaml.safe_load_all(
            (REPO_ROOT / "examples" / "manifests" / "00-resourcetypes.yaml").read_text()
        )
        if doc
    ]

    def shape(objs: list[dict[str, Any]]) -> dict[str, tuple[list[str], list[str]]]:
        return {
            o["metadata"]["name"]: (
                sorted(o["spec"].get("parentTypes") or []),
                sorted(o["spec"].get("uriSchemes") or []),
            )
            for o in objs
        }

    assert shape(rendered) == shape(examples)
    assert sorted(shape(rendered)) == sorted([
        "github-issue", "github-pull-request", "worktree", "git-checkout", "fs-directory",
        "axe-worklog", "ding",
    ])  # fmt: skip
    assert all(o["spec"]["description"] for o in rendered)


def test_rbac_is_exactly_what_the_controller_calls(helm_bin: Path) -> None:
    objects = render(helm_bin, "bindery", "ops")
    (cluster_role,) = controller_cluster_roles(objects)
    rules = rules_of(cluster_role)
    assert rules == {**CLUSTER_RULES, **NAMESPACED_RULES}
    for (group, resource), verbs in rules.items():
        assert "*" not in group + resource
        assert "*" not in verbs

    # Every kind the controller's API seam knows is covered; a new one needs a rule.
    kinds = [v for v in vars(api).values() if isinstance(v, api.Endpoint)]
    assert kinds
    for kind in kinds:
        assert (kind.group, kind.plural) in rules, f"no rule for {kind}"

    scoped = render(helm_bin, "bindery", "ops", {"watchNamespaces": ["team-a"]})
    (small,) = controller_cluster_roles(scoped)
    assert rules_of(small) == CLUSTER_RULES
    (role,) = only(scoped, "Role")
    assert rules_of(role) == NAMESPACED_RULES

    # HA adds only the leader-election Role; the other rules are the same.
    ha = render(helm_bin, "bindery", "ops", {"ha.enabled": True, "replicas": 2})
    (ha_cluster_role,) = controller_cluster_roles(ha)
    assert rules_of(ha_cluster_role) == rules


def test_the_session_resolver_role_only_reads_resources_and_types(helm_bin: Path) -> None:
    for values in ({}, {"watchNamespaces": ["team-a"]}, {"ha.enabled": True, "replicas": 2}):
        objects = render(helm_bin, "bindery", "ops", values)
        roles = {r["metadata"]["name"]: rules_of(r) for r in session_resolver_roles(objects)}
        assert roles == {
            "bindery-session-resolver": SESSION_RESOLVER_RULES,
            "bindery-session-resolver-types": TYPES_RULES,
        }
        # The Resources one is bound per namespace by its users, never by the chart; every
        # ServiceAccount may read ResourceTypes (cluster-scoped: no RoleBinding grants them).
        bindings = only(objects, "ClusterRoleBinding") + only(objects, "RoleBinding")
        assert all(b["roleRef"]["name"] != "bindery-session-resolver" for b in bindings)
        (types,) = [b for b in bindings if _for_sessions(b)]
        assert types["roleRef"]["name"] == "bindery-session-resolver-types"
        assert types["subjects"] == [
            {
                "apiGroup": "rbac.authorization.k8s.io",
                "kind": "Group",
                "name": "system:serviceaccounts",
            }
        ]
    assert not session_resolver_roles(
        render(helm_bin, "bindery", "ops", {"rbac.sessionResolver": False})
    )
    assert not only(render(helm_bin, "bindery", "ops", {"rbac.create": False}), "ClusterRole")
    long_release = render(helm_bin, "a" * 53, "ops")
    assert all(len(o["metadata"]["name"]) <= 63 for o in long_release if _for_sessions(o))


def test_an_upgrade_renders_the_crds_kept_and_a_first_install_leaves_them_to_crds(
    helm_bin: Path,
) -> None:
    """Helm creates crds/ on a first install only; every upgrade applies the same CRDs as
    objects of the release, kept on uninstall and rollback (and none with crds.enabled=false)."""
    shipped = {
        d["metadata"]["name"]: d
        for d in (yaml.safe_load(p.read_text()) for p in sorted((CHART / "crds").glob("*.yaml")))
    }

    def crds(*args: str) -> dict[str, dict[str, Any]]:
        out = helm(helm_bin, "template", "rel", str(CHART), "--namespace", "ns", *args).stdout
        docs = [d for d in yaml.safe_load_all(out) if d]
        return {d["metadata"]["name"]: d for d in only(docs, "CustomResourceDefinition")}

    assert crds() == {}
    assert crds("--is-upgrade", "--set", "crds.enabled=false") == {}
    upgraded = crds("--is-upgrade")
    assert sorted(upgraded) == sorted(shipped)
    for name, crd in upgraded.items():
        annotations = crd["metadata"].pop("annotations")
        assert annotations == {"helm.sh/resource-policy": "keep"}, name
        assert crd == shipped[name], f"the upgrade renders {name} unlike crds/"


def test_the_chart_refuses_a_kubernetes_version_outside_the_tested_range(helm_bin: Path) -> None:
    for version, ok in (
        ("v1.32.9", False),
        ("v1.33.0", True),
        ("v1.37.2", True),
        ("v1.38.0", False),
    ):
        proc = helm(helm_bin, "template", "rel", str(CHART), "--kube-version", version, check=False)
        assert (proc.returncode == 0) is ok, f"{version}: {proc.stderr}"
        if not ok:
            assert "kubeVersion" in proc.stderr


# --------------------------------------------------------------------- the real API server

DRY_RUN_VARIANTS: dict[str, dict[str, Any]] = {
    "defaults": {},
    "watch-namespace": {"watchNamespaces": [NAMESPACE]},
    "ha": {"ha.enabled": True, "replicas": 2},
    "ha-watch-namespace": {"ha.enabled": True, "replicas": 2, "watchNamespaces": [NAMESPACE]},
    "resource-types": {"defaultResourceTypes.enabled": True},
}


def in_namespace(values: dict[str, Any], namespace: str) -> dict[str, Any]:
    return {k: ([namespace] if v == [NAMESPACE] else v) for k, v in values.items()}


@pytest.mark.parametrize("variant", sorted(DRY_RUN_VARIANTS))
def test_the_api_server_accepts_the_rendered_chart(
    cluster: Cluster, crds: list[str], helm_bin: Path, namespace: str, variant: str
) -> None:
    values = in_namespace(DRY_RUN_VARIANTS[variant], namespace)
    objects = render(helm_bin, f"dry-{namespace}", namespace, values)
    proc = cluster.kubectl(
        "apply", "--dry-run=server", "--validate=strict", "-f", "-", input=to_yaml(objects)
    )
    accepted = [line for line in proc.stdout.splitlines() if "(server dry run)" in line]
    assert len(accepted) == len(objects), proc.stdout


def test_helm_install_and_uninstall_for_real(
    cluster: Cluster, crds: list[str], helm_bin: Path, namespace: str
) -> None:
    release = f"inst-{namespace}"
    values = {"ha.enabled": True, "replicas": 2, "watchNamespaces": [namespace]}
    helm(
        helm_bin, "install", release, str(CHART), "--namespace", namespace, *sets(values),
        kubeconfig=cluster.kubeconfig,
    )  # fmt: skip
    name = f"{release}-bindery"
    try:
        deployment = must_get(cluster, "deployment", namespace, name)
        assert deployment["spec"]["replicas"] == 2
        must_get(cluster, "poddisruptionbudget", namespace, name)
        must_get(cluster, "role", namespace, name)
        must_get(cluster, "role", namespace, f"{name}-leader-election")
        must_get(cluster, "clusterrole", "", name)
        status = helm(
            helm_bin, "status", release, "--namespace", namespace, kubeconfig=cluster.kubeconfig
        )
        assert "STATUS: deployed" in status.stdout
    finally:
        helm(helm_bin, "uninstall", release, "--namespace", namespace,
             kubeconfig=cluster.kubeconfig, check=False)  # fmt: skip
    assert get(cluster, "clusterrole", "", name) is None
    assert get(cluster, "deployment", namespace, name) is None
    # Helm never deletes CRDs: the users' objects survive an uninstall.
    assert get(cluster, "crd", "", "agentspecs.bindery.dev") is not None


# ---------------------------------------------------------------------------------- RBAC


@dataclass
class Identity:
    """A ServiceAccount bound by the chart's RBAC, as the API server sees it."""

    namespace: str
    name: str
    release: str

    @property
    def user(self) -> str:
        return f"system:serviceaccount:{self.namespace}:{self.name}"


@pytest.fixture
def chart_rbac(
    cluster: Cluster,
    crds: list[str],
    helm_bin: Path,
    namespace: str,
    request: pytest.FixtureRequest,
) -> Iterator[Identity]:
    """The chart's ServiceAccount and RBAC, created for real (values from the test's param)."""
    param = getattr(request, "param", {"watchNamespaces": [NAMESPACE]})
    release = f"rbac-{namespace}"
    objects = [
        o
        for o in render(helm_bin, release, namespace, in_namespace(param, namespace))
        if o["kind"] in RBAC_KINDS
    ]
    (sa,) = only(objects, "ServiceAccount")
    cluster.kubectl("apply", "-f", "-", input=to_yaml(objects))
    try:
        yield Identity(namespace, sa["metadata"]["name"], release)
    finally:
        cluster.kubectl(
            "delete", "clusterrole,clusterrolebinding", f"{release}-bindery",
            "--ignore-not-found", check=False,
        )  # fmt: skip
        cluster.kubectl(
            "delete", "clusterrole", f"{release}-bindery-view", f"{release}-bindery-edit",
            "--ignore-not-found", check=False,
        )  # fmt: skip
        cluster.kubectl(
            "delete", "clusterrole,clusterrolebinding", "-l",
            f"app.kubernetes.io/instance={release},app.kubernetes.io/component=session-resolver",
            "--ignore-not-found", check=False,
        )  # fmt: skip


def can_i(
    cluster: Cluster, who: Identity, verb: str, resource: str, *where: str, name: str = ""
) -> bool:
    """`kubectl auth can-i` as ``who``; ``resource`` may carry a subresource after '/'."""
    target, _, sub = resource.partition("/")
    args = ["auth", "can-i", verb, f"{target}/{name}" if name else target, f"--as={who.user}"]
    args += where
    if sub:
        args.append(f"--subresource={sub}")
    proc = cluster.kubectl(*args, check=False)
    answer = proc.stdout.strip()
    assert answer in ("yes", "no"), f"kubectl {' '.join(args)}: {proc.stdout}{proc.stderr}"
    return answer == "yes"


def _resource_name(group: str, resource: str) -> str:
    plural, _, sub = resource.partition("/")
    name = f"{plural}.{group}" if group else plural
    return f"{name}/{sub}" if sub else name


def test_the_service_account_may_do_what_the_controller_needs_and_no_more(
    cluster: Cluster, chart_rbac: Identity
) -> None:
    ns = ["-n", chart_rbac.namespace]
    refused = [
        f"{verb} {_resource_name(group, resource)}"
        for (group, resource), verbs in NAMESPACED_RULES.items()
        for verb in verbs
        if not can_i(cluster, chart_rbac, verb, _resource_name(group, resource), *ns)
    ] + [
        f"{verb} {_resource_name(group, resource)}"
        for (group, resource), verbs in CLUSTER_RULES.items()
        for verb in verbs
        if not can_i(cluster, chart_rbac, verb, _resource_name(group, resource))
    ]
    assert not refused, f"the chart's RBAC refuses calls the controller makes: {refused}"

    too_wide = [
        " ".join(check)
        for check in (
            ("delete", "agentspecs.bindery.dev", *ns),
            ("update", "agentspecs.bindery.dev", *ns),  # spec is never written
            ("create", "agentspecs.bindery.dev", *ns),
            ("patch", "resources.bindery.dev", *ns),
            ("patch", "tools.bindery.dev", *ns),
            ("patch", "resourcetypes.bindery.dev"),
            ("update", "agentspecs.bindery.dev/status", *ns),
            ("get", "secrets", *ns),
            ("list", "secrets", *ns),
            ("create", "pods", *ns),
            ("create", "deployments.apps", *ns),
            ("update", "configmaps", *ns),
            ("delete", "configmaps", *ns),
            ("update", "leases.coordination.k8s.io", *ns),
            ("create", "clusterroles.rbac.authorization.k8s.io"),
            # The per-agent Roles grant only what the controller holds: never escalate or
            # bind, never a ServiceAccount's token.
            ("escalate", "roles.rbac.authorization.k8s.io", *ns),
            ("bind", "roles.rbac.authorization.k8s.io", *ns),
            ("bind", "clusterroles.rbac.authorization.k8s.io", *ns),
            ("update", "roles.rbac.authorization.k8s.io", *ns),
            ("create", "serviceaccounts/token", *ns),
            ("create", "clusterrolebindings.rbac.authorization.k8s.io"),
            ("create", "customresourcedefinitions.apiextensions.k8s.io"),
            ("delete", "namespaces"),
            ("list", "agentspecs.bindery.dev", "-n", "default"),  # not a watched namespace
            ("create", "configmaps", "-n", "kube-system"),
        )
        if can_i(cluster, chart_rbac, *check)
    ]
    assert not too_wide, f"the chart's RBAC allows more than the controller needs: {too_wide}"


@pytest.mark.parametrize(
    "chart_rbac", [{"ha.enabled": True, "replicas": 2}], indirect=True, ids=["ha"]
)
def test_watching_all_namespaces_grants_cluster_wide_and_one_leader_lease(
    cluster: Cluster, chart_rbac: Identity
) -> None:
    everywhere = ["--all-namespaces"]
    for verb, resource in (
        ("list", "agentspecs.bindery.dev"),
        ("watch", "leases.coordination.k8s.io"),
        ("patch", "agentspecs.bindery.dev/status"),
        ("create", "statefulsets.apps"),
    ):
        assert can_i(cluster, chart_rbac, verb, resource, *everywhere), f"{verb} {resource}"
    assert can_i(cluster, chart_rbac, "create", "configmaps", "-n", "default")
    # Leader election: create a Lease, read and renew only the chart's one.
    ns = ["-n", chart_rbac.namespace]
    leases = "leases.coordination.k8s.io"
    lease = f"{chart_rbac.release}-bindery"
    assert can_i(cluster, chart_rbac, "create", leases, *ns)
    assert can_i(cluster, chart_rbac, "patch", leases, *ns, name=lease)
    # Work holds are patched (their finalizer, on release) in any watched namespace; RBAC cannot
    # name a prefix, so that covers every Lease there (docs/install.md says so).
    assert not can_i(cluster, chart_rbac, "update", leases, *ns, name="someone-elses")
    # (It may patch Leases in every namespace it watches: holds live there.)
    # Namespaces are read for their labels only (ResourceGrants' namespaceSelector).
    assert can_i(cluster, chart_rbac, "list", "namespaces")
    assert not can_i(cluster, chart_rbac, "get", "namespaces")
    assert not can_i(cluster, chart_rbac, "patch", "namespaces")
    assert not can_i(cluster, chart_rbac, "get", "secrets", *everywhere)
    assert not can_i(cluster, chart_rbac, "delete", "agentspecs.bindery.dev", *everywhere)
    assert not can_i(cluster, chart_rbac, "create", "clusterrolebindings.rbac.authorization.k8s.io")


# ------------------------------------------------------------ the controller under that RBAC


def service_account_kubeconfig(cluster: Cluster, who: Identity, path: Path) -> Path:
    """A kubeconfig for ``who``: the test cluster's server and CA, a fresh token."""
    admin = json.loads(cluster.kubeconfig.read_text())
    token = cluster.kubectl(
        "create", "token", who.name, "-n", who.namespace, "--duration=1h"
    ).stdout.strip()
    config = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": admin["clusters"],
        "users": [{"name": who.name, "user": {"token": token}}],
        "contexts": [
            {
                "name": who.name,
                "context": {
                    "cluster": admin["clusters"][0]["name"],
                    "user": who.name,
                    "namespace": who.namespace,
                },
            }
        ],
        "current-context": who.name,
    }
    path.write_text(json.dumps(config))
    return path


class ServiceAccountController(ControllerProcess):
    """``bindery run`` with its own kubeconfig (a ServiceAccount token), name and flags."""

    def __init__(
        self,
        cluster: Cluster,
        namespace: str,
        log_dir: Path,
        *,
        kubeconfig: Path,
        flags: list[str],
        name: str = "controller",
        ready_lines: tuple[str, ...] = ("controller started",),
    ) -> None:
        super().__init__(
            cluster,
            namespace,
            log_dir,
            args=tuple(flags),
            ready_lines=ready_lines,
            name=name,
            env={"POD_NAME": name, "POD_ID": name},
        )
        self.kubeconfig = str(kubeconfig)


# How a refusal shows in the logs: the controller's ApiError ("HTTP 403 Forbidden: ... is
# forbidden: User ..."), kopf's APIForbiddenError and its "Not enough permissions" warnings.
REFUSALS = ("HTTP 403", "Forbidden", " is forbidden", "Not enough permissions")


def refusals(logs: str) -> list[str]:
    return [line for line in logs.splitlines() if any(word in line for word in REFUSALS)]


def errors_in(logs: str) -> list[str]:
    return [line for line in logs.splitlines() if '"level": "error"' in line]


def patch_agent(
    cluster: Cluster, namespace: str, name: str, patch: Any, kind: str = "merge"
) -> None:
    cluster.kubectl(
        "patch", "agentspec", name, "-n", namespace, f"--type={kind}", "-p", json.dumps(patch)
    )


def test_the_controller_works_with_only_the_charts_rbac(
    cluster: Cluster, chart_rbac: Identity, tmp_path: Path
) -> None:
    ns = chart_rbac.namespace
    kubeconfig = service_account_kubeconfig(cluster, chart_rbac, tmp_path / "sa.kubeconfig")
    # The token really is the ServiceAccount, and it really is restricted.
    whoami = subprocess.run(
        [str(cluster.bin_dir / "kubectl"), f"--kubeconfig={kubeconfig}", "get", "secrets"],
        capture_output=True, text=True, check=False,
    )  # fmt: skip
    assert whoami.returncode != 0
    assert chart_rbac.user in whoami.stderr, whoami.stderr

    controller = ServiceAccountController(
        cluster, ns, tmp_path, kubeconfig=kubeconfig, flags=["--standalone"]
    ).start()
    try:
        apply_examples(cluster, ns)
        for name in ("dev", "reviewer"):
            wait_status(cluster, "agentspec", ns, name, ready, what=f"agent {name} Ready")
        for name in ("apply-config", "comment-on-issue"):
            wait_status(cluster, "tool", ns, name, ready)
        for name in ("shared-config", "tracking-issue"):
            wait_status(cluster, "resource", ns, name, ready)
        wait_status(cluster, "resourcetype", "", "worktree", ready)
        dev_work = "github-issue://example/project/123"
        hold = must_get(cluster, "lease", ns, hold_name(dev_work))  # a work hold: Lease create
        assert hold["spec"]["holderIdentity"] == f"{ns}/dev"
        must_get(cluster, "statefulset", ns, "reviewer-session")  # the session: created
        must_get(cluster, "configmap", ns, "dev-bindings")  # the bindings: created
        dev = must_get(cluster, "agentspec", ns, "dev")
        assert "bindery.dev/work-hold" in dev["metadata"]["finalizers"]  # agent patched

        # Relaunch: the session is patched.
        patch_agent(cluster, ns, "reviewer", {"spec": {"relaunchGeneration": 2}})
        wait_status(
            cluster, "agentspec", ns, "reviewer",
            lambda o: (o.get("status") or {}).get("observedLaunchGeneration") == 2,
            what="the reviewer relaunched",
        )  # fmt: skip

        # Work moves: the old hold is deleted, a new one created, the ConfigMap patched.
        resources = [r for r in dev["spec"]["resources"] if r["name"] != "work"]
        next_work = "github-issue://example/project/124"
        resources.append({"name": "work", "tag": "github-issue", "uri": next_work})
        patch_agent(cluster, ns, "dev", {"spec": {"resources": resources}})
        wait_for(
            lambda: (
                get(cluster, "lease", ns, hold_name(dev_work)) is None
                and get(cluster, "lease", ns, hold_name(next_work)) is not None
            ),
            what="dev's hold to move to its next work",
        )
        wait_status(cluster, "agentspec", ns, "dev", state("Working"))

        # The runtime goes away: the session is deleted.
        patch_agent(cluster, ns, "reviewer", [{"op": "remove", "path": "/spec/runtime"}], "json")
        wait_for(
            lambda: get(cluster, "statefulset", ns, "reviewer-session") is None,
            what="the reviewer's session to be deleted",
        )

        # The agent goes away: its hold is released and the finalizer removed.
        cluster.kubectl("delete", "agentspec", "dev", "-n", ns, "--wait=false")
        wait_for(
            lambda: get(cluster, "agentspec", ns, "dev") is None,
            what="dev to be finalized and deleted",
        )
        assert get(cluster, "lease", ns, hold_name(next_work)) is None
        controller._alive()
    finally:
        controller.stop()
    logs = controller.logs()
    assert not refusals(logs), "the API server refused the controller:\n" + "\n".join(
        refusals(logs)[:20]
    )
    assert not errors_in(logs), "the controller logged errors:\n" + "\n".join(errors_in(logs))


@pytest.mark.parametrize(
    "chart_rbac",
    [{"ha.enabled": True, "replicas": 2, "watchNamespaces": [NAMESPACE]}],
    indirect=True,
    ids=["ha"],
)
def test_two_replicas_elect_one_leader_with_only_the_charts_rbac(
    cluster: Cluster, helm_bin: Path, chart_rbac: Identity, tmp_path: Path
) -> None:
    ns = chart_rbac.namespace
    values = {"ha.enabled": True, "replicas": 2, "watchNamespaces": [ns]}
    args = container_args(render(helm_bin, chart_rbac.release, ns, values))
    election = [a for a in args if a.startswith("--leader-")]
    lease = f"{chart_rbac.release}-bindery"
    assert election == [
        "--leader-elect",
        f"--leader-election-namespace={ns}",
        f"--leader-election-id={lease}",
    ]
    kubeconfig = service_account_kubeconfig(cluster, chart_rbac, tmp_path / "sa.kubeconfig")
    replicas = [
        ServiceAccountController(
            cluster, ns, tmp_path, kubeconfig=kubeconfig, flags=election, name=f"replica-{i}",
            ready_lines=("waiting to lead", "controller started"),
        ).start()
        for i in (1, 2)
    ]  # fmt: skip
    try:
        apply_examples(cluster, ns)
        for name in ("dev", "reviewer"):
            wait_status(cluster, "agentspec", ns, name, ready, what=f"agent {name} Ready")
        leaders = [r for r in replicas if "became the leader" in r.logs()]
        assert len(leaders) == 1, "exactly one replica leads"
        holder = must_get(cluster, "lease", ns, lease)["spec"]["holderIdentity"]
        assert holder.startswith(leaders[0].name)
    finally:
        # Followers first: a leader that stops cleanly hands its lease over at once.
        for replica in sorted(replicas, key=lambda r: "became the leader" in r.logs()):
            replica.stop()
    for replica in replicas:
        logs = replica.logs()
        assert not refusals(logs), f"{replica.name} was refused:\n" + "\n".join(refusals(logs))
        assert not errors_in(logs), f"{replica.name} logged errors:\n" + "\n".join(errors_in(logs))
    (follower,) = [r for r in replicas if r is not leaders[0]]
    assert '"event": "reconciled"' not in follower.logs(), "the follower stands by"
