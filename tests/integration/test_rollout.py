"""Rollout status on what agents depend on, against the real control plane.

A Resource bound by several agents reports, for its current generation, how many applied a
document computed from it, are pending, refused it or are suspended, with a ``Delivered``
condition and the ``298/300``-style ``status.delivered``. The kwok node runs the session pods;
their delivery sidecars and runtimes are played by the harness's sessions, built from the real
sidecar code (:class:`harness.sessions.Sessions`): they acknowledge, refuse, or hold back as each
test asks.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from harness.sessions import Sessions
from tests.argocd_health import argo_health
from tests.integration.conftest import DELIVERING
from tests.integration.kube import (
    agent,
    apply,
    condition,
    must_get,
    settle,
    wait_status,
    why,
)
from tests.integration.sessions_helpers import apply_types, resource, runtime, tool
from tests.support import Cluster, ControllerProcess, audit_mark, controller_writes

pytestmark = pytest.mark.integration

SHARED_URI = "file:///srv/rollout/shared"
BINDING = {"name": "shared", "tag": "fs-directory", "uri": SHARED_URI}
Check = Callable[[dict[str, Any]], bool]


def shared(generation_note: str = "1") -> dict[str, Any]:
    return resource("shared", SHARED_URI, attributes={"note": generation_note})


def rollout(generation: int | None = None, *, delivered: str | None = None, **counts: int) -> Check:
    """The Resource's status reports a rollout of its current generation (or ``generation``)
    with these counts."""

    def check(obj: dict[str, Any]) -> bool:
        st = obj.get("status") or {}
        block = st.get("rollout") or {}
        want = generation if generation is not None else obj["metadata"]["generation"]
        if st.get("observedGeneration") != obj["metadata"]["generation"]:
            return False
        if block.get("generation") != want:
            return False
        if delivered is not None and st.get("delivered") != delivered:
            return False
        return all(block.get(k) == v for k, v in counts.items())

    return check


def wait_rollout(
    cluster: Cluster, kind: str, namespace: str, name: str, check: Check, **kwargs: Any
) -> dict[str, Any]:
    """``wait_status`` that shows the object's last status when it times out."""
    try:
        return wait_status(cluster, kind, namespace, name, check, **kwargs)
    except AssertionError as exc:
        last = must_get(cluster, kind, namespace, name).get("status") or {}
        raise AssertionError(f"{exc}; its status: {last}") from exc


def change(cluster: Cluster, namespace: str, note: str) -> int:
    """Change the shared Resource's spec; its new generation."""
    apply(cluster, namespace, shared(note))
    return int(must_get(cluster, "resource", namespace, "shared")["metadata"]["generation"])


def test_counts_pending_refused_and_suspended_agents_and_a_deleted_dependent(
    cluster: Cluster, namespace: str, delivering: ControllerProcess, sessions: Sessions
) -> None:
    apply_types(cluster)
    idle = runtime(idle={"suspendAfterSeconds": 3})
    apply(
        cluster,
        namespace,
        shared(),
        *(agent(f"s{i}", resources=[BINDING], runtime=runtime(), relaunch=1) for i in (1, 2, 3)),
        agent("plain", resources=[BINDING]),  # no runtime: applied once its document is written
        agent("sleepy", resources=[BINDING], runtime=idle, relaunch=1),
    )
    first = wait_rollout(
        cluster,
        "resource",
        namespace,
        "shared",
        rollout(dependents=5, applied=4, pending=0, refused=0, suspended=1, delivered="4/5"),
        timeout=90,
        what="generation 1 applied by all, sleepy suspended",
    )
    assert condition(first, "Delivered")["status"] == "True"
    assert "1 suspended" in condition(first, "Delivered")["message"]
    assert argo_health(first)["status"] == "Healthy"

    # s2's runtime takes its time; s3's refuses the new document
    sessions.holding.add("s2")
    sessions.refusing["s3"] = "the new note is not for me"
    generation = change(cluster, namespace, "2")
    pending = wait_rollout(
        cluster,
        "resource",
        namespace,
        "shared",
        rollout(generation, applied=2, pending=1, refused=1, suspended=1),
        what="s2 pending, s3 refused",
    )
    delivered = condition(pending, "Delivered")
    assert (delivered["status"], delivered["reason"]) == ("False", "Pending")
    assert f"{namespace}/s2" in delivered["message"]
    assert condition(pending, "Reconciling")["status"] == "True"  # progress ...
    assert condition(pending, "Stalled")["status"] == "False"  # ... never a failure
    assert condition(pending, "Ready")["status"] == "True"
    assert argo_health(pending)["status"] == "Progressing"
    lagging = {lag["agent"]: lag for lag in pending["status"]["rollout"]["laggards"]}
    assert lagging[f"{namespace}/s3"]["message"] == "the new note is not for me"
    assert lagging[f"{namespace}/s2"]["state"] == "Pending"
    assert "not yet sha256:" in lagging[f"{namespace}/s2"]["message"]
    told = why(cluster, namespace, "resource/shared")
    assert told.returncode == 0, told.stderr
    assert f"Resource {namespace}/shared (generation {generation})" in told.stdout
    assert "1 dependent agent(s) have not applied it yet" in told.stdout
    for line in (f"{namespace}/s3 Refused the new note is not for me", f"{namespace}/s2 Pending"):
        assert line in " ".join(told.stdout.split()), told.stdout

    sessions.holding.clear()
    refused = wait_rollout(
        cluster,
        "resource",
        namespace,
        "shared",
        rollout(generation, applied=3, pending=0, refused=1, delivered="3/5"),
        what="only s3's refusal left",
    )
    delivered = condition(refused, "Delivered")
    assert (delivered["status"], delivered["reason"]) == ("False", "Refused")
    assert f"{namespace}/s3 (the new note is not for me)" in delivered["message"]
    assert condition(refused, "Reconciling")["status"] == "False"
    assert condition(refused, "Stalled")["status"] == "False"

    # a deleted dependent drops out
    cluster.kubectl("delete", "agentspec", "s3", "-n", namespace, "--timeout=60s")
    done = wait_rollout(
        cluster,
        "resource",
        namespace,
        "shared",
        rollout(generation, dependents=4, applied=3, refused=0, delivered="3/4"),
        what="s3 gone",
    )
    assert condition(done, "Delivered")["status"] == "True"


def test_a_restart_keeps_the_counts_and_an_idle_fleet_writes_nothing(
    cluster: Cluster, crds: list[str], namespace: str, tmp_path: Path, sessions: Sessions
) -> None:
    apply_types(cluster)
    apply(
        cluster,
        namespace,
        shared(),
        *(agent(f"s{i}", resources=[BINDING], runtime=runtime(), relaunch=1) for i in (1, 2, 3)),
    )
    proc = ControllerProcess(cluster, namespace, tmp_path / "first", args=DELIVERING).start()
    try:
        wait_rollout(
            cluster, "resource", namespace, "shared", rollout(applied=3, pending=0), timeout=90
        )
        sessions.holding.add("s3")
        generation = change(cluster, namespace, "2")
        before = wait_rollout(
            cluster, "resource", namespace, "shared", rollout(generation, applied=2, pending=1)
        )
        settle(cluster, namespace)
        mark = audit_mark(cluster)
        settle(cluster, namespace, quiet=5.0)
        assert controller_writes(cluster, namespace, mark) == []  # idle: nothing written
    finally:
        proc.stop()

    mark = audit_mark(cluster)
    proc = ControllerProcess(cluster, namespace, tmp_path / "second", args=DELIVERING).start()
    try:
        settle(cluster, namespace, quiet=5.0, timeout=60)
        after = must_get(cluster, "resource", namespace, "shared")
        assert after["status"]["rollout"] == before["status"]["rollout"]
        status_writes = [
            w
            for w in controller_writes(cluster, namespace, mark)
            if w.resource in {"resources", "tools", "resourcetypes", "resourcegrants"}
        ]
        assert status_writes == []  # the restart rewrote no rollout

        sessions.holding.clear()  # the restarted controller sees the last one apply
        wait_rollout(
            cluster,
            "resource",
            namespace,
            "shared",
            rollout(generation, applied=3, pending=0, delivered="3/3"),
        )
        for name in ("s1", "s2", "s3"):
            cluster.kubectl("delete", "agentspec", name, "-n", namespace, "--timeout=60s")
    finally:
        proc.stop()


def test_a_grant_counts_the_agents_still_depending_on_it_after_a_revocation(
    cluster: Cluster, crds: list[str], namespace: str, tmp_path: Path
) -> None:
    apply_types(cluster)
    team = f"t-{uuid.uuid4().hex[:8]}-team"
    cluster.kubectl("create", "namespace", team)
    cluster.kubectl("label", "namespace", team, "bindery.dev/tenant=team")
    proc = ControllerProcess(
        cluster, namespace, tmp_path, args=("--standalone", "--namespace", team)
    ).start()
    try:
        first = resource("first", "file:///srv/rollout/first", labels={"pick": "first"})
        second = resource("second", "file:///srv/rollout/second", labels={"pick": "second"})
        grant: dict[str, Any] = {
            "apiVersion": "bindery.dev/v1alpha1",
            "kind": "ResourceGrant",
            "metadata": {"name": "share"},
            "spec": {
                "from": [{"namespaceSelector": {"matchLabels": {"bindery.dev/tenant": "team"}}}],
                "to": [{"name": "first"}, {"name": "second"}],
                "uses": ["selector"],
            },
        }
        apply(cluster, namespace, first, second, grant)
        selecting = [
            agent(
                name,
                tools=[{"name": "reader"}],
                selector={"matchLabels": {"pick": name}, "namespaces": [namespace]},
            )
            for name in ("first", "second")
        ]
        apply(cluster, team, tool("reader", ("picked", "fs-directory")), *selecting)
        wait_rollout(
            cluster,
            "resourcegrant",
            namespace,
            "share",
            rollout(dependents=2, applied=2, delivered="2/2"),
            what="both agents bind through the grant",
        )

        grant["spec"]["to"] = [{"name": "second"}]  # first is no longer shared
        apply(cluster, namespace, grant)
        revoked = wait_rollout(
            cluster,
            "resourcegrant",
            namespace,
            "share",
            rollout(2, dependents=1, applied=1, delivered="1/1"),
            what="only the agent still bound through it counts",
        )
        assert condition(revoked, "Delivered")["status"] == "True"
        wait_rollout(
            cluster,
            "resource",
            namespace,
            "first",
            rollout(dependents=0, delivered="0/0"),
            what="first has no dependent left",
        )
        cluster.kubectl("delete", "agentspec", "--all", "-n", team, "--timeout=60s")
    finally:
        proc.stop()
        cluster.kubectl("delete", "namespace", team, "--wait=false", check=False)
