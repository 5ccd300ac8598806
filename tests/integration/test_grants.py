"""Sharing a Resource across namespaces by its owner's grant (real API server).

The source's own example (examples/grants/): a platform namespace owns Resource shared-config,
and a Tool in each of three team namespaces names it in a static slot. Without a grant every
team's agent is refused, with a status message naming the grant that would allow it; once the
platform namespace grants it, all three deliver it; when the grant is revoked it leaves their
bindings ConfigMaps within one pass. A user with the built-in ``edit`` role in a team namespace
can write grants there (the chart's aggregated roles), cannot write one in the platform namespace,
and a grant made in the team's own namespace shares nothing of the platform's. The API server
refuses malformed grants naming the field.
"""

from __future__ import annotations

import copy
import json
import threading
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from types import TracebackType
from typing import Any, cast

import pytest
import yaml
from kubernetes import client, watch

from harness.cluster import ensure_binaries
from tests.integration.kube import apply, bindings_document, condition, must_get, wait_status
from tests.integration.test_chart import render, to_yaml
from tests.support import Cluster, ControllerProcess

pytestmark = pytest.mark.integration

REPO = Path(__file__).resolve().parents[2]
EXAMPLE = REPO / "examples" / "grants"
USER = "team-a-dev"
SHARED_URI = "file:///srv/platform/shared-config"
ONE_PASS = 10.0
"""Seconds within which one reconcile pass reaches every affected agent on the test cluster."""


class ConditionWatch:
    """Records every status the API server holds for the Tools and AgentSpecs of some namespaces
    while it is open: it lists, then watches from the list's resourceVersion, so no version of an
    object's conditions goes unseen (a poll could miss a Stalled that lasted one pass)."""

    PLURALS = ("tools", "agentspecs")

    def __init__(self, cluster: Cluster, namespaces: list[str]) -> None:
        self._api = client.CustomObjectsApi(cluster.api_client())
        self._namespaces = namespaces
        self._stop = threading.Event()
        self._threads: list[threading.Thread] = []
        self._lock = threading.Lock()
        self.errors: list[BaseException] = []
        self.seen: list[tuple[str, str, str, dict[str, str]]] = []
        """(kind plural, namespace/name, resourceVersion, condition type -> "status reason")."""

    def _record(self, plural: str, obj: dict[str, Any]) -> None:
        md = obj.get("metadata") or {}
        conditions = {
            str(c.get("type")): f"{c.get('status')} {c.get('reason')}"
            for c in (obj.get("status") or {}).get("conditions") or []
        }
        key = f"{md.get('namespace')}/{md.get('name')}"
        with self._lock:
            self.seen.append((plural, key, str(md.get("resourceVersion")), conditions))

    def stalled(self) -> list[tuple[str, str, str, dict[str, str]]]:
        with self._lock:
            return [s for s in self.seen if s[3].get("Stalled", "").startswith("True")]

    def reasons(self, plural: str, key: str) -> list[str]:
        """The Ready reasons the object went through, each once, in order."""
        out: list[str] = []
        with self._lock:
            for kind, name, _, conditions in self.seen:
                ready = conditions.get("Ready")
                if kind == plural and name == key and ready and (not out or out[-1] != ready):
                    out.append(ready)
        return out

    def _run(self, plural: str, namespace: str, rv: str) -> None:
        stream = watch.Watch()
        try:
            while not self._stop.is_set():
                for event in stream.stream(
                    self._api.list_namespaced_custom_object,
                    "bindery.dev", "v1alpha1", namespace, plural,
                    resource_version=rv, timeout_seconds=1,
                ):  # fmt: skip
                    if event["type"] == "ERROR":
                        self.errors.append(AssertionError(f"watch: {event['raw_object']}"))
                        return
                    obj = event["object"]
                    rv = str(obj["metadata"]["resourceVersion"])
                    if event["type"] != "BOOKMARK":
                        self._record(plural, obj)
                    if self._stop.is_set():
                        break
        except BaseException as exc:  # surfaced by __exit__
            self.errors.append(exc)
        finally:
            stream.stop()

    def __enter__(self) -> ConditionWatch:
        for namespace in self._namespaces:
            for plural in self.PLURALS:
                listing = cast(
                    "dict[str, Any]",
                    self._api.list_namespaced_custom_object(
                        "bindery.dev", "v1alpha1", namespace, plural
                    ),
                )
                for obj in listing["items"]:
                    self._record(plural, obj)
                rv = str(listing["metadata"]["resourceVersion"])
                thread = threading.Thread(
                    target=self._run, args=(plural, namespace, rv), daemon=True
                )
                thread.start()
                self._threads.append(thread)
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self._stop.set()
        for thread in self._threads:
            thread.join(timeout=15)
        self._api.api_client.close()
        if exc is None and self.errors:
            raise AssertionError(f"the condition watch failed: {self.errors!r}") from self.errors[0]


def _docs(name: str) -> list[dict[str, Any]]:
    text = (EXAMPLE / name).read_text()
    return [d for d in yaml.safe_load_all(text) if isinstance(d, dict)]


@pytest.fixture(scope="module")
def helm_bin() -> Path:
    return ensure_binaries() / "helm"


@pytest.fixture
def spaces(cluster: Cluster, namespace: str) -> Iterator[dict[str, str]]:
    """The platform namespace (the test's) and three fresh team namespaces, labelled as the
    example's grant selects them."""
    teams = {f"team-{x}": f"t-{uuid.uuid4().hex[:8]}-{x}" for x in "abc"}
    for real in teams.values():
        cluster.kubectl("create", "namespace", real)
        cluster.kubectl("label", "namespace", real, "bindery.dev/tenant=team")
    try:
        yield {"local": namespace, **teams}
    finally:
        for real in teams.values():
            cluster.kubectl("delete", "namespace", real, "--wait=false", check=False)


@pytest.fixture
def shared(
    cluster: Cluster, crds: list[str], spaces: dict[str, str], tmp_path: Path
) -> Iterator[ControllerProcess]:
    """The controller watching the platform namespace and the three teams."""
    watched = [
        arg for team in ("team-a", "team-b", "team-c") for arg in ("--namespace", spaces[team])
    ]
    proc = ControllerProcess(
        cluster, spaces["local"], tmp_path, args=("--standalone", *watched)
    ).start()
    try:
        yield proc
        proc._alive()
        for team in ("team-a", "team-b", "team-c"):
            cluster.kubectl("delete", "agentspec", "--all", "-n", spaces[team], "--timeout=60s")
    finally:
        proc.stop()


@pytest.fixture
def user_roles(cluster: Cluster, helm_bin: Path, spaces: dict[str, str]) -> Iterator[str]:
    """The chart's user ClusterRoles (aggregated into view/edit/admin) applied for real, and
    USER bound to the built-in ``edit`` role in team-a only."""
    release = f"gr-{uuid.uuid4().hex[:6]}"
    roles = [
        o
        for o in render(helm_bin, release, spaces["local"])
        if o["kind"] == "ClusterRole"
        and o["metadata"]["labels"].get("app.kubernetes.io/component") == "user-rbac"
    ]
    assert len(roles) == 2
    cluster.kubectl("apply", "--server-side", "-f", "-", input=to_yaml(roles))
    cluster.kubectl(
        "create", "rolebinding", f"{USER}-edit", "--clusterrole=edit", f"--user={USER}",
        "-n", spaces["team-a"],
    )  # fmt: skip
    try:
        yield USER
    finally:
        names = [o["metadata"]["name"] for o in roles]
        cluster.kubectl("delete", "clusterrole", *names, "--ignore-not-found", check=False)


def placed(doc: dict[str, Any], spaces: dict[str, str]) -> dict[str, Any]:
    """An example object with the example's namespace names mapped to the test's."""
    text = json.dumps(doc)
    text = text.replace('"local/shared-config"', f'"{spaces["local"]}/shared-config"')
    out: dict[str, Any] = json.loads(text)
    md = out["metadata"]
    if md.get("namespace") in spaces:
        md["namespace"] = spaces[md["namespace"]]
    return out


def can_i(cluster: Cluster, who: str, verb: str, resource: str, namespace: str) -> bool:
    proc = cluster.kubectl(
        "auth", "can-i", verb, resource, f"--as={who}", "-n", namespace, check=False
    )
    return proc.stdout.strip() == "yes"


def as_user(cluster: Cluster, who: str, namespace: str, doc: dict[str, Any]) -> Any:
    return cluster.kubectl(
        "create", "-f", "-", f"--as={who}", "-n", namespace, input=json.dumps(doc), check=False
    )


def grant_doc(name: str, to: str, from_namespace: str) -> dict[str, Any]:
    return {
        "apiVersion": "bindery.dev/v1alpha1",
        "kind": "ResourceGrant",
        "metadata": {"name": name},
        "spec": {"from": [{"namespace": from_namespace}], "to": [{"name": to}]},
    }


def config_row(obj: dict[str, Any]) -> dict[str, Any]:
    rows = {b["name"]: b for b in obj["status"].get("bindings") or []}
    return dict(rows["read-shared-config.config"])


def delivered(cluster: Cluster, namespace: str) -> str:
    return json.dumps(bindings_document(cluster, namespace, "configurer") or {})


def test_the_shared_config_example_by_grant_from_three_teams(
    cluster: Cluster,
    spaces: dict[str, str],
    shared: ControllerProcess,
    user_roles: str,
) -> None:
    local = spaces["local"]
    teams = [spaces[t] for t in ("team-a", "team-b", "team-c")]
    cluster.kubectl(
        "apply", "--server-side", "-f", str(REPO / "examples/manifests/00-resourcetypes.yaml")
    )
    platform = [placed(d, spaces) for d in _docs("10-platform.yaml")]
    resource = next(d for d in platform if d["kind"] == "Resource")
    grant = next(d for d in platform if d["kind"] == "ResourceGrant")
    apply(cluster, local, resource)
    for team in teams:
        apply(cluster, team, *(placed(d, spaces) for d in _docs("20-team.yaml")))

    # No grant: each team waits for one (Pending: the grant's apply fixes it), the message
    # names the grant that would allow it, and nothing of the platform's Resource is delivered.
    for team in teams:
        refused = wait_status(
            cluster,
            "agentspec",
            team,
            "configurer",
            lambda o: o["status"].get("state") == "Pending",
        )
        message = config_row(refused)["message"]
        assert f"no ResourceGrant there lets namespace {team!r} bind it by static" in message
        assert f"spec.from: [{{namespace: {team}}}]" in message
        assert "spec.to: [{name: shared-config}]" in message
        assert SHARED_URI not in delivered(cluster, team)

    # team-a's edit user: grants in team-a yes, in the platform namespace no (403).
    assert can_i(cluster, user_roles, "create", "resourcegrants.bindery.dev", teams[0])
    assert can_i(cluster, user_roles, "delete", "resourcegrants.bindery.dev", teams[0])
    assert not can_i(cluster, user_roles, "create", "resourcegrants.bindery.dev", local)
    denied = as_user(cluster, user_roles, local, grant_doc("mine", "shared-config", teams[0]))
    assert denied.returncode != 0
    assert "Forbidden" in denied.stderr or "forbidden" in denied.stderr
    # A grant in team-a's own namespace shares nothing of the platform's.
    forged = as_user(cluster, user_roles, teams[0], grant_doc("mine", "shared-config", teams[0]))
    assert forged.returncode == 0, forged.stderr
    wait_status(cluster, "resourcegrant", teams[0], "mine", lambda o: condition(o, "Ready") != {})
    still = must_get(cluster, "agentspec", teams[0], "configurer")
    assert still["status"]["state"] == "Pending"
    assert SHARED_URI not in delivered(cluster, teams[0])

    # The owner grants: every team delivers shared-config, and its binding names the grant.
    apply(cluster, local, grant)
    seen = wait_status(
        cluster,
        "resourcegrant",
        local,
        "share-config",
        lambda o: (
            condition(o, "Ready").get("status") == "True"
            and o["status"].get("observedGeneration") == o["metadata"]["generation"]
        ),
    )
    assert condition(seen, "Ready")["reason"] == "Observed"
    for team in teams:
        bound = wait_status(
            cluster, "agentspec", team, "configurer", lambda o: o["status"].get("state") == "Idle"
        )
        row = config_row(bound)
        assert row["state"] == "Bound"
        assert row["resource"]["grant"] == f"{local}/share-config"
        assert row["resource"]["namespace"] == local
        tool = must_get(cluster, "tool", team, "read-shared-config")
        assert tool["status"]["staticSlots"][0]["resource"]["grant"] == f"{local}/share-config"
    for team in teams:
        wait_status(
            cluster, "configmap", team, "configurer-bindings",
            lambda o: SHARED_URI in json.dumps(o.get("data") or {}),
        )  # fmt: skip

    # Revoked: gone from every team's bindings ConfigMap within one pass.
    cluster.kubectl("delete", "resourcegrant", "share-config", "-n", local)
    start = time.monotonic()
    for team in teams:
        wait_status(
            cluster, "configmap", team, "configurer-bindings",
            lambda o: SHARED_URI not in json.dumps(o.get("data") or {}),
            timeout=ONE_PASS,
        )  # fmt: skip
        refused = wait_status(
            cluster,
            "agentspec",
            team,
            "configurer",
            lambda o: o["status"].get("state") == "Pending",
        )
        assert "share-config" not in json.dumps(config_row(refused).get("resource") or {})
    assert time.monotonic() - start < ONE_PASS


def _apply_file(cluster: Cluster, namespace: str, docs: list[dict[str, Any]]) -> None:
    """``kubectl apply --server-side`` of an example file, as its header says to apply it."""
    body = "\n---\n".join(yaml.safe_dump(d) for d in docs)
    cluster.kubectl("apply", "--server-side", "-n", namespace, "-f", "-", input=body)


def _converged(obj: dict[str, Any]) -> bool:
    st = obj.get("status") or {}
    return (
        st.get("observedGeneration") == obj["metadata"]["generation"]
        and condition(obj, "Ready").get("status") == "True"
    )


def test_the_grants_example_converges_in_either_apply_order_without_stalling(
    cluster: Cluster, spaces: dict[str, str], shared: ControllerProcess
) -> None:
    """docs/gitops.md says apply order does not matter. team-a applies its Tool and agent before
    the platform's grant exists: they wait (Reconciling, the agent Pending) for the grant, never
    Stalled (which Argo CD shows Degraded and Flux fails a sync on); team-b applies after it and
    converges at once. Every status version the API server holds is watched, not polled."""
    local, first, later = spaces["local"], spaces["team-a"], spaces["team-b"]
    cluster.kubectl(
        "apply", "--server-side", "-f", str(REPO / "examples/manifests/00-resourcetypes.yaml")
    )
    team = [placed(d, spaces) for d in _docs("20-team.yaml")]
    with ConditionWatch(cluster, [first, later]) as seen:
        _apply_file(cluster, first, team)
        tool = wait_status(
            cluster, "tool", first, "read-shared-config",
            lambda o: condition(o, "Reconciling").get("status") == "True",
        )  # fmt: skip
        assert condition(tool, "Ready")["reason"] == "MissingDependency"
        message = condition(tool, "Ready")["message"]
        assert f"no ResourceGrant there lets namespace {first!r} bind it by static" in message
        assert message.count(f"is in namespace {local!r}") == 1, message  # said once
        assert condition(tool, "Stalled")["status"] == "False"
        waiting = wait_status(
            cluster, "agentspec", first, "configurer",
            lambda o: o["status"].get("state") == "Pending",
        )  # fmt: skip
        assert condition(waiting, "Reconciling")["status"] == "True"
        row = cluster.kubectl("get", "agentspec", "configurer", "-n", first).stdout
        assert "Pending" in row.splitlines()[1], row

        _apply_file(cluster, local, [placed(d, spaces) for d in _docs("10-platform.yaml")])
        _apply_file(cluster, later, team)
        for namespace in (first, later):
            wait_status(cluster, "tool", namespace, "read-shared-config", _converged)
            agent = wait_status(cluster, "agentspec", namespace, "configurer", _converged)
            assert agent["status"]["state"] == "Idle"
            assert config_row(agent)["resource"]["grant"] == f"{local}/share-config"
    assert seen.stalled() == [], seen.stalled()
    assert seen.reasons("tools", f"{first}/read-shared-config")[-2:] == [
        "False MissingDependency",
        "True Valid",
    ]
    assert "False MissingDependency" not in seen.reasons("tools", f"{later}/read-shared-config")


BAD_GRANTS = [
    ({"from": [{}], "to": [{"name": "x"}]}, "spec.from[0]",
     "exactly one of namespace and namespaceSelector"),
    ({"from": [{"namespace": "a", "namespaceSelector": {}}], "to": [{"name": "x"}]},
     "spec.from[0]", "exactly one of namespace and namespaceSelector"),
    ({"from": [{"namespace": "a"}], "to": [{}]}, "spec.to[0]",
     "exactly one of name and selector"),
    ({"from": [{"namespace": "a"}], "to": [{"name": "x", "selector": {}}]}, "spec.to[0]",
     "exactly one of name and selector"),
    ({"from": [{"namespace": "a"}], "to": [{"name": "x"}], "uses": ["everything"]},
     "spec.uses[0]", "Unsupported value"),
    ({"from": [{"namespace": "a"}], "to": [{"name": "x"}], "uses": ["static", "static"]},
     "spec.uses", "duplicate entries"),
    ({"from": [{"namespace": "Not_A_Namespace"}], "to": [{"name": "x"}]},
     "spec.from[0].namespace", "should match"),
    ({"from": [], "to": [{"name": "x"}]}, "spec.from", "should have at least 1 items"),
    ({"from": [{"namespace": f"n{i}"} for i in range(33)], "to": [{"name": "x"}]}, "spec.from",
     "must have at most 32 items"),
]  # fmt: skip


@pytest.mark.usefixtures("crds")
@pytest.mark.parametrize(("spec", "field", "says"), BAD_GRANTS)
def test_a_malformed_grant_is_refused_naming_the_field(
    cluster: Cluster,
    namespace: str,
    spec: dict[str, Any],
    field: str,
    says: str,
) -> None:
    body = copy.deepcopy(grant_doc("bad", "x", "a"))
    body["spec"] = spec
    out = cluster.kubectl(
        "apply", "--server-side", "--dry-run=server", "-n", namespace, "-f", "-",
        input=json.dumps(body), check=False,
    )  # fmt: skip
    assert out.returncode != 0
    assert field in out.stderr, out.stderr
    assert says in out.stderr, out.stderr


def test_a_well_formed_grant_is_accepted_with_its_defaults(
    cluster: Cluster, crds: list[str], namespace: str
) -> None:
    apply(cluster, namespace, grant_doc("fine", "x", "a"))
    made = must_get(cluster, "resourcegrant", namespace, "fine")
    assert made["spec"]["uses"] == ["static", "parameter", "selector"]
    assert made["status"] == {"observedGeneration": -1}
    listed = cluster.kubectl("get", "brg", "-n", namespace).stdout
    header = ["NAME", "FROM", "TO", "USES", "READY", "REASON", "DELIVERED", "AGE"]
    assert listed.split()[:8] == header


def test_a_selector_and_a_parameter_reach_another_namespace_by_grant(
    cluster: Cluster, spaces: dict[str, str], shared: ControllerProcess
) -> None:
    """An agent's resourceSelector.namespaces and a parameter value (the Resource's uid) bind
    the platform's Resource only while a grant admits those uses."""
    local, team = spaces["local"], spaces["team-a"]
    cluster.kubectl(
        "apply", "--server-side", "-f", str(REPO / "examples/manifests/00-resourcetypes.yaml")
    )
    resource = next(placed(d, spaces) for d in _docs("10-platform.yaml") if d["kind"] == "Resource")
    apply(cluster, local, resource)
    uid = must_get(cluster, "resource", local, "shared-config")["metadata"]["uid"]
    tool = {
        "apiVersion": "bindery.dev/v1alpha1",
        "kind": "Tool",
        "metadata": {"name": "both"},
        "spec": {
            "resourceSlots": [
                {"name": "picked", "resourceType": "fs-directory"},
                {"name": "asked", "resourceType": "fs-directory", "binding": "parameter"},
            ]
        },
    }
    agent = {
        "apiVersion": "bindery.dev/v1alpha1",
        "kind": "AgentSpec",
        "metadata": {"name": "configurer"},
        "spec": {
            "tools": [{"name": "both", "params": {"asked": uid}}],
            "resourceSelector": {
                "matchLabels": {"bindery.dev/shared": "true"},
                "namespaces": [local],
            },
        },
    }
    apply(cluster, team, tool, agent)
    refused = wait_status(
        cluster, "agentspec", team, "configurer", lambda o: o["status"].get("state") == "Pending"
    )
    rows = {b["name"]: b for b in refused["status"]["bindings"]}
    assert "names no resource" in rows["both.asked"]["message"]  # another's uid: not found
    assert "resource" not in rows["both.picked"]
    assert SHARED_URI not in delivered(cluster, team)

    grant = grant_doc("share-config", "shared-config", team)
    grant["spec"]["uses"] = ["parameter", "selector"]
    apply(cluster, local, grant)
    bound = wait_status(
        cluster, "agentspec", team, "configurer", lambda o: o["status"].get("state") == "Idle"
    )
    rows = {b["name"]: b for b in bound["status"]["bindings"]}
    for name in ("both.picked", "both.asked"):
        assert rows[name]["resource"]["grant"] == f"{local}/share-config"
    wait_status(
        cluster, "configmap", team, "configurer-bindings",
        lambda o: SHARED_URI in json.dumps(o.get("data") or {}),
    )  # fmt: skip

    cluster.kubectl("delete", "resourcegrant", "share-config", "-n", local)
    wait_status(
        cluster, "configmap", team, "configurer-bindings",
        lambda o: SHARED_URI not in json.dumps(o.get("data") or {}),
        timeout=ONE_PASS,
    )  # fmt: skip
