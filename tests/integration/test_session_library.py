"""The session library on the real API server, as a session's ServiceAccount.

A ServiceAccount in the test namespace is bound to the chart's session-resolver ClusterRole by
the example RoleBinding (examples/rbac/), exactly as docs/session.md tells a namespace to do; its
token comes from the TokenRequest API. The bindings document is the one the real controller
delivered. Refusals are compared with what the real controller writes in an agent's status for
the same value set in ``spec.tools[].params``.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml
from bindery_session import Bindings, BindingsWatcher, parse_bindings
from bindery_session.wire import BINDINGS_FILE
from kubernetes import client, config

from controller.session import KubeReader, ResolveError, SessionResolver, resolve
from harness.cluster import ensure_binaries
from tests.integration.kube import EXAMPLES, agent, apply, get, must_get, wait_status
from tests.support import REPO_ROOT, Cluster, ControllerProcess, wait_for

pytestmark = pytest.mark.integration

CHART = REPO_ROOT / "helm" / "bindery"
ROLE_BINDING = REPO_ROOT / "examples" / "rbac" / "session-resolver-rolebinding.yaml"
SESSION_SA = "agent-session"
TARGET = "worktree://example/project/main"
ISSUE = "github-issue://example/project/9"


def resource(name: str, type_: str, uri: str, alias: str = "") -> dict[str, Any]:
    spec: dict[str, Any] = {"type": type_, "uri": uri}
    if alias:
        spec["alias"] = alias
    return {
        "apiVersion": "bindery.dev/v1alpha1",
        "kind": "Resource",
        "metadata": {"name": name},
        "spec": spec,
    }


INSPECT = {
    "apiVersion": "bindery.dev/v1alpha1",
    "kind": "Tool",
    "metadata": {"name": "inspect"},
    "spec": {
        "resourceSlots": [
            {
                "name": "target",
                "resourceType": "git-checkout",
                "access": "read_only",
                "binding": "parameter",
            }
        ]
    },
}


@dataclass
class Session:
    """What code in the agent's session has: its bindings file and its own credentials."""

    namespace: str
    other_namespace: str
    bindings_file: Path
    kubeconfig: Path
    api_client: client.ApiClient

    def bindings(self) -> Bindings:
        return parse_bindings(self.bindings_file.read_text())

    def resolver(self) -> SessionResolver:
        return SessionResolver(self.bindings(), KubeReader(self.api_client))


def delivered_text(cluster: Cluster, namespace: str, name: str) -> str:
    """The agent's delivered document, or "" while the controller has not written it yet."""
    cm = get(cluster, "configmap", namespace, f"{name}-bindings")
    text: str = ((cm or {}).get("data") or {}).get(BINDINGS_FILE, "")
    return text


def session_rbac(cluster: Cluster, namespace: str, release: str) -> None:
    """The chart's session objects (rendered for real), and the example RoleBinding applied in
    ``namespace`` for the sessions' ServiceAccount."""
    helm = ensure_binaries() / "helm"
    rendered = subprocess.run(
        [str(helm), "template", release, str(CHART), "--namespace", namespace],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    objects = [
        o
        for o in yaml.safe_load_all(rendered)
        if o
        and (o["metadata"].get("labels") or {}).get("app.kubernetes.io/component")
        == "session-resolver"
    ]
    kinds = sorted(o["kind"] for o in objects)
    assert kinds == ["ClusterRole", "ClusterRole", "ClusterRoleBinding"]
    binding = yaml.safe_load(ROLE_BINDING.read_text())
    binding["metadata"]["namespace"] = namespace
    binding["roleRef"]["name"] = f"{release}-bindery-session-resolver"
    binding["subjects"] = [{"kind": "ServiceAccount", "name": SESSION_SA, "namespace": namespace}]
    manifests = "\n---\n".join(yaml.safe_dump(o) for o in [*objects, binding])
    cluster.kubectl("apply", "-f", "-", input=manifests)


def token_for(cluster: Cluster, namespace: str, name: str) -> str:
    """A token for the ServiceAccount, from the TokenRequest API."""
    core = client.CoreV1Api(cluster.api_client())
    request = client.AuthenticationV1TokenRequest(
        spec=client.V1TokenRequestSpec(audiences=[], expiration_seconds=3600)
    )
    answer = core.create_namespaced_service_account_token(name, namespace, request)
    assert answer.status is not None
    return str(answer.status.token)


def token_client(cluster: Cluster, token: str) -> client.ApiClient:
    """The test cluster's server and CA, with the token as the only credential."""
    cfg = client.Configuration()
    config.load_kube_config(config_file=str(cluster.kubeconfig), client_configuration=cfg)
    cfg.refresh_api_key_hook = None  # it would reload the admin token from the kubeconfig
    cfg.api_key = {"authorization": f"Bearer {token}"}
    cfg.api_key_prefix = {}
    cfg.cert_file = cfg.key_file = None
    cfg.username = cfg.password = None
    return client.ApiClient(cfg)


def token_kubeconfig(cluster: Cluster, namespace: str, token: str, path: Path) -> Path:
    admin = yaml.safe_load(cluster.kubeconfig.read_text())
    path.write_text(
        json.dumps(
            {
                "apiVersion": "v1",
                "kind": "Config",
                "clusters": admin["clusters"],
                "users": [{"name": SESSION_SA, "user": {"token": token}}],
                "contexts": [
                    {
                        "name": SESSION_SA,
                        "context": {
                            "cluster": admin["clusters"][0]["name"],
                            "user": SESSION_SA,
                            "namespace": namespace,
                        },
                    }
                ],
                "current-context": SESSION_SA,
            }
        )
    )
    return path


@pytest.fixture
def session(
    cluster: Cluster, namespace: str, controller: ControllerProcess, tmp_path: Path
) -> Iterator[Session]:
    cluster.kubectl("apply", "--server-side", "-f", str(EXAMPLES / "00-resourcetypes.yaml"))
    other = f"o-{uuid.uuid4().hex[:10]}"
    release = f"sr-{namespace}"
    cluster.kubectl("create", "namespace", other)
    try:
        apply(cluster, other, resource("far", "worktree", "worktree://far/main"))
        apply(
            cluster,
            namespace,
            resource("repo", "worktree", TARGET, alias="main"),
            resource("ticket", "github-issue", ISSUE),
            INSPECT,
            agent("dev", resources=[{"name": "src", "tag": "fs-directory", "uri": "file:///s"}],
                  tools=[{"name": "inspect"}]),
        )  # fmt: skip
        wait_for(
            lambda: '"Deferred"' in delivered_text(cluster, namespace, "dev"),
            what="the controller to deliver dev's bindings with a deferred slot",
        )
        bindings_file = tmp_path / BINDINGS_FILE
        bindings_file.write_text(delivered_text(cluster, namespace, "dev"))

        cluster.kubectl("create", "serviceaccount", SESSION_SA, "-n", namespace)
        session_rbac(cluster, namespace, release)
        token = token_for(cluster, namespace, SESSION_SA)
        api_client = token_client(cluster, token)
        kubeconfig = token_kubeconfig(cluster, namespace, token, tmp_path / "kubeconfig")
        yield Session(namespace, other, bindings_file, kubeconfig, api_client)
        api_client.close()
    finally:
        cluster.kubectl("delete", "namespace", other, "--wait=false", check=False)
        cluster.kubectl(
            "delete", "clusterrole,clusterrolebinding", "-l",
            f"app.kubernetes.io/instance={release},app.kubernetes.io/component=session-resolver",
            "--ignore-not-found", check=False,
        )  # fmt: skip


def controller_message(cluster: Cluster, namespace: str, value: str) -> str:
    """The message the real controller writes in status for ``value`` set in
    spec.tools[].params of another agent like dev (its name then put back to dev's)."""
    probe = f"probe-{uuid.uuid4().hex[:6]}"
    src = {"name": "src", "tag": "fs-directory", "uri": "file:///s"}
    uses = [{"name": "inspect", "params": {"target": value}}]
    apply(cluster, namespace, agent(probe, resources=[src], tools=uses))

    def row(obj: dict[str, Any]) -> dict[str, Any] | None:
        rows = (obj.get("status") or {}).get("bindings") or []
        return next((r for r in rows if r.get("name") == "inspect.target"), None)

    obj = wait_status(
        cluster, "agentspec", namespace, probe, lambda o: (row(o) or {}).get("state") == "Error"
    )
    message: str = (row(obj) or {})["message"]
    return message.replace(f"agent {namespace}/{probe},", f"agent {namespace}/dev,")


# ------------------------------------------------------------------------------------ resolving


def test_the_session_client_is_the_service_account(session: Session) -> None:
    review = client.AuthenticationV1Api(session.api_client).create_self_subject_review(
        client.V1SelfSubjectReview()
    )
    assert review.status is not None
    assert review.status.user_info is not None
    assert review.status.user_info.username == (
        f"system:serviceaccount:{session.namespace}:{SESSION_SA}"
    )


def test_the_delivered_document_offers_a_deferred_slot(session: Session) -> None:
    bindings = session.bindings()
    assert bindings.agent.key == f"{session.namespace}/dev"
    tool = bindings.tool("inspect")
    assert tool is not None
    target = tool.slot("target")
    assert target is not None
    assert target.deferred


@pytest.mark.parametrize("how", ["name", "uid", "uri", "namespace/name"])
def test_a_session_resolves_a_deferred_slot_with_its_own_token(
    cluster: Cluster, session: Session, how: str
) -> None:
    repo = must_get(cluster, "resource", session.namespace, "repo")
    value = {
        "name": "repo",
        "uid": repo["metadata"]["uid"],
        "uri": TARGET,
        "namespace/name": f"{session.namespace}/repo",
    }[how]
    bound = session.resolver().resolve("inspect", "target", value)
    assert bound.model_dump(by_alias=True, exclude_defaults=True) == {
        "uri": TARGET,
        "type": "worktree",
        "alias": "main",
        "name": "repo",
        "namespace": session.namespace,
        "uid": repo["metadata"]["uid"],
    }


@pytest.mark.parametrize("value", ["ticket", "ghost"])
def test_a_wrong_type_or_an_unknown_name_is_refused_with_the_controllers_message(
    cluster: Cluster, session: Session, value: str
) -> None:
    expected = controller_message(cluster, session.namespace, value)
    with pytest.raises(ResolveError) as refused:
        session.resolver().resolve("inspect", "target", value)
    assert str(refused.value) == expected
    assert {"ticket": "cannot fill it", "ghost": "names no resource"}[value] in expected


def test_a_name_in_another_namespace_is_refused_and_not_readable_anyway(
    session: Session,
) -> None:
    with pytest.raises(ResolveError) as refused:
        session.resolver().resolve("inspect", "target", f"{session.other_namespace}/far")
    assert str(refused.value).startswith(
        f"agent {session.namespace}/dev, tool 'inspect', slot 'target': its parameter value "
        f"'{session.other_namespace}/far' names a Resource in namespace "
        f"'{session.other_namespace}', and a session resolves only Resources in its own "
        f"namespace '{session.namespace}'."
    )
    # The RoleBinding is what stops it: the session's token cannot list there.
    with pytest.raises(ResolveError, match=r"refused to list resources\.bindery\.dev .*HTTP 403"):
        KubeReader(session.api_client).list_resources(session.other_namespace)


def test_the_session_may_read_only_what_resolving_needs(cluster: Cluster, session: Session) -> None:
    user = f"--as=system:serviceaccount:{session.namespace}:{SESSION_SA}"
    ns = ["-n", session.namespace]

    def can(*args: str) -> bool:
        proc = cluster.kubectl("auth", "can-i", *args, user, check=False)
        return proc.stdout.strip() == "yes"

    assert can("list", "resources.bindery.dev", *ns)
    assert can("get", "resourcetypes.bindery.dev")
    for refused in (
        ("list", "resources.bindery.dev", "-n", session.other_namespace),
        ("patch", "resources.bindery.dev", *ns),
        ("list", "agentspecs.bindery.dev", *ns),
        ("list", "tools.bindery.dev", *ns),
        ("get", "secrets", *ns),
        ("get", "configmaps", *ns),
        ("patch", "resourcetypes.bindery.dev"),
    ):
        assert not can(*refused), refused


def test_resolve_reads_the_bindings_file_and_credentials_like_a_session(
    session: Session, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("BINDERY_BINDINGS_FILE", str(session.bindings_file))
    bound = resolve("inspect", "target", "repo", kubeconfig=session.kubeconfig)
    assert bound.uri == TARGET


# ------------------------------------------------------------------------------------------ CLI


def bindery_resolve(session: Session, *args: str) -> subprocess.CompletedProcess[str]:
    env = {
        **os.environ,
        "KUBECONFIG": str(session.kubeconfig),
        "BINDERY_BINDINGS_FILE": str(session.bindings_file),
        "PYTHONPATH": str(REPO_ROOT),
    }
    return subprocess.run(
        [sys.executable, "-m", "controller", "resolve", *args],
        capture_output=True,
        text=True,
        check=False,
        env=env,
        cwd=REPO_ROOT,
        timeout=60,
    )


def test_the_cli_prints_the_bound_resource_as_json(session: Session) -> None:
    proc = bindery_resolve(session, "--tool", "inspect", "--slot", "target", TARGET)
    assert proc.returncode == 0, proc.stderr
    printed = json.loads(proc.stdout)
    assert (printed["uri"], printed["name"], printed["alias"]) == (TARGET, "repo", "main")


def test_the_cli_prints_a_refusal_on_stderr_and_exits_non_zero(
    cluster: Cluster, session: Session
) -> None:
    expected = controller_message(cluster, session.namespace, "ticket")
    proc = bindery_resolve(session, "--tool", "inspect", "--slot", "target", "ticket")
    assert proc.returncode == 1
    assert proc.stdout == ""
    assert proc.stderr.strip() == f"error: {expected}"

    other = bindery_resolve(
        session, "--tool", "inspect", "--slot", "target", f"{session.other_namespace}/far"
    )
    assert other.returncode == 1
    assert "a session resolves only Resources in its own namespace" in other.stderr


# ------------------------------------------------------------------------------------- watching


def test_a_changed_configmap_reaches_the_session_through_a_symlink_swap(
    cluster: Cluster, session: Session, tmp_path: Path
) -> None:
    """The real ConfigMap's content, projected as the kubelet does, updated by an atomic swap."""
    volume = tmp_path / "volume"
    volume.mkdir()

    def project(text: str, stamp: str) -> None:
        (volume / stamp).mkdir()
        (volume / stamp / BINDINGS_FILE).write_text(text)
        (volume / "..data_tmp").symlink_to(stamp)
        os.rename(volume / "..data_tmp", volume / "..data")

    before = delivered_text(cluster, session.namespace, "dev")
    project(before, "..2026_12_01_07_00_00.1")
    (volume / BINDINGS_FILE).symlink_to(Path("..data") / BINDINGS_FILE)
    watcher = BindingsWatcher(volume / BINDINGS_FILE)
    first = watcher.poll()
    assert first is not None
    assert [b.name for b in first.resources] == ["src"]

    apply(
        cluster,
        session.namespace,
        agent("dev", resources=[{"name": "src", "tag": "fs-directory", "uri": "file:///s"},
              {"name": "main", "tag": "worktree", "uri": TARGET}], tools=[{"name": "inspect"}]),
    )  # fmt: skip
    after = wait_for(
        lambda: (text := delivered_text(cluster, session.namespace, "dev")) != before and text,
        what="the controller to deliver dev's new bindings",
    )
    assert watcher.poll() is None
    project(after, "..2026_12_01_07_00_05.2")
    changed = watcher.poll()
    assert changed is not None
    assert [b.name for b in changed.resources] == ["src", "main"]
    assert watcher.poll() is None
