"""Only an agent's own session pod writes its acknowledgement (real API server).

An agent's acknowledgement Lease ``bindery-ack-<agent>`` is created by the controller and
updated by the delivery sidecar of the agent's session pod ``<agent>-session-0``, whose token is
pod-bound: the API server puts the pod's name and uid in the caller's ``userInfo.extra``
(``authentication.kubernetes.io/pod-name`` and ``pod-uid``) and refuses the token once that pod
is gone. The chart's ValidatingAdmissionPolicy ``<fullname>-session-acks`` lets a caller other
than the controller only update such a Lease, only as that pod, only recording that pod's uid
(annotation ``bindery.dev/pod-uid``), and never change its labels, ownerReferences or
finalizers. Checked here:

- a user with only the built-in ``edit`` role (which grants Lease writes) cannot create, patch or
  delete an acknowledgement Lease;
- forged pod identities are refused: another pod's name, the right pod recording another uid,
  no pod claim at all, the right pod changing labels, ownerReferences or finalizers. These use
  impersonation (``Impersonate-User`` / ``-Group`` / ``-Extra-...`` headers, as the admin): the
  pod-bound claims themselves are only ever set by the API server for real tokens, but
  impersonating the extras sets the very ``userInfo.extra`` that admission sees, which is what
  the policy checks; so this is the strongest forgery a caller could attempt;
- a real pod-bound token (TokenRequest bound to a real pod) writes its own acknowledgement; once
  the pod is deleted the API server refuses that token, and a new pod of the same name writes
  with its own uid;
- the pod claims cannot be had through a token either (the chart's second policy,
  ``<fullname>-session-access``): an ``edit`` user's TokenRequest bound to the session pod is
  refused (without the policy it is granted, and the token acknowledges), while a kubelet's
  (``system:node:<node>`` in ``system:nodes``) is admitted and its token acknowledges; exec and
  attach into the delivery sidecar, and ephemeral containers aimed at it or its token volume,
  are refused, while the runtime's container and other pods stay reachable;
- the per-agent Role's ``resourceNames`` narrow for real: the session's ServiceAccount reads and
  watches only its own ConfigMap (a list or watch needs ``fieldSelector=metadata.name=...``)
  and patches only its own Lease;
- the controller's ServiceAccount, with the chart's rules, creates, patches and deletes the
  per-agent ServiceAccount, Role and RoleBinding (the Role grants nothing the controller does not
  hold, so no ``escalate`` or ``bind`` is needed), and is refused a Role granting more.
"""

from __future__ import annotations

import json
import urllib.parse
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import urllib3

from controller.domain.acknowledgement import POD_NAME, POD_UID
from controller.domain.names import ack_lease_name
from harness.cluster import ensure_binaries
from tests.integration.test_chart import render, to_yaml
from tests.support import Cluster, wait_for

pytestmark = [pytest.mark.integration, pytest.mark.compat]

ATTEMPTS = 20
USER = "mallory"
AGENT = "dev"
OTHER = "other"
ONLY_THE_SESSION = "written only by the agent's own session pod"
ONLY_ITS_UID = "must record the uid of the pod that writes it"
ONLY_ANNOTATIONS = "may write only the annotations and spec"
ONLY_THE_CONTROLLER = "created and deleted only by the Bindery controller"
ONLY_THE_KUBELET = "only the kubelet running the pod may request one"
NOT_THE_SIDECAR = "exec and attach into it are refused"
NOT_THROUGH_DEBUG = "may neither target the delivery sidecar"
SIDECAR = "bindery-delivery"
NODE = "node-a"
MANAGED = {"app.kubernetes.io/managed-by": "bindery"}


@pytest.fixture(scope="module")
def helm_bin() -> Path:
    return ensure_binaries() / "helm"


# ------------------------------------------------------------------- the per-agent objects


def session_objects(agent: str) -> list[dict[str, Any]]:
    """What the controller creates per agent with a runtime (its session's identity and least
    privilege), as the brief of the delivery sidecar describes them."""
    labels = {**MANAGED, "bindery.dev/agent": agent}
    name = f"bindery-session-{agent}"
    return [
        {
            "apiVersion": "v1",
            "kind": "ServiceAccount",
            "metadata": {
                "name": f"{agent}-session",
                "labels": {**labels, "app.kubernetes.io/component": "session"},
            },
        },
        {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "Role",
            "metadata": {
                "name": name,
                "labels": {**labels, "app.kubernetes.io/component": "session-delivery"},
            },
            "rules": [
                {
                    "apiGroups": [""],
                    "resources": ["configmaps"],
                    "resourceNames": [f"{agent}-bindings"],
                    "verbs": ["get", "list", "watch"],
                },
                {
                    "apiGroups": ["coordination.k8s.io"],
                    "resources": ["leases"],
                    "resourceNames": [ack_lease_name(agent)],
                    "verbs": ["get", "patch"],
                },
            ],
        },
        {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "RoleBinding",
            "metadata": {
                "name": name,
                "labels": {**labels, "app.kubernetes.io/component": "session-delivery"},
            },
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": name},
            "subjects": [{"kind": "ServiceAccount", "name": f"{agent}-session"}],
        },
    ]


def ack_lease(agent: str) -> dict[str, Any]:
    return {
        "apiVersion": "coordination.k8s.io/v1",
        "kind": "Lease",
        "metadata": {
            "name": ack_lease_name(agent),
            "labels": {
                **MANAGED,
                "bindery.dev/agent": agent,
                "app.kubernetes.io/component": "session-ack",
            },
        },
        "spec": {},
    }


def bindings(agent: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": f"{agent}-bindings", "labels": MANAGED},
        "data": {"bindings.json": "{}"},
    }


# ----------------------------------------------------------------------------- HTTP as anyone


@dataclass
class Caller:
    """Raw API calls to the test cluster as an identity: a bearer token, optionally impersonating
    (the admin's token with Impersonate-* headers)."""

    server: str
    ca: str
    token: str
    impersonate: dict[str, str]

    def call(
        self,
        method: str,
        path: str,
        body: Any = None,
        *,
        content_type: str = "application/json",
        query: dict[str, str] | None = None,
    ) -> tuple[int, dict[str, Any]]:
        url = self.server + path + (f"?{urllib.parse.urlencode(query)}" if query else "")
        headers = {
            "Authorization": f"Bearer {self.token}",
            "Accept": "application/json",
            "Content-Type": content_type,
            **self.impersonate,
        }
        http = urllib3.PoolManager(ca_certs=self.ca, cert_reqs="CERT_REQUIRED")
        resp = http.request(
            method,
            url,
            headers=headers,
            body=None if body is None else json.dumps(body),
            timeout=urllib3.Timeout(total=30),
        )
        text = resp.data.decode()
        try:
            doc = json.loads(text) if text.strip().startswith("{") else {"raw": text}
        except json.JSONDecodeError:
            doc = {"raw": text}  # a watch: one JSON event per line
        return resp.status, doc

    def patch_lease(self, namespace: str, name: str, patch: Any) -> tuple[int, dict[str, Any]]:
        return self.call(
            "PATCH",
            f"/apis/coordination.k8s.io/v1/namespaces/{namespace}/leases/{name}",
            patch,
            content_type="application/merge-patch+json",
        )


def admin_caller(cluster: Cluster) -> Caller:
    kubeconfig = json.loads(cluster.kubeconfig.read_text())
    entry = kubeconfig["clusters"][0]["cluster"]
    token = kubeconfig["users"][0]["user"]["token"]
    return Caller(entry["server"], entry["certificate-authority"], token, {})


def as_pod(
    cluster: Cluster, namespace: str, service_account: str, pod: str | None, uid: str | None
) -> Caller:
    """The admin impersonating ``service_account`` with pod claims (None: no such claim)."""
    headers = {
        "Impersonate-User": f"system:serviceaccount:{namespace}:{service_account}",
        "Impersonate-Group": "system:serviceaccounts",
    }
    if pod is not None:
        headers["Impersonate-Extra-authentication.kubernetes.io%2fpod-name"] = pod
    if uid is not None:
        headers["Impersonate-Extra-authentication.kubernetes.io%2fpod-uid"] = uid
    admin = admin_caller(cluster)
    return Caller(admin.server, admin.ca, admin.token, headers)


def with_token(cluster: Cluster, token: str) -> Caller:
    admin = admin_caller(cluster)
    return Caller(admin.server, admin.ca, token, {})


def acknowledgement(pod: str, uid: str, digest: str = "sha256:abc") -> dict[str, Any]:
    """What the sidecar writes (merge patch)."""
    return {
        "metadata": {
            "annotations": {
                POD_UID: uid,
                POD_NAME: pod,
                "bindery.dev/delivered-digest": digest,
                "bindery.dev/delivered-at": "2026-01-01T00:00:00Z",
            }
        },
        "spec": {"holderIdentity": pod, "renewTime": "2026-01-01T00:00:00.000000Z"},
    }


# -------------------------------------------------------------------------------- fixtures


@dataclass
class Setup:
    namespace: str
    controller: str
    """The controller's ServiceAccount as a username."""
    release: str


@pytest.fixture
def protected(cluster: Cluster, helm_bin: Path, namespace: str) -> Iterator[Setup]:
    """The chart's acknowledgement policy applied for real, the controller's ServiceAccount with
    the chart's namespaced RBAC (a Role in the test's namespace), mallory with ``edit``."""
    release = f"ap-{uuid.uuid4().hex[:6]}"
    objects = render(helm_bin, release, namespace, {"watchNamespaces": [namespace]})
    policy = [
        o
        for o in objects
        if o["kind"].startswith("ValidatingAdmissionPolicy")
        and o["metadata"]["labels"]["app.kubernetes.io/component"] == "ack-protection"
    ]
    assert sorted(o["kind"] for o in policy) == [
        "ValidatingAdmissionPolicy", "ValidatingAdmissionPolicy",
        "ValidatingAdmissionPolicyBinding", "ValidatingAdmissionPolicyBinding",
    ]  # fmt: skip
    names = {f"{release}-bindery-session-acks", f"{release}-bindery-session-access"}
    assert {o["metadata"]["name"] for o in policy} == names
    rbac = [
        o
        for o in objects
        if o["kind"] in ("ServiceAccount", "Role", "RoleBinding")
        and o["metadata"]["name"] == f"{release}-bindery"
    ]
    assert sorted(o["kind"] for o in rbac) == ["Role", "RoleBinding", "ServiceAccount"]
    cluster.kubectl("apply", "--server-side", "-f", "-", input=to_yaml(policy + rbac))
    cluster.kubectl(
        "create", "rolebinding", f"{USER}-edit", "--clusterrole=edit", f"--user={USER}",
        "-n", namespace,
    )  # fmt: skip
    setup = Setup(namespace, f"system:serviceaccount:{namespace}:{release}-bindery", release)
    # The policy takes a moment to be enforced: probe with throwaway names until it is.
    probes = iter(range(1000))

    def enforced() -> bool:
        probe = ack_lease(f"probe-{next(probes)}")
        out = kubectl_as(cluster, USER, namespace, "create", "-f", "-", doc=probe)
        return out.returncode != 0 and ONLY_THE_CONTROLLER in out.stderr

    wait_for(enforced, timeout=30, interval=0.5, what="the acknowledgement policy to be enforced")

    def tokens_guarded() -> bool:
        probe = f"probe-{next(probes)}-session-0"
        out = kubectl_as(
            cluster, USER, namespace, "create", "token", "default", "--bound-object-kind=Pod",
            f"--bound-object-name={probe}", f"--bound-object-uid={uuid.uuid4()}",
        )  # fmt: skip
        return out.returncode != 0 and ONLY_THE_KUBELET in out.stderr

    wait_for(tokens_guarded, timeout=30, interval=0.5, what="the session access policy")

    def controller_allowed() -> bool:
        """An earlier test's policy, deleted, is still enforced for a moment (admission reads
        policies through an informer): wait until this controller may create one."""
        probe = ack_lease(f"probe-{next(probes)}")
        out = kubectl_as(
            cluster, setup.controller, namespace, "create", "--dry-run=server", "-f", "-", doc=probe
        )
        return bool(out.returncode == 0)

    wait_for(controller_allowed, timeout=30, interval=0.5, what="earlier policies to be gone")
    try:
        yield setup
    finally:
        cluster.kubectl(
            "delete", "validatingadmissionpolicy,validatingadmissionpolicybinding",
            *sorted(names), "--ignore-not-found", check=False,
        )  # fmt: skip


def kubectl_as(cluster: Cluster, who: str, namespace: str, *args: str, doc: Any = None) -> Any:
    return cluster.kubectl(
        *args, f"--as={who}", "-n", namespace, input=json.dumps(doc) if doc else None, check=False
    )


def create_for_agent(cluster: Cluster, setup: Setup, agent: str) -> None:
    """The per-agent objects, made as the controller's ServiceAccount (as the controller will)."""
    objects = [*session_objects(agent), ack_lease(agent), bindings(agent)]
    out = cluster.kubectl(
        "create", "-f", "-", f"--as={setup.controller}", "-n", setup.namespace,
        input=to_yaml(objects), check=False,
    )  # fmt: skip
    assert out.returncode == 0, out.stderr


def lease_of(cluster: Cluster, namespace: str, agent: str) -> dict[str, Any]:
    out = cluster.kubectl("get", "lease", ack_lease_name(agent), "-n", namespace, "-o", "json")
    lease: dict[str, Any] = json.loads(out.stdout)
    return lease


# ----------------------------------------------------------------------------------- tests


def test_edit_users_cannot_create_rewrite_or_delete_an_acknowledgement(
    cluster: Cluster, protected: Setup
) -> None:
    ns = protected.namespace
    refused = {"create": 0, "patch": 0, "delete": 0}
    for attempt in range(ATTEMPTS):
        forged = ack_lease(f"{AGENT}-{attempt}")
        out = kubectl_as(cluster, USER, ns, "create", "-f", "-", doc=forged)
        refused["create"] += out.returncode != 0 and ONLY_THE_CONTROLLER in out.stderr
    create_for_agent(cluster, protected, AGENT)
    name = ack_lease_name(AGENT)
    for attempt in range(ATTEMPTS):
        patch = json.dumps(acknowledgement(f"{AGENT}-session-0", f"forged-{attempt}"))
        out = kubectl_as(cluster, USER, ns, "patch", "lease", name, "--type=merge", "-p", patch)
        refused["patch"] += out.returncode != 0 and ONLY_THE_SESSION in out.stderr
        out = kubectl_as(cluster, USER, ns, "delete", "lease", name)
        refused["delete"] += out.returncode != 0 and ONLY_THE_CONTROLLER in out.stderr
    assert refused == {"create": ATTEMPTS, "patch": ATTEMPTS, "delete": ATTEMPTS}
    lease = lease_of(cluster, ns, AGENT)
    assert not lease["metadata"].get("annotations")
    assert not lease["spec"].get("holderIdentity")
    # Other Leases stay mallory's to write; the controller deletes acknowledgements.
    own = kubectl_as(
        cluster, USER, ns, "create", "-f", "-",
        doc={**ack_lease(AGENT), "metadata": {"name": "my-lock"}},
    )  # fmt: skip
    assert own.returncode == 0, own.stderr
    gone = kubectl_as(cluster, protected.controller, ns, "delete", "lease", name)
    assert gone.returncode == 0, gone.stderr


def test_forged_pod_identities_are_refused_and_the_right_pod_is_not(
    cluster: Cluster, protected: Setup
) -> None:
    ns = protected.namespace
    create_for_agent(cluster, protected, AGENT)
    name = ack_lease_name(AGENT)
    sa = f"{AGENT}-session"
    uid = str(uuid.uuid4())

    # Another pod (with the right RBAC: the dev session's ServiceAccount) posing as dev's.
    other = as_pod(cluster, ns, sa, f"{OTHER}-session-0", uid)
    refused = 0
    for attempt in range(ATTEMPTS):
        status, body = other.patch_lease(
            ns, name, acknowledgement(f"{OTHER}-session-0", uid, f"sha256:{attempt}")
        )
        refused += status == 403 and ONLY_THE_SESSION in body.get("message", "")
    assert refused == ATTEMPTS
    status, body = other.patch_lease(ns, name, acknowledgement(f"{OTHER}-session-0", uid))
    assert f"({AGENT}-session-0)" in body["message"], body
    assert f"comes from pod {OTHER}-session-0" in body["message"], body

    # No pod claim at all (a legacy or plain ServiceAccount token).
    plain = as_pod(cluster, ns, sa, None, None)
    status, body = plain.patch_lease(ns, name, acknowledgement(f"{AGENT}-session-0", uid))
    assert status == 403, body
    assert "carries no pod identity" in body["message"], body

    # The right pod, recording another pod's uid (or none).
    right = as_pod(cluster, ns, sa, f"{AGENT}-session-0", uid)
    refused = 0
    for attempt in range(ATTEMPTS):
        patch = acknowledgement(f"{AGENT}-session-0", f"{uuid.uuid4()}", f"sha256:{attempt}")
        status, body = right.patch_lease(ns, name, patch)
        refused += status == 403 and ONLY_ITS_UID in body.get("message", "")
    assert refused == ATTEMPTS
    status, body = right.patch_lease(ns, name, {"spec": {"holderIdentity": "x"}})
    assert status == 403, body
    assert ONLY_ITS_UID in body["message"], body
    no_uid_claim = as_pod(cluster, ns, sa, f"{AGENT}-session-0", None)
    status, body = no_uid_claim.patch_lease(ns, name, acknowledgement(f"{AGENT}-session-0", ""))
    assert status == 403, body
    assert "carries none" in body["message"], body

    # The right pod, with its uid, reaching for what is the controller's.
    lease = lease_of(cluster, ns, AGENT)
    owner = {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "name": f"{AGENT}-bindings",
        "uid": str(uuid.uuid4()),
    }
    for grab in (
        {"metadata": {"labels": {"bindery.dev/agent": OTHER}}},
        {"metadata": {"labels": {"extra": "x"}}},
        {"metadata": {"labels": None}},
        {"metadata": {"ownerReferences": [owner]}},
        {"metadata": {"finalizers": ["bindery.dev/keep"]}},
    ):
        patch = acknowledgement(f"{AGENT}-session-0", uid)
        patch["metadata"].update(grab["metadata"])
        status, body = right.patch_lease(ns, name, patch)
        assert status == 403, (grab, body)
        assert ONLY_ANNOTATIONS in body["message"], (grab, body)
    # Creating or deleting it is not the session's either (its Role does not even allow it).
    status, body = right.call(
        "DELETE", f"/apis/coordination.k8s.io/v1/namespaces/{ns}/leases/{name}"
    )
    assert status == 403, body
    assert lease_of(cluster, ns, AGENT) == lease  # nothing got through

    # The right pod with its own uid: allowed, and written.
    status, body = right.patch_lease(ns, name, acknowledgement(f"{AGENT}-session-0", uid))
    assert status == 200, body
    written = lease_of(cluster, ns, AGENT)
    assert written["metadata"]["annotations"][POD_UID] == uid
    assert written["spec"]["holderIdentity"] == f"{AGENT}-session-0"
    assert written["metadata"]["labels"] == lease["metadata"]["labels"]


def test_a_real_pod_bound_token_acknowledges_until_its_pod_is_gone(
    cluster: Cluster, protected: Setup
) -> None:
    ns = protected.namespace
    create_for_agent(cluster, protected, AGENT)
    name = ack_lease_name(AGENT)
    pod_name = f"{AGENT}-session-0"

    def make_pod() -> tuple[str, str]:
        pod = {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": pod_name},
            "spec": {
                "serviceAccountName": f"{AGENT}-session",
                "automountServiceAccountToken": False,
                # Never scheduled: only its existence (and uid) matters to the token.
                "schedulingGates": [{"name": "bindery.dev/test"}],
                "containers": [{"name": "session", "image": "registry.invalid/none:1"}],
            },
        }
        made = json.loads(
            cluster.kubectl(
                "create", "-n", ns, "-f", "-", "-o", "json", input=json.dumps(pod)
            ).stdout
        )
        uid = made["metadata"]["uid"]
        token = cluster.kubectl(
            "create", "token", f"{AGENT}-session", "-n", ns, "--bound-object-kind=Pod",
            f"--bound-object-name={pod_name}", f"--bound-object-uid={uid}", "--duration=10m",
        ).stdout.strip()  # fmt: skip
        return uid, token

    first_uid, first_token = make_pod()
    first = with_token(cluster, first_token)
    status, body = first.patch_lease(ns, name, acknowledgement(pod_name, first_uid))
    assert status == 200, body
    # The real claims are checked as the impersonated ones are: its own uid only.
    status, body = first.patch_lease(ns, name, acknowledgement(pod_name, str(uuid.uuid4())))
    assert status == 403, body
    assert ONLY_ITS_UID in body["message"], body

    cluster.kubectl("delete", "pod", pod_name, "-n", ns, "--grace-period=0", "--force")
    wait_for(
        lambda: first.patch_lease(ns, name, acknowledgement(pod_name, first_uid))[0] == 401,
        timeout=30,
        interval=0.5,
        what="the deleted pod's token to be refused",
    )
    second_uid, second_token = make_pod()
    second = with_token(cluster, second_token)
    status, body = second.patch_lease(ns, name, acknowledgement(pod_name, first_uid))
    assert status == 403, body
    assert ONLY_ITS_UID in body["message"], body
    status, body = second.patch_lease(ns, name, acknowledgement(pod_name, second_uid))
    assert status == 200, body
    assert lease_of(cluster, ns, AGENT)["metadata"]["annotations"][POD_UID] == second_uid
    assert first.patch_lease(ns, name, acknowledgement(pod_name, first_uid))[0] == 401


def test_the_session_role_reaches_only_its_own_configmap_and_lease(
    cluster: Cluster, protected: Setup
) -> None:
    ns = protected.namespace
    create_for_agent(cluster, protected, AGENT)
    create_for_agent(cluster, protected, OTHER)
    session = as_pod(cluster, ns, f"{AGENT}-session", f"{AGENT}-session-0", str(uuid.uuid4()))
    configmaps = f"/api/v1/namespaces/{ns}/configmaps"
    own = {"fieldSelector": f"metadata.name={AGENT}-bindings"}

    assert session.call("GET", f"{configmaps}/{AGENT}-bindings")[0] == 200
    assert session.call("GET", f"{configmaps}/{OTHER}-bindings")[0] == 403
    status, listed = session.call("GET", configmaps, query=own)
    assert status == 200, listed
    assert [i["metadata"]["name"] for i in listed["items"]] == [f"{AGENT}-bindings"]
    assert session.call("GET", configmaps)[0] == 403
    assert session.call("GET", configmaps, query={"watch": "true", "timeoutSeconds": "1"})[0] == 403
    watched = {**own, "watch": "true", "timeoutSeconds": "1"}
    status, events = session.call("GET", configmaps, query=watched)
    assert status == 200, events
    assert session.call(
        "GET", configmaps, query={"fieldSelector": f"metadata.name={OTHER}-bindings"}
    )[0] == 403  # fmt: skip
    # Another agent's acknowledgement Lease: RBAC refuses before the policy is asked.
    leases = f"/apis/coordination.k8s.io/v1/namespaces/{ns}/leases"
    assert session.call("GET", f"{leases}/{ack_lease_name(AGENT)}")[0] == 200
    assert session.call("GET", f"{leases}/{ack_lease_name(OTHER)}")[0] == 403
    status, body = session.patch_lease(ns, ack_lease_name(OTHER), {"spec": {}})
    assert status == 403, body
    assert "cannot patch resource" in body["message"], body
    assert session.call("GET", leases)[0] == 403
    status, body = session.call("POST", leases, ack_lease(f"{AGENT}-2"))
    assert status == 403, body
    assert "cannot create resource" in body["message"], body
    assert session.call("GET", f"/api/v1/namespaces/{ns}/secrets")[0] == 403


def test_the_controller_creates_the_per_agent_rbac_without_escalating(
    cluster: Cluster, protected: Setup
) -> None:
    ns = protected.namespace
    objects = session_objects(AGENT)
    out = cluster.kubectl(
        "create", "-f", "-", f"--as={protected.controller}", "-n", ns,
        input=to_yaml(objects), check=False,
    )  # fmt: skip
    assert out.returncode == 0, out.stderr
    # Drift is patched back, and the objects go with the runtime.
    role = f"bindery-session-{AGENT}"
    out = kubectl_as(
        cluster, protected.controller, ns, "patch", "role", role, "--type=merge",
        "-p", json.dumps({"rules": objects[1]["rules"]}),
    )  # fmt: skip
    assert out.returncode == 0, out.stderr
    out = kubectl_as(
        cluster, protected.controller, ns, "patch", "serviceaccount", f"{AGENT}-session",
        "--type=merge", "-p", json.dumps({"automountServiceAccountToken": False}),
    )  # fmt: skip
    assert out.returncode == 0, out.stderr
    # It cannot grant what it does not hold: the API server's escalation check is live.
    wider = json.loads(json.dumps(objects[1]))
    wider["metadata"]["name"] = "bindery-session-wider"
    wider["rules"].append({"apiGroups": [""], "resources": ["secrets"], "verbs": ["get"]})
    out = kubectl_as(cluster, protected.controller, ns, "create", "-f", "-", doc=wider)
    assert out.returncode != 0, out
    assert "attempting to grant RBAC permissions" in out.stderr, out
    binding = json.loads(json.dumps(objects[2]))
    binding["metadata"]["name"] = "bindery-session-admin"
    binding["roleRef"] = {
        "apiGroup": "rbac.authorization.k8s.io",
        "kind": "ClusterRole",
        "name": "admin",
    }
    out = kubectl_as(cluster, protected.controller, ns, "create", "-f", "-", doc=binding)
    assert out.returncode != 0, out
    assert "forbidden" in out.stderr, out
    for kind, name in (
        ("rolebinding", role),
        ("role", role),
        ("serviceaccount", f"{AGENT}-session"),
    ):
        out = kubectl_as(cluster, protected.controller, ns, "delete", kind, name)
        assert out.returncode == 0, out.stderr


# ------------------------------------------- the session's token: only the kubelet gets one


def session_pod(cluster: Cluster, namespace: str, name: str) -> str:
    """A pod shaped like a session (a delivery sidecar holding a projected token, the runtime's
    container), never scheduled: admission is all that is asked of it. Its uid."""
    pod = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name},
        "spec": {
            "serviceAccountName": f"{AGENT}-session",
            "automountServiceAccountToken": False,
            "schedulingGates": [{"name": "bindery.dev/test"}],
            "initContainers": [
                {
                    "name": SIDECAR,
                    "image": "registry.invalid/none:1",
                    "restartPolicy": "Always",
                    "volumeMounts": [{"name": "bindery-token", "mountPath": "/var/run/t"}],
                }
            ],
            "containers": [{"name": "session", "image": "registry.invalid/none:1"}],
            "volumes": [
                {
                    "name": "bindery-token",
                    "projected": {
                        "sources": [{"serviceAccountToken": {"path": "token"}}],
                    },
                }
            ],
        },
    }
    out = cluster.kubectl("create", "-n", namespace, "-f", "-", "-o", "json", input=json.dumps(pod))
    uid: str = json.loads(out.stdout)["metadata"]["uid"]
    return uid


def impersonating(cluster: Cluster, user: str, group: str | None = None) -> Caller:
    admin = admin_caller(cluster)
    headers = {"Impersonate-User": user}
    if group is not None:
        headers["Impersonate-Group"] = group
    return Caller(admin.server, admin.ca, admin.token, headers)


def request_token(
    caller: Caller, namespace: str, service_account: str, pod: str, uid: str
) -> tuple[int, dict[str, Any]]:
    """A TokenRequest bound to ``pod``, as the kubelet makes for a projected token."""
    return caller.call(
        "POST",
        f"/api/v1/namespaces/{namespace}/serviceaccounts/{service_account}/token",
        {
            "apiVersion": "authentication.k8s.io/v1",
            "kind": "TokenRequest",
            "spec": {
                "expirationSeconds": 600,
                "boundObjectRef": {"apiVersion": "v1", "kind": "Pod", "name": pod, "uid": uid},
            },
        },
    )


def test_edit_users_cannot_get_a_token_bound_to_a_session_pod(
    cluster: Cluster, protected: Setup
) -> None:
    """The forged acknowledgement: `edit` may create tokens, and one bound to the running
    session pod carries the pod claims the acknowledgement policy trusts."""
    ns = protected.namespace
    create_for_agent(cluster, protected, AGENT)
    pod = f"{AGENT}-session-0"
    uid = session_pod(cluster, ns, pod)
    out = kubectl_as(
        cluster, USER, ns, "create", "token", f"{AGENT}-session", "--bound-object-kind=Pod",
        f"--bound-object-name={pod}", f"--bound-object-uid={uid}",
    )  # fmt: skip
    if out.returncode == 0:  # what the token would do: acknowledge for the session
        forged = with_token(cluster, out.stdout.strip())
        status, body = forged.patch_lease(ns, ack_lease_name(AGENT), acknowledgement(pod, uid))
        pytest.fail(f"edit got the session's token; its acknowledgement got HTTP {status}")
    assert ONLY_THE_KUBELET in out.stderr, out.stderr
    assert f"pod {pod}" in out.stderr, out.stderr
    status, body = request_token(impersonating(cluster, USER), ns, f"{AGENT}-session", pod, uid)
    assert status == 403, body
    assert ONLY_THE_KUBELET in body["message"], body
    assert not lease_of(cluster, ns, AGENT)["metadata"].get("annotations")

    # What edit may still do is harmless to acknowledgements: an unbound token for the same
    # ServiceAccount carries no pod claims, and one bound to a pod of her own names that pod.
    unbound = kubectl_as(cluster, USER, ns, "create", "token", f"{AGENT}-session")
    assert unbound.returncode == 0, unbound.stderr
    status, body = with_token(cluster, unbound.stdout.strip()).patch_lease(
        ns, ack_lease_name(AGENT), acknowledgement(pod, uid)
    )
    assert status == 403, body
    assert "carries no pod identity" in body["message"], body
    mine_uid = session_pod(cluster, ns, "mine")
    mine = kubectl_as(
        cluster, USER, ns, "create", "token", f"{AGENT}-session", "--bound-object-kind=Pod",
        "--bound-object-name=mine", f"--bound-object-uid={mine_uid}",
    )  # fmt: skip
    assert mine.returncode == 0, mine.stderr
    status, body = with_token(cluster, mine.stdout.strip()).patch_lease(
        ns, ack_lease_name(AGENT), acknowledgement("mine", mine_uid)
    )
    assert status == 403, body
    assert "comes from pod mine" in body["message"], body


def test_the_kubelet_gets_the_session_pods_token_and_acknowledges_with_it(
    cluster: Cluster, protected: Setup
) -> None:
    """The kubelet requests the projected token through the same API (as system:node:<node> in
    group system:nodes): admitted, and that token acknowledges. Whoever merely calls themselves
    a node, without the group, is refused."""
    ns = protected.namespace
    create_for_agent(cluster, protected, AGENT)
    pod = f"{AGENT}-session-0"
    uid = session_pod(cluster, ns, pod)
    # RBAC for the node here (the node lane's API server uses the Node authorizer instead).
    cluster.kubectl(
        "create", "role", "token-requester", "--verb=create",
        "--resource=serviceaccounts/token", "-n", ns,
    )  # fmt: skip
    cluster.kubectl(
        "create", "rolebinding", "token-requester", "--role=token-requester",
        f"--user=system:node:{NODE}", "-n", ns,
    )  # fmt: skip
    kubelet = impersonating(cluster, f"system:node:{NODE}", "system:nodes")
    status, body = request_token(kubelet, ns, f"{AGENT}-session", pod, uid)
    assert status == 201, body
    session = with_token(cluster, body["status"]["token"])
    status, body = session.patch_lease(ns, ack_lease_name(AGENT), acknowledgement(pod, uid))
    assert status == 200, body
    assert lease_of(cluster, ns, AGENT)["metadata"]["annotations"][POD_UID] == uid

    posing = impersonating(cluster, f"system:node:{NODE}", "system:authenticated")
    status, body = request_token(posing, ns, f"{AGENT}-session", pod, uid)
    assert status == 403, body
    assert ONLY_THE_KUBELET in body["message"], body


def test_edit_users_cannot_exec_attach_or_debug_into_the_delivery_sidecar(
    cluster: Cluster, protected: Setup
) -> None:
    """The sidecar holds the pod-bound token: exec, attach and an ephemeral container aimed at
    it (or mounting its token) are refused; the runtime's own container stays reachable."""
    ns = protected.namespace
    create_for_agent(cluster, protected, AGENT)
    pod = f"{AGENT}-session-0"
    session_pod(cluster, ns, pod)
    session_pod(cluster, ns, "mine")
    # The built-in edit role grants exec and attach; ephemeral containers it does not, but
    # roles of one's own may (granted here, for the third route).
    for verb, what in (("create", "exec"), ("create", "attach"), ("patch", "ephemeralcontainers")):
        out = kubectl_as(cluster, USER, ns, "auth", "can-i", verb, "pods", f"--subresource={what}")
        assert out.stdout.strip() == ("no" if what == "ephemeralcontainers" else "yes"), out
    cluster.kubectl(
        "create", "role", "debugger", "--verb=patch,update",
        "--resource=pods/ephemeralcontainers", "-n", ns,
    )  # fmt: skip
    cluster.kubectl(
        "create", "rolebinding", "debugger", "--role=debugger", f"--user={USER}", "-n", ns
    )
    mallory = impersonating(cluster, USER)
    pods = f"/api/v1/namespaces/{ns}/pods"

    def connect(name: str, what: str, container: str) -> tuple[int, dict[str, Any]]:
        query = {"container": container, "stdout": "true"}
        if what == "exec":
            query["command"] = "true"
        return mallory.call("POST", f"{pods}/{name}/{what}", query=query)

    for what in ("exec", "attach"):
        status, body = connect(pod, what, SIDECAR)
        assert status == 403, (what, body)
        assert NOT_THE_SIDECAR in body["message"], (what, body)
        assert f"pod {pod}" in body["message"], body
        # The runtime's container, and any other pod's sidecar: past admission (no node runs
        # these pods, so the connection itself then fails).
        for name, container in ((pod, "session"), ("mine", SIDECAR)):
            status, body = connect(name, what, container)
            assert status != 403, (what, name, container, body)
            assert NOT_THE_SIDECAR not in str(body), body

    def debug(name: str, container: dict[str, Any]) -> tuple[int, dict[str, Any]]:
        return mallory.call(
            "PATCH",
            f"{pods}/{name}/ephemeralcontainers",
            {"spec": {"ephemeralContainers": [{"image": "busybox", **container}]}},
            content_type="application/strategic-merge-patch+json",
        )

    mount = [{"name": "bindery-token", "mountPath": "/t"}]
    for aimed in (
        {"name": "d1", "targetContainerName": SIDECAR},
        {"name": "d2", "volumeMounts": mount},
    ):
        status, body = debug(pod, aimed)
        assert status == 403, (aimed, body)
        assert NOT_THROUGH_DEBUG in body["message"], body
    status, body = debug(pod, {"name": "d3", "targetContainerName": "session"})
    assert status == 200, body
    status, body = debug("mine", {"name": "d4", "targetContainerName": SIDECAR})
    assert status == 200, body
    # The controller and cluster administrators are not limited.
    status, body = admin_caller(cluster).call(
        "POST", f"{pods}/{pod}/exec", query={"container": SIDECAR, "command": "true"}
    )
    assert status != 403, body
