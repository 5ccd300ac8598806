"""The cluster work scope on the real API server: one holder per URI across namespaces.

The controller runs with ``--work-scope=cluster``, its holds in the test's namespace, and watches
two team namespaces besides. A `HoldWatcher` replays every work-hold Lease of those namespaces and
every bindings ConfigMap of the team namespaces in the API server's own order (one watch each, so
events come in resourceVersion order), and fails the test if a URI ever had two holders (two
agents named by hold Leases at once) or was delivered to two agents at once.
"""

from __future__ import annotations

import threading
import uuid
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client, watch

from controller.domain.delivery import delivered_work_uris
from controller.domain.work import hold_name
from controller.k8s import builders
from tests.integration.kube import EXAMPLES, agent, apply, explained, get, state, wait_status, work
from tests.support import Cluster, ControllerProcess, wait_for

pytestmark = pytest.mark.integration

HOLDS = f"{builders.COMPONENT_LABEL}=work-hold"
BINDINGS = f"{builders.COMPONENT_LABEL}=bindings"


class HoldWatcher:
    """Replays work-hold Leases (the hold namespace's and the teams') and bindings ConfigMaps
    (the teams'). Holds elsewhere belong to other tests sharing the API server (their agents'
    namespaces may still be going away) and are not this test's to judge."""

    def __init__(self, cluster: Cluster, teams: tuple[str, ...], hold_namespace: str) -> None:
        api = cluster.api_client()
        self.coordination = client.CoordinationV1Api(api)
        self.core = client.CoreV1Api(api)
        self.teams = teams
        self.judged = {hold_namespace, *teams}
        self.holds: dict[str, tuple[str, str]] = {}
        """Lease namespace/name -> (URI, holder)."""
        self.delivered: dict[str, set[str]] = {}
        self.events = 0
        self.cross_namespace = True
        """Whether a URI held in two namespaces counts as two holders (the cluster scope)."""
        self.violations: list[str] = []
        self.history: list[tuple[str, str, str]] = []
        """(Lease namespace, URI, holder) for every hold version seen."""
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._threads = [
            threading.Thread(target=self._leases, daemon=True),
            *(threading.Thread(target=self._maps, args=(t,), daemon=True) for t in teams),
        ]

    def __enter__(self) -> HoldWatcher:
        for thread in self._threads:
            thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        for thread in self._threads:
            thread.join(timeout=15)

    def _stream(
        self,
        list_call: Callable[..., Any],
        *args: Any,
        on: Callable[..., None],
        label_selector: str,
    ) -> None:
        version = ""
        while not self._stop.is_set():
            w = watch.Watch()
            try:
                for event in w.stream(
                    list_call,
                    *args,
                    label_selector=label_selector,
                    timeout_seconds=2,
                    **_since(version),
                ):
                    version = event["object"].metadata.resource_version
                    with self._lock:
                        on(event["type"], event["object"])
                    if self._stop.is_set():
                        w.stop()
                        break
            except client.ApiException as exc:  # 410 Gone: start over from a fresh list
                if exc.status != 410:
                    raise
                version = ""

    def _leases(self) -> None:
        self._stream(
            self.coordination.list_lease_for_all_namespaces,
            label_selector=HOLDS,
            on=self._lease,
        )

    def _maps(self, namespace: str) -> None:
        self._stream(
            self.core.list_namespaced_config_map, namespace, label_selector=BINDINGS, on=self._map
        )

    def _lease(self, kind: str, lease: Any) -> None:
        if lease.metadata.namespace not in self.judged:
            return
        self.events += 1
        key = f"{lease.metadata.namespace}/{lease.metadata.name}"
        uri = (lease.metadata.annotations or {}).get(builders.URI_ANNOTATION, "")
        holder = lease.spec.holder_identity or ""
        if kind == "DELETED":
            self.holds.pop(key, None)
        else:
            self.holds[key] = (uri, holder)
            self.history.append((lease.metadata.namespace, uri, holder))
        holders: dict[tuple[str, str], set[str]] = {}
        for uri, holder in self.holds.values():
            scope = "" if self.cross_namespace else holder.rpartition("/")[0]
            holders.setdefault((scope, uri), set()).add(holder)
        for (_, uri), who in holders.items():
            if len(who) > 1:
                self.violations.append(
                    f"{uri} held by {sorted(who)} at once (Lease resourceVersion "
                    f"{lease.metadata.resource_version})"
                )

    def _map(self, kind: str, cm: Any) -> None:
        self.events += 1
        who = f"{cm.metadata.namespace}/{cm.metadata.labels.get(builders.AGENT_LABEL)}"
        data = (cm.data or {}).get("bindings.json", "")
        self.delivered[who] = set() if kind == "DELETED" else delivered_work_uris(data)
        seen: dict[tuple[str, str], str] = {}
        for name, uris in sorted(self.delivered.items()):
            for uri in uris:
                scope = "" if self.cross_namespace else name.rpartition("/")[0]
                if (scope, uri) in seen:
                    self.violations.append(
                        f"{uri} delivered to {seen[(scope, uri)]} and {name} at once "
                        f"(resourceVersion {cm.metadata.resource_version})"
                    )
                seen[(scope, uri)] = name

    def where(self, uri: str) -> dict[str, str]:
        """Lease namespace -> holder, for the holds of ``uri`` now."""
        with self._lock:
            return {k.partition("/")[0]: h for k, (u, h) in self.holds.items() if u == uri}


def _since(version: str) -> dict[str, Any]:
    return {"resource_version": version} if version else {}


@pytest.fixture
def teams(cluster: Cluster) -> Iterator[tuple[str, str]]:
    """Two team namespaces, deleted (without waiting) afterwards."""
    suffix = uuid.uuid4().hex[:8]
    names = (f"team-a-{suffix}", f"team-b-{suffix}")
    for name in names:
        cluster.kubectl("create", "namespace", name)
    try:
        yield names
    finally:
        for name in names:
            cluster.kubectl("delete", "namespace", name, "--wait=false", check=False)


def run_controller(
    cluster: Cluster, namespace: str, teams: tuple[str, ...], log_dir: Path, scope: str
) -> ControllerProcess:
    """The controller in ``scope``, its holds in ``namespace``, watching it and the teams."""
    extra = [arg for team in teams for arg in ("--namespace", team)]
    return ControllerProcess(
        cluster,
        namespace,
        log_dir,
        args=(
            "--standalone",
            f"--work-scope={scope}",
            f"--work-hold-namespace={namespace}",
            *extra,
        ),
    ).start()


@pytest.fixture
def scoped(
    cluster: Cluster, crds: list[str], namespace: str, teams: tuple[str, str], tmp_path: Path
) -> Iterator[Callable[[str], ControllerProcess]]:
    """Starts the controller in a scope (stopping the one before); cleans up the agents."""
    cluster.kubectl("apply", "--server-side", "-f", str(EXAMPLES / "00-resourcetypes.yaml"))
    running: list[ControllerProcess] = []

    def start(scope: str) -> ControllerProcess:
        if running:
            running[-1].stop()
        n = len(running)
        (tmp_path / f"run-{n}").mkdir()
        proc = run_controller(cluster, namespace, teams, tmp_path / f"run-{n}", scope)
        running.append(proc)
        return proc

    try:
        yield start
        if running:
            running[-1]._alive()
            # Delete the agents while the controller runs, so their finalizers are honoured.
            for team in teams:
                cluster.kubectl("delete", "agentspec", "--all", "-n", team, "--timeout=60s")
    finally:
        for proc in running:
            proc.stop()
            errors = [line for line in proc.lines_before_shutdown() if '"level": "error"' in line]
            assert not errors, "the controller logged errors:\n" + "\n".join(errors[:20])


@pytest.fixture
def holds(cluster: Cluster, namespace: str, teams: tuple[str, str]) -> Iterator[HoldWatcher]:
    with HoldWatcher(cluster, teams, namespace) as watcher:
        yield watcher
    assert watcher.events > 0, "the watcher saw no hold and no bindings ConfigMap at all"
    assert watcher.violations == []


def waiting_for(expected: str) -> Callable[[dict[str, Any]], bool]:
    def check(obj: dict[str, Any]) -> bool:
        w = (obj.get("status") or {}).get("work") or {}
        ref = w.get("waitingFor") or {}
        return state("Waiting")(obj) and f"{ref.get('namespace')}/{ref.get('name')}" == expected

    return check


def working(cluster: Cluster, namespace: str, name: str) -> bool:
    obj = get(cluster, "agentspec", namespace, name) or {}
    return bool(state("Working")(obj))


# ------------------------------------------------------------------------------------ tests


def test_twenty_races_across_namespaces_one_holder_each_the_loser_names_it(
    cluster: Cluster,
    namespace: str,
    teams: tuple[str, str],
    scoped: Callable[[str], ControllerProcess],
    holds: HoldWatcher,
) -> None:
    scoped("cluster")
    a, b = teams
    races = [(f"r{i}", f"github-issue://acme/app/{i}") for i in range(20)]

    def claim(team: str) -> None:
        for name, uri in races:
            apply(cluster, team, agent(name, resources=[work(uri)]))

    with ThreadPoolExecutor(2) as pool:
        list(pool.map(claim, teams))
    for name, uri in races:
        wait_for(
            lambda name=name: working(cluster, a, name) or working(cluster, b, name),
            timeout=60,
            what=f"one of the two {name} agents to hold its URI",
        )
        winner, loser = (a, b) if working(cluster, a, name) else (b, a)
        wait_status(cluster, "agentspec", loser, name, waiting_for(f"{winner}/{name}"))
        assert not working(cluster, loser, name)
        assert holds.where(uri) == {namespace: f"{winner}/{name}"}
        lease = get(cluster, "lease", winner, hold_name(uri))
        assert lease is None, "a cluster-scope hold was created in the agent's namespace"
    assert {ns for ns, _, _ in holds.history} == {namespace}


def test_handoff_across_namespaces_goes_through_no_holder(
    cluster: Cluster,
    namespace: str,
    teams: tuple[str, str],
    scoped: Callable[[str], ControllerProcess],
    holds: HoldWatcher,
) -> None:
    scoped("cluster")
    a, b = teams
    uri = "github-issue://acme/app/handoff"
    apply(cluster, a, agent("dev", resources=[work(uri)]))
    wait_status(cluster, "agentspec", a, "dev", state("Working"))
    apply(cluster, b, agent("dev", resources=[work(uri)]))
    wait_status(cluster, "agentspec", b, "dev", waiting_for(f"{a}/dev"))
    ready = get(cluster, "agentspec", b, "dev") or {}
    (cond,) = [c for c in ready["status"]["conditions"] if c["type"] == "Ready"]
    assert f"waiting for {a}/dev" in cond["message"]
    assert "github-issue" not in str(ready["status"]["work"].get("waitingFor"))
    shown = explained(
        cluster, b, "dev"
    )  # `bindery why` finds the hold in the controller's namespace
    assert shown["work"]["holder"] == f"{a}/dev"
    assert shown["work"]["waitingFor"] == f"{a}/dev"

    apply(cluster, a, agent("dev", resources=[]))  # a lets go
    wait_status(cluster, "agentspec", b, "dev", state("Working"))
    wait_status(cluster, "agentspec", a, "dev", state("Idle"))
    holders = [h for _, u, h in holds.history if u == uri]
    assert holders[0] == f"{a}/dev"
    assert holders[-1] == f"{b}/dev"
    assert holds.where(uri) == {namespace: f"{b}/dev"}


def test_switching_scope_moves_holds_without_two_holders(
    cluster: Cluster,
    namespace: str,
    teams: tuple[str, str],
    scoped: Callable[[str], ControllerProcess],
    holds: HoldWatcher,
) -> None:
    a, b = teams
    x, y = "github-issue://acme/app/x", "github-issue://acme/app/y"
    scoped("namespace")
    apply(cluster, a, agent("one", resources=[work(x)]))
    wait_status(cluster, "agentspec", a, "one", state("Working"))
    apply(cluster, a, agent("two", resources=[work(x)]))  # waits in its namespace's line
    apply(cluster, b, agent("three", resources=[work(y)]))
    wait_status(cluster, "agentspec", a, "two", waiting_for(f"{a}/one"))
    wait_status(cluster, "agentspec", b, "three", state("Working"))
    assert holds.where(x) == {a: f"{a}/one"}
    assert holds.where(y) == {b: f"{b}/three"}

    scoped("cluster")  # the holds move to the hold namespace; nobody stops holding
    wait_for(lambda: holds.where(x) == {namespace: f"{a}/one"}, timeout=60, what="x to move")
    wait_for(lambda: holds.where(y) == {namespace: f"{b}/three"}, timeout=60, what="y to move")
    assert working(cluster, a, "one")
    assert working(cluster, b, "three")
    wait_status(cluster, "agentspec", a, "two", waiting_for(f"{a}/one"))
    apply(cluster, b, agent("four", resources=[work(x)]))  # across namespaces now: waits
    wait_status(cluster, "agentspec", b, "four", waiting_for(f"{a}/one"))
    apply(cluster, b, agent("four", resources=[]))
    wait_status(cluster, "agentspec", b, "four", state("Idle"))

    scoped("namespace")  # and back to the holders' own namespaces
    wait_for(lambda: holds.where(x) == {a: f"{a}/one"}, timeout=60, what="x to move back")
    wait_for(lambda: holds.where(y) == {b: f"{b}/three"}, timeout=60, what="y to move back")
    assert working(cluster, a, "one")
    wait_status(cluster, "agentspec", a, "two", waiting_for(f"{a}/one"))
    for ns, uri, holder in holds.history:  # every hold was made by its one holder
        assert holder == {x: f"{a}/one", y: f"{b}/three"}[uri], (ns, uri, holder)


def test_two_holders_inherited_from_the_namespace_scope_settle_on_the_oldest(
    cluster: Cluster,
    namespace: str,
    teams: tuple[str, str],
    scoped: Callable[[str], ControllerProcess],
    holds: HoldWatcher,
) -> None:
    a, b = teams
    uri = "github-issue://acme/app/both"
    holds.cross_namespace = False  # the namespace scope allows one holder per namespace
    scoped("namespace")
    apply(cluster, a, agent("dev", resources=[work(uri)]))
    wait_status(cluster, "agentspec", a, "dev", state("Working"))
    apply(cluster, b, agent("dev", resources=[work(uri)]))
    wait_status(cluster, "agentspec", b, "dev", state("Working"))

    scoped("cluster")
    wait_status(cluster, "agentspec", b, "dev", waiting_for(f"{a}/dev"))
    wait_for(lambda: holds.where(uri) == {namespace: f"{a}/dev"}, timeout=60, what="one hold")
    assert working(cluster, a, "dev")
    with holds._lock:
        delivered = [w for w, uris in holds.delivered.items() if uri in uris]
    assert delivered == [f"{a}/dev"]
