"""The chart's operability parts: RBAC for people (aggregated into view/edit/admin, proven with
`kubectl auth can-i --as` on the real API server and its clusterrole-aggregation controller),
the PrometheusRule and the Grafana dashboard."""

from __future__ import annotations

import json
import re
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from prometheus_client import REGISTRY

from controller.reconcile import metrics
from harness.cluster import ensure_binaries
from tests.integration.test_chart import CHART, helm, only, render, to_yaml
from tests.support import Cluster, wait_for

pytestmark = pytest.mark.integration

WRITE = ("create", "update", "patch", "delete", "deletecollection")
READ = ("get", "list", "watch")
KINDS = ("agentspecs", "resources", "tools")


@pytest.fixture(scope="module")
def helm_bin() -> Path:
    return ensure_binaries() / "helm"


def user_roles(objects: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [
        o
        for o in only(objects, "ClusterRole")
        if o["metadata"]["labels"].get("app.kubernetes.io/component") == "user-rbac"
    ]


def test_user_roles_are_aggregated_and_leave_resource_types_to_cluster_admin(
    helm_bin: Path,
) -> None:
    roles = {r["metadata"]["name"]: r for r in user_roles(render(helm_bin, "bindery", "ops"))}
    assert sorted(roles) == ["bindery-edit", "bindery-view"]
    aggregate = "rbac.authorization.k8s.io/aggregate-to-"
    labels = {n: {k for k, v in r["metadata"]["labels"].items() if k.startswith(aggregate)
                  and v == "true"} for n, r in roles.items()}  # fmt: skip
    assert labels["bindery-view"] == {f"{aggregate}{r}" for r in ("view", "edit", "admin")}
    assert labels["bindery-edit"] == {f"{aggregate}{r}" for r in ("edit", "admin")}
    for rule in roles["bindery-edit"]["rules"]:
        assert "resourcetypes" not in rule["resources"]
    for rule in roles["bindery-view"]["rules"]:
        assert set(rule["verbs"]) <= set(READ)
    assert not user_roles(render(helm_bin, "bindery", "ops", {"rbac.userRoles": False}))


@pytest.fixture
def people(cluster: Cluster, crds: list[str], helm_bin: Path, namespace: str) -> Iterator[str]:
    """The chart's user ClusterRoles, applied for real; alice has `edit`, bob `view` and carol
    `admin` in the test's namespace, through the built-in ClusterRoles only."""
    release = f"people-{uuid.uuid4().hex[:6]}"
    roles = user_roles(render(helm_bin, release, namespace))
    cluster.kubectl("apply", "--server-side", "-f", "-", input=to_yaml(roles))
    for user, role in (("alice", "edit"), ("bob", "view"), ("carol", "admin")):
        cluster.kubectl(
            "create", "rolebinding", f"{user}-{role}", f"--clusterrole={role}",
            f"--user={user}", "-n", namespace,
        )  # fmt: skip
    try:
        yield namespace
    finally:
        cluster.kubectl(
            "delete", "clusterrole", *(r["metadata"]["name"] for r in roles),
            "--ignore-not-found", check=False,
        )  # fmt: skip


def can_i(
    cluster: Cluster, user: str, verb: str, resource: str, namespace: str, *, sub: str = ""
) -> bool:
    args = ["auth", "can-i", verb, resource, f"--as={user}", "-n", namespace]
    if sub:
        args.append(f"--subresource={sub}")
    proc = cluster.kubectl(*args, check=False)
    answer = proc.stdout.strip()
    assert answer in ("yes", "no"), f"{proc.stdout}{proc.stderr}"
    return answer == "yes"


def test_built_in_roles_grant_bindery_kinds_through_aggregation(
    cluster: Cluster, people: str, namespace: str
) -> None:
    # The clusterrole-aggregation controller (kube-controller-manager) fills the built-in roles.
    wait_for(
        lambda: can_i(cluster, "alice", "create", "agentspecs.bindery.dev", namespace),
        timeout=30,
        what="the edit ClusterRole to aggregate Bindery's rules",
    )
    wait_for(
        lambda: can_i(cluster, "carol", "create", "agentspecs.bindery.dev", namespace),
        timeout=30,
        what="the admin ClusterRole to aggregate Bindery's rules",
    )
    wait_for(
        lambda: can_i(cluster, "bob", "list", "agentspecs.bindery.dev", namespace),
        timeout=30,
        what="the view ClusterRole to aggregate Bindery's rules",
    )
    denied: list[str] = []
    allowed: list[str] = []
    for kind in KINDS:
        resource = f"{kind}.bindery.dev"
        for verb in READ:
            for user in ("alice", "bob", "carol"):
                if not can_i(cluster, user, verb, resource, namespace):
                    denied.append(f"{user} {verb} {resource}")
        for verb in WRITE:
            for user in ("alice", "carol"):
                if not can_i(cluster, user, verb, resource, namespace):
                    denied.append(f"{user} {verb} {resource}")
            if can_i(cluster, "bob", verb, resource, namespace):
                allowed.append(f"bob {verb} {resource}")
        # Only in the namespace they are bound in.
        if can_i(cluster, "alice", "create", resource, "default"):
            allowed.append(f"alice create {resource} in default")
    # ResourceTypes are cluster-scoped contracts: nobody but cluster-admin writes them.
    for user in ("alice", "bob", "carol"):
        for verb in ("create", "patch", "delete"):
            if can_i(cluster, user, verb, "resourcetypes.bindery.dev", namespace):
                allowed.append(f"{user} {verb} resourcetypes")
        # Nor status: the controller's to write.
        if can_i(cluster, user, "patch", "agentspecs.bindery.dev", namespace, sub="status"):
            allowed.append(f"{user} patch agentspecs/status")
    assert not denied, f"refused: {denied}"
    assert not allowed, f"allowed beyond the roles: {allowed}"

    # And for real: alice creates an AgentSpec with her own identity.
    proc = cluster.kubectl(
        "create", "--as=alice", "-n", namespace, "-f", "-",
        input=json.dumps({
            "apiVersion": "bindery.dev/v1alpha1", "kind": "AgentSpec",
            "metadata": {"name": "by-alice"}, "spec": {},
        }),
    )  # fmt: skip
    assert "by-alice created" in proc.stdout


# ------------------------------------------------------------------------- alerts, dashboard

METRIC_NAMES = {
    "bindery_reconciles_total",
    "bindery_reconcile_duration_seconds_bucket",
    "bindery_api_writes_total",
    "bindery_queue_depth",
    "bindery_agents",
    "bindery_bindings",
    "up",
}


def _metrics_in(expr: str) -> set[str]:
    return set(re.findall(r"\b(bindery_[a-z_]+|up)\b(?=\s*\{)", expr))


def test_the_controller_exports_the_metrics_alerts_and_dashboard_use() -> None:
    assert metrics.QUEUE_DEPTH is not None  # the controller's metrics are registered
    exported = {
        family.name + suffix
        for family in REGISTRY.collect()
        for suffix in ("", "_total", "_bucket")
    } | {"up"}
    assert exported >= METRIC_NAMES


def test_prometheus_rule_renders_the_four_alerts_on_exported_metrics(helm_bin: Path) -> None:
    assert not only(render(helm_bin, "bindery", "ops"), "PrometheusRule"), "off by default"
    values = {"metrics.prometheusRule.enabled": True, "metrics.prometheusRule.for": "5m",
              "metrics.prometheusRule.labels": {"release": "kube-prometheus"}}  # fmt: skip
    (rule,) = only(render(helm_bin, "bindery", "ops", values), "PrometheusRule")
    assert rule["metadata"]["labels"]["release"] == "kube-prometheus"
    alerts = {r["alert"]: r for g in rule["spec"]["groups"] for r in g["rules"]}
    assert sorted(alerts) == [
        "BinderyAgentsStalled", "BinderyControllerDown", "BinderyQueueBacklog",
        "BinderyReconcileErrors",
    ]  # fmt: skip
    for name, alert in alerts.items():
        assert alert["for"] == "5m"
        assert 'namespace="ops"' in alert["expr"], name
        assert 'job="bindery-metrics"' in alert["expr"], name
        assert _metrics_in(alert["expr"]) <= METRIC_NAMES, alert["expr"]
        assert alert["annotations"]["summary"]
        assert alert["annotations"]["description"]
    assert "{{ $labels.kind }}" in alerts["BinderyReconcileErrors"]["annotations"]["summary"]
    assert alerts["BinderyQueueBacklog"]["expr"].endswith("> 500")


def test_dashboard_renders_as_json_panels_on_exported_metrics(helm_bin: Path) -> None:
    assert not only(render(helm_bin, "bindery", "ops"), "ConfigMap"), "off by default"
    (cm,) = only(render(helm_bin, "bindery", "ops", {"metrics.dashboard.enabled": True}),
                 "ConfigMap")  # fmt: skip
    assert cm["metadata"]["labels"]["grafana_dashboard"] == "1"
    dashboard = json.loads(cm["data"]["bindery.json"])
    assert dashboard["title"] == "Bindery"
    exprs = [t["expr"] for p in dashboard["panels"] for t in p["targets"]]
    assert exprs
    used = set().union(*(_metrics_in(e) for e in exprs))
    assert used <= METRIC_NAMES
    assert {"bindery_agents", "bindery_queue_depth", "bindery_reconciles_total"} <= used


def test_lint_with_alerts_and_dashboard(helm_bin: Path) -> None:
    proc = helm(helm_bin, "lint", "--strict", str(CHART), "--set",
                "metrics.prometheusRule.enabled=true,metrics.dashboard.enabled=true")  # fmt: skip
    assert "0 chart(s) failed" in proc.stdout, proc.stdout
