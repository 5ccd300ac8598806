"""Sessions and the relaunch boundary (issue 7), against the real control plane.

The kwok node runs the session pods (they reach Running without containers), so every check here
reads the world: the session StatefulSet, its one pod, the bindings ConfigMap and the agent's
status.
"""

from __future__ import annotations

import json
import re
import time
from typing import Any

import pytest

from tests.integration.kube import (
    agent,
    apply,
    apply_examples,
    bindings_document,
    condition,
    get,
    must_get,
    ready,
    settle,
    wait_status,
)
from tests.integration.sessions_helpers import (
    BINDINGS_ENV,
    BINDINGS_MOUNT,
    IMAGE_A,
    IMAGE_B,
    LAUNCH_FIELDS,
    LAUNCH_GENERATION,
    LAUNCHED_AT,
    TRAJECTORY_HASH,
    PodWatch,
    apply_types,
    crash_loop,
    drifted,
    events,
    hold_exit,
    image,
    launched,
    pod_name,
    pod_ready,
    pods,
    release_exit,
    resource,
    running_pod,
    runtime,
    session_name,
    session_workloads,
    statefulset,
    terminating,
    tool,
    uid,
)
from tests.support import Cluster, ControllerProcess, audit_mark, controller_writes, wait_for

pytestmark = pytest.mark.integration

NOTES = {"name": "notes", "tag": "axe-worklog", "uri": "axe-worklog://example/project/7"}
EXTRA = {"name": "extra", "tag": "github-issue", "uri": "github-issue://example/project/7"}


def _session(
    name: str = "s",
    image_: str = IMAGE_A,
    *,
    relaunch: int | None = 1,
    resources: list[dict[str, str]] | None = None,
    tools: list[dict[str, Any]] | None = None,
    selector: dict[str, Any] | None = None,
) -> dict[str, Any]:
    return agent(
        name,
        resources=resources if resources is not None else [NOTES],
        tools=tools,
        selector=selector,
        runtime=runtime(image_),
        relaunch=relaunch,
    )


def _launched_session(
    cluster: Cluster, namespace: str, *objects: dict[str, Any], generation: int = 1
) -> tuple[dict[str, Any], dict[str, Any]]:
    """Apply ``objects`` (ending with agent ``s``); wait for its session; return (agent, pod)."""
    apply_types(cluster)
    apply(cluster, namespace, *(objects or (_session(),)))
    wait_status(cluster, "agentspec", namespace, "s", launched(generation), what="s launched")
    pod = running_pod(cluster, namespace, "s")
    settle(cluster, namespace)
    obj = must_get(cluster, "agentspec", namespace, "s")
    assert ready(obj), obj["status"]
    return obj, pod


# ====================================================================== 1. launch


def test_an_agent_with_a_runtime_gets_one_session_reading_its_bindings(
    cluster: Cluster, namespace: str, controller: ControllerProcess
) -> None:
    apply_examples(cluster, namespace)  # the reviewer has a runtime at relaunchGeneration 1
    apply(cluster, namespace, _session("plain", relaunch=None))  # relaunchGeneration defaults to 0

    for name, generation in (("reviewer", 1), ("plain", 0)):
        obj = wait_status(cluster, "agentspec", namespace, name, launched(generation))
        assert ready(obj), obj["status"]
        st = obj["status"]
        assert st["launch"] == f"{generation}/{generation}"
        assert st["launchedTrajectoryHash"].startswith("sha256:")
        relaunch = condition(obj, "RelaunchRequired")
        assert (relaunch["status"], relaunch["reason"]) == ("False", "UpToDate")

        sts = must_get(cluster, "statefulset", namespace, session_name(name))
        owner = sts["metadata"]["ownerReferences"]
        assert [(o["kind"], o["name"], o["uid"], o.get("controller")) for o in owner] == [
            ("AgentSpec", name, obj["metadata"]["uid"], True)
        ]
        # One replica, never two at once: a StatefulSet starts pod -0 again only once the old
        # one is gone, and rolls it only after it is Running and Ready.
        assert sts["spec"]["replicas"] == 1
        assert sts["spec"]["podManagementPolicy"] == "Parallel"
        assert sts["spec"]["updateStrategy"]["type"] == "RollingUpdate"
        assert sts["spec"]["updateStrategy"].get("rollingUpdate", {}).get("partition", 0) == 0
        annotations = sts["spec"]["template"]["metadata"]["annotations"]
        assert annotations[LAUNCH_GENERATION] == str(generation)
        assert annotations[TRAJECTORY_HASH] == st["launchedTrajectoryHash"]
        assert annotations[LAUNCHED_AT] == st["lastLaunchTime"]
        assert session_workloads(cluster, namespace, name) == [("StatefulSet", session_name(name))]

        pod = running_pod(cluster, namespace, name)
        assert pod["metadata"]["name"] == pod_name(name)
        pod_owner = pod["metadata"]["ownerReferences"]
        assert [(o["kind"], o["name"], o["uid"], o.get("controller")) for o in pod_owner] == [
            ("StatefulSet", session_name(name), sts["metadata"]["uid"], True)
        ]
        assert pod["spec"]["nodeName"] == "kwok-node-0"
        assert pod["metadata"]["annotations"][TRAJECTORY_HASH] == st["launchedTrajectoryHash"]
        assert pod["metadata"]["annotations"][LAUNCH_GENERATION] == str(generation)
        assert image(pod) == IMAGE_A  # the reviewer's image is busybox:1.36 too
        volumes = {v["name"]: v for v in pod["spec"]["volumes"]}
        mounts = [
            m
            for m in pod["spec"]["containers"][0]["volumeMounts"]
            if m["mountPath"] == BINDINGS_MOUNT
        ]
        assert len(mounts) == 1, pod["spec"]["containers"][0]["volumeMounts"]
        assert mounts[0].get("readOnly") is True
        assert volumes[mounts[0]["name"]]["configMap"]["name"] == f"{name}-bindings"
        assert volumes[mounts[0]["name"]]["configMap"]["name"] == st["bindingsConfigMap"]
        env = {e["name"]: e.get("value") for e in pod["spec"]["containers"][0]["env"]}
        assert env[BINDINGS_ENV] == f"{BINDINGS_MOUNT}/bindings.json"
        assert must_get(cluster, "configmap", namespace, f"{name}-bindings")["data"][
            "bindings.json"
        ]

    reviewer_env = {
        e["name"]: e.get("value")
        for e in running_pod(cluster, namespace, "reviewer")["spec"]["containers"][0]["env"]
    }
    assert reviewer_env["REVIEW_STYLE"] == "brief"
    assert reviewer_env["BINDERY_MODEL"] == "example-model"
    # The dev agent has no runtime: bindings only.
    assert session_workloads(cluster, namespace, "dev") == []
    assert pods(cluster, namespace, "dev") == []
    assert events(cluster, namespace, "reviewer", "Launched") == 1


# ====================================================================== 2. what never relaunches


def test_bindings_metadata_resources_tools_and_runtime_edits_never_restart_the_session(
    cluster: Cluster, namespace: str, controller: ControllerProcess
) -> None:
    selected = resource(
        "dir-a", "file:///srv/a", labels={"team": "a"}, attributes={"owner": "alice"}
    )
    lister = tool("lister", ("dir", "fs-directory"))
    uses = [{"name": "lister"}]
    team_a = {"matchLabels": {"team": "a"}}
    s = _session(tools=uses, selector=team_a)
    obj, pod = _launched_session(cluster, namespace, selected, lister, s)
    sts = must_get(cluster, "statefulset", namespace, session_name("s"))
    generation, template = sts["metadata"]["generation"], sts["spec"]["template"]
    launch = {k: obj["status"][k] for k in LAUNCH_FIELDS}

    def untouched(after: str) -> None:
        settle(cluster, namespace)
        now = pods(cluster, namespace, "s")
        assert [uid(p) for p in now] == [uid(pod)], f"the session pod changed after {after}"
        assert now[0]["status"]["phase"] == "Running"
        current = must_get(cluster, "statefulset", namespace, session_name("s"))
        assert current["metadata"]["generation"] == generation, f"pod template rolled: {after}"
        assert current["spec"]["template"] == template, after
        st = must_get(cluster, "agentspec", namespace, "s")["status"]
        assert {k: st.get(k) for k in ("launch", "observedLaunchGeneration")} == {
            "launch": launch["launch"],
            "observedLaunchGeneration": launch["observedLaunchGeneration"],
        }, after
        assert st["launchedTrajectoryHash"] == launch["launchedTrajectoryHash"], after
        assert st["lastLaunchTime"] == launch["lastLaunchTime"], after

    def document() -> dict[str, Any]:
        doc = bindings_document(cluster, namespace, "s")
        assert doc is not None
        return doc

    def roles() -> set[str]:
        return {r["name"] for r in document()["resources"]}

    def slot(tool_: str, name: str) -> dict[str, Any]:
        t = next(t for t in document()["tools"] if t["name"] == tool_)
        found: dict[str, Any] = next(s for s in t["slots"] if s["name"] == name)
        return found

    assert roles() == {"notes"}
    assert slot("lister", "dir")["resource"]["uri"] == "file:///srv/a"

    # A direct binding added, then removed: the document follows, the session does not move.
    apply(cluster, namespace, _session(resources=[NOTES, EXTRA], tools=uses, selector=team_a))
    wait_for(lambda: roles() == {"notes", "extra"}, what="the added binding to be delivered")
    extra = next(r for r in document()["resources"] if r["name"] == "extra")
    assert (extra["tag"], extra["uri"]) == (EXTRA["tag"], EXTRA["uri"])
    untouched("adding a direct binding")
    apply(cluster, namespace, s)
    wait_for(lambda: roles() == {"notes"}, what="the removed binding to leave the document")
    untouched("removing a direct binding")

    # Labels and annotations on the agent: nothing at all changes.
    cm_version = must_get(cluster, "configmap", namespace, "s-bindings")["metadata"][
        "resourceVersion"
    ]
    status_before = must_get(cluster, "agentspec", namespace, "s")["status"]
    cluster.kubectl("label", "-n", namespace, "agentspec", "s", "touched=yes")
    cluster.kubectl("annotate", "-n", namespace, "agentspec", "s", "note=hello")
    untouched("labelling and annotating the agent")
    assert must_get(cluster, "agentspec", namespace, "s")["status"] == status_before
    cm = must_get(cluster, "configmap", namespace, "s-bindings")
    assert cm["metadata"]["resourceVersion"] == cm_version

    # A selected Resource's attributes (not delivered), then its alias (delivered).
    attributed = resource(
        "dir-a", "file:///srv/a", labels={"team": "a"}, attributes={"owner": "bob"}
    )
    apply(cluster, namespace, attributed)
    wait_status(cluster, "resource", namespace, "dir-a", ready)
    untouched("changing a selected Resource's attributes")
    aliased = resource(
        "dir-a", "file:///srv/a", labels={"team": "a"}, attributes={"owner": "bob"}, alias="scratch"
    )
    apply(cluster, namespace, aliased)
    wait_for(
        lambda: slot("lister", "dir")["resource"].get("alias") == "scratch",
        what="the Resource's new alias to be delivered",
    )
    untouched("changing a selected Resource's alias")

    # A Tool gains a slot: the document grows a slot, the session stays.
    apply(cluster, namespace, tool("lister", ("dir", "fs-directory"), ("ticket", "github-issue")))
    wait_for(
        lambda: {s["name"] for s in document()["tools"][0]["slots"]} == {"dir", "ticket"},
        what="the new slot to be delivered",
    )
    untouched("adding a slot to a Tool")

    # The runtime changes without a raised relaunchGeneration: drift, no restart.
    doc_before = document()
    apply(cluster, namespace, _session(image_=IMAGE_B, tools=uses, selector=team_a))
    wait_status(cluster, "agentspec", namespace, "s", drifted, what="s to show drift")
    untouched("changing the runtime without raising relaunchGeneration")
    assert document() == doc_before
    assert image(pods(cluster, namespace, "s")[0]) == IMAGE_A


# ====================================================================== 3. drift


def _columns(cluster: Cluster, namespace: str, name: str) -> dict[str, str]:
    """The agent's row of ``kubectl get agentspec -o wide``, by column header (cut where the
    header's columns start: an empty cell prints nothing)."""
    header, row = cluster.kubectl(
        "get", "agentspec", name, "-n", namespace, "-o", "wide"
    ).stdout.splitlines()[:2]
    starts = [m.start() for m in re.finditer(r"\S+", header)]
    ends = [*starts[1:], None]
    return {header[a:b].strip(): row[a:b].strip() for a, b in zip(starts, ends, strict=True)}


def _event_types(cluster: Cluster, namespace: str, name: str, reason: str) -> list[str]:
    """The types (Normal, Warning) of the agent's events with ``reason``."""
    return cluster.kubectl(
        "get", "events", "-n", namespace, "--field-selector",
        f"involvedObject.name={name},reason={reason}", "-o", "jsonpath={.items[*].type}",
    ).stdout.split()  # fmt: skip


def test_a_runtime_change_without_relaunch_is_drift_shown_not_acted_on(
    cluster: Cluster, namespace: str, controller: ControllerProcess
) -> None:
    obj, pod = _launched_session(cluster, namespace)
    launched_hash = obj["status"]["launchedTrajectoryHash"]
    generation = must_get(cluster, "statefulset", namespace, session_name("s"))["metadata"][
        "generation"
    ]

    apply(cluster, namespace, _session(image_=IMAGE_B))
    obj = wait_status(cluster, "agentspec", namespace, "s", drifted, what="s to show drift")
    st = obj["status"]
    assert st["launchedTrajectoryHash"] == launched_hash
    assert st["desiredTrajectoryHash"] != launched_hash
    assert st["desiredTrajectoryHash"].startswith("sha256:")
    assert (st["launch"], st["observedLaunchGeneration"], st["desiredLaunchGeneration"]) == (
        "1/1",
        1,
        1,
    )
    relaunch = condition(obj, "RelaunchRequired")
    assert relaunch["reason"] == "TrajectoryChanged"
    assert relaunch["observedGeneration"] == obj["metadata"]["generation"]
    assert "relaunchGeneration" in relaunch["message"]
    assert ready(obj), "drift is not an error: the agent stays Ready"
    assert st["drift"] is True

    # Where users look: `kubectl get -o wide` shows the drift, and one Normal event says what to
    # do (once per drift, not once per pass).
    row = _columns(cluster, namespace, "s")
    assert (row["LAUNCH"], row["DRIFT"], row["READY"]) == ("1/1", "true", "True")
    said = wait_for(
        lambda: _event_types(cluster, namespace, "s", "RelaunchRequired") or None,
        timeout=30,
        what="a RelaunchRequired event",
    )
    assert said == ["Normal"]
    message = cluster.kubectl(
        "get", "events", "-n", namespace, "--field-selector",
        "involvedObject.name=s,reason=RelaunchRequired", "-o", "jsonpath={.items[0].message}",
    ).stdout  # fmt: skip
    assert "change spec.relaunchGeneration" in message, message

    settle(cluster, namespace)
    assert _event_types(cluster, namespace, "s", "RelaunchRequired") == ["Normal"]
    now = pods(cluster, namespace, "s")
    assert [uid(p) for p in now] == [uid(pod)]
    assert image(now[0]) == IMAGE_A
    assert now[0]["metadata"]["annotations"][TRAJECTORY_HASH] == launched_hash
    sts = must_get(cluster, "statefulset", namespace, session_name("s"))
    assert sts["metadata"]["generation"] == generation
    assert image(sts["spec"]["template"]) == IMAGE_A

    # Reverting the runtime clears the drift, still without touching the session.
    apply(cluster, namespace, _session())
    obj = wait_status(cluster, "agentspec", namespace, "s", launched(1), what="drift cleared")
    assert obj["status"]["desiredTrajectoryHash"] == launched_hash
    assert _columns(cluster, namespace, "s")["DRIFT"] == "false"
    settle(cluster, namespace)
    assert [uid(p) for p in pods(cluster, namespace, "s")] == [uid(pod)]
    sts = must_get(cluster, "statefulset", namespace, session_name("s"))
    assert sts["metadata"]["generation"] == generation
    assert events(cluster, namespace, "s", "Relaunched") == 0


# ====================================================================== 4. relaunch


def _relaunch(
    cluster: Cluster, namespace: str, old: dict[str, Any], to: int, image_: str
) -> dict[str, Any]:
    """Raise relaunchGeneration to ``to`` (runtime ``image_``); check exactly one relaunch.

    The old pod is made to terminate slowly (as a real kubelet's grace period would), so the
    check that no second session pod runs meanwhile is not vacuous. The StatefulSet's rolling
    update deletes pod -0 and creates its successor, by the same name, once it is gone.
    """
    before = must_get(cluster, "agentspec", namespace, "s")["status"]
    sts_before = must_get(cluster, "statefulset", namespace, session_name("s"))
    hold_exit(cluster, namespace, old)
    try:
        with PodWatch(cluster, namespace, "s") as pods_seen:
            apply(cluster, namespace, _session(image_=image_, relaunch=to))
            wait_for(lambda: terminating(cluster, namespace, old), what="the old pod to be stopped")
            time.sleep(3)  # the old pod is still running: nothing else may start meanwhile
            assert set(pods_seen.images) == {uid(old)}, "a new pod started beside the old one"
            assert [uid(p) for p in pods(cluster, namespace, "s")] == [uid(old)]
            release_exit(cluster, namespace, old)
            obj = wait_status(cluster, "agentspec", namespace, "s", launched(to), what="relaunch")
            new = running_pod(cluster, namespace, "s", not_uid=uid(old))
            wait_for(lambda: pods_seen.running() == {uid(new)}, what="the watch to see it")
            settle(cluster, namespace)  # and nothing more happens afterwards
    finally:
        release_exit(cluster, namespace, old)
    assert pods_seen.overlaps == [], f"two session pods Running at once: {pods_seen.overlaps}"
    assert pods_seen.ran == [uid(old), uid(new)], (pods_seen.ran, pods_seen.images)
    assert set(pods_seen.images) == {uid(old), uid(new)}, pods_seen.images
    assert set(pods_seen.names.values()) == {pod_name("s")}, pods_seen.names
    assert pods_seen.images[uid(new)] == image_
    assert [uid(p) for p in pods(cluster, namespace, "s")] == [uid(new)]

    st = obj["status"]
    assert st["launchedTrajectoryHash"] == st["desiredTrajectoryHash"]
    assert condition(obj, "RelaunchRequired")["reason"] == "UpToDate"
    assert st["lastLaunchTime"] >= before["lastLaunchTime"]
    sts = must_get(cluster, "statefulset", namespace, session_name("s"))
    assert sts["metadata"]["generation"] == sts_before["metadata"]["generation"] + 1
    annotations = sts["spec"]["template"]["metadata"]["annotations"]
    assert annotations[LAUNCH_GENERATION] == str(to)
    assert annotations[TRAJECTORY_HASH] == st["launchedTrajectoryHash"]
    assert image(sts["spec"]["template"]) == image_
    assert new["metadata"]["annotations"][TRAJECTORY_HASH] == st["launchedTrajectoryHash"]
    # The rollout is complete: the new pod is of the StatefulSet's update revision.
    rolled = wait_status(
        cluster,
        "statefulset",
        namespace,
        session_name("s"),
        lambda o: (
            (o.get("status") or {}).get("observedGeneration") == o["metadata"]["generation"]
            and o["status"].get("currentRevision") == o["status"].get("updateRevision")
        ),
        what="the StatefulSet's rollout to complete",
    )
    assert (
        new["metadata"]["labels"]["controller-revision-hash"] == rolled["status"]["updateRevision"]
    )
    assert rolled["status"]["updateRevision"] != (sts_before.get("status") or {}).get(
        "updateRevision"
    )
    return new


def test_raising_relaunch_generation_relaunches_once_with_the_current_runtime(
    cluster: Cluster, namespace: str, controller: ControllerProcess
) -> None:
    _, first = _launched_session(cluster, namespace)
    apply(cluster, namespace, _session(image_=IMAGE_B))
    drift = wait_status(cluster, "agentspec", namespace, "s", drifted)
    drift_hash = drift["status"]["desiredTrajectoryHash"]
    settle(cluster, namespace)
    assert [uid(p) for p in pods(cluster, namespace, "s")] == [uid(first)]

    second = _relaunch(cluster, namespace, first, 2, IMAGE_B)
    after = must_get(cluster, "agentspec", namespace, "s")["status"]
    assert after["launchedTrajectoryHash"] == drift_hash
    assert events(cluster, namespace, "s", "Relaunched") == 1

    # Raising it again relaunches once more, even with the runtime unchanged.
    third = _relaunch(cluster, namespace, second, 3, IMAGE_B)
    assert uid(third) not in {uid(first), uid(second)}
    assert events(cluster, namespace, "s", "Relaunched") == 2
    assert events(cluster, namespace, "s", "Launched") == 1


def test_raising_relaunch_generation_replaces_a_crash_looping_session(
    cluster: Cluster, namespace: str, controller: ControllerProcess
) -> None:
    """A relaunch is how a user gets a broken session (a bad image, a crashing runtime) going
    again: it must replace the pod also when that pod is not Ready, still never two at once."""
    _, old = _launched_session(cluster, namespace)
    crash_loop(cluster, namespace, old)
    time.sleep(1)
    assert not pod_ready(must_get(cluster, "pod", namespace, pod_name("s")))
    hold_exit(cluster, namespace, old)
    try:
        with PodWatch(cluster, namespace, "s") as pods_seen:
            apply(cluster, namespace, _session(image_=IMAGE_B, relaunch=2))
            # Relaunched (the controller's record says 2), but LAUNCH reads 1/2 until a pod of
            # generation 2 runs: the old one is still stopping.
            relaunching = wait_status(
                cluster,
                "agentspec",
                namespace,
                "s",
                lambda o: o["status"].get("launchedGeneration") == 2,
                what="relaunch",
            )
            assert relaunching["status"]["launch"] == "1/2"
            wait_for(
                lambda: terminating(cluster, namespace, old),
                timeout=20,
                what="the crash-looping pod to be stopped for the relaunch",
            )
            time.sleep(2)  # it still runs: nothing else may start meanwhile
            assert set(pods_seen.images) == {uid(old)}, "a new pod started beside the old one"
            release_exit(cluster, namespace, old)
            new = running_pod(cluster, namespace, "s", not_uid=uid(old))
            wait_for(lambda: pods_seen.running() == {uid(new)}, what="the watch to see it")
            wait_status(cluster, "agentspec", namespace, "s", launched(2), what="2/2")
    finally:
        release_exit(cluster, namespace, old)
    assert pods_seen.overlaps == [], f"two session pods Running at once: {pods_seen.overlaps}"
    assert image(new) == IMAGE_B
    assert new["metadata"]["annotations"][LAUNCH_GENERATION] == "2"
    assert events(cluster, namespace, "s", "Relaunched") == 1


# ====================================================================== 5. controller restart


def test_a_restarted_controller_adopts_the_session_and_relaunches_nothing(
    cluster: Cluster, namespace: str, controller: ControllerProcess
) -> None:
    obj, pod = _launched_session(cluster, namespace)
    sts = must_get(cluster, "statefulset", namespace, session_name("s"))
    launch = {k: obj["status"][k] for k in LAUNCH_FIELDS}

    controller.kill()
    # While it is down: the runtime drifts, and the agent's status is scribbled over, so the
    # only place the restarted controller can learn the launch from is the workload itself.
    apply(cluster, namespace, _session(image_=IMAGE_B))
    bogus = {
        "launch": "7/7",
        "observedLaunchGeneration": 7,
        "launchedTrajectoryHash": "sha256:bogus",
        "lastLaunchTime": "2000-01-01T00:00:00Z",
    }
    cluster.kubectl(
        "patch",
        "-n",
        namespace,
        "agentspec",
        "s",
        "--subresource=status",
        "--type=merge",
        "-p",
        json.dumps({"status": bogus}),
    )
    assert must_get(cluster, "agentspec", namespace, "s")["status"]["observedLaunchGeneration"] == 7
    mark = audit_mark(cluster)

    controller.start()
    obj = wait_status(cluster, "agentspec", namespace, "s", drifted, what="s adopted, drifted")
    settle(cluster, namespace)
    st = must_get(cluster, "agentspec", namespace, "s")["status"]
    assert st["observedLaunchGeneration"] == 1
    assert st["launch"] == "1/1"
    assert st["launchedTrajectoryHash"] == launch["launchedTrajectoryHash"]
    assert st["lastLaunchTime"] == launch["lastLaunchTime"]
    assert st["desiredTrajectoryHash"] != launch["launchedTrajectoryHash"]
    assert condition(obj, "RelaunchRequired")["reason"] == "TrajectoryChanged"

    assert [uid(p) for p in pods(cluster, namespace, "s")] == [uid(pod)]
    after = must_get(cluster, "statefulset", namespace, session_name("s"))
    assert after["metadata"]["generation"] == sts["metadata"]["generation"]
    assert after["spec"]["template"] == sts["spec"]["template"]
    writes = controller_writes(cluster, namespace, mark)
    workload = ("statefulsets", "pods", "controllerrevisions", "configmaps")
    assert not [w for w in writes if w.resource in workload], writes
    assert events(cluster, namespace, "s", "Relaunched") == 0

    # A restart with nothing changed writes nothing at all.
    controller.kill()
    mark = audit_mark(cluster)
    controller.start()
    time.sleep(4)
    assert controller_writes(cluster, namespace, mark) == []
    assert [uid(p) for p in pods(cluster, namespace, "s")] == [uid(pod)]


def test_a_relaunch_raised_while_the_controller_was_down_happens_once_on_restart(
    cluster: Cluster, namespace: str, controller: ControllerProcess
) -> None:
    _, first = _launched_session(cluster, namespace)
    controller.kill()
    apply(cluster, namespace, _session(image_=IMAGE_B, relaunch=2))
    time.sleep(1)
    assert [uid(p) for p in pods(cluster, namespace, "s")] == [uid(first)]
    controller.start()
    wait_status(cluster, "agentspec", namespace, "s", launched(2), what="relaunch on restart")
    second = running_pod(cluster, namespace, "s", not_uid=uid(first))
    assert image(second) == IMAGE_B
    settle(cluster, namespace)
    assert [uid(p) for p in pods(cluster, namespace, "s")] == [uid(second)]
    assert events(cluster, namespace, "s", "Relaunched") == 1


# ====================================================================== 6. a deleted pod


def test_a_deleted_session_pod_comes_back_with_the_launched_trajectory(
    cluster: Cluster, namespace: str, controller: ControllerProcess
) -> None:
    obj, pod = _launched_session(cluster, namespace)
    launched_hash = obj["status"]["launchedTrajectoryHash"]
    generation = must_get(cluster, "statefulset", namespace, session_name("s"))["metadata"][
        "generation"
    ]
    apply(cluster, namespace, _session(image_=IMAGE_B))
    wait_status(cluster, "agentspec", namespace, "s", drifted)
    settle(cluster, namespace)

    cluster.kubectl("delete", "pod", "-n", namespace, pod["metadata"]["name"], "--wait=false")
    back = running_pod(cluster, namespace, "s", not_uid=uid(pod))
    assert back["metadata"]["name"] == pod_name("s")
    assert image(back) == IMAGE_A, "the replacement runs the drifted runtime"
    assert back["metadata"]["annotations"][TRAJECTORY_HASH] == launched_hash
    assert back["metadata"]["annotations"][LAUNCH_GENERATION] == "1"
    settle(cluster, namespace)
    assert [uid(p) for p in pods(cluster, namespace, "s")] == [uid(back)]
    sts = must_get(cluster, "statefulset", namespace, session_name("s"))
    assert sts["metadata"]["generation"] == generation
    st = must_get(cluster, "agentspec", namespace, "s")
    assert drifted(st)
    assert st["status"]["launchedTrajectoryHash"] == launched_hash
    assert st["status"]["launch"] == "1/1"
    assert events(cluster, namespace, "s", "Relaunched") == 0


def test_a_deleted_session_pod_is_not_replaced_while_it_still_runs(
    cluster: Cluster, namespace: str, controller: ControllerProcess
) -> None:
    """One replica, never two at once: also when the pod is deleted (eviction, drain, by hand).

    A real kubelet keeps a deleted pod's containers running for its grace period; the finalizer
    stands in for that, since kwok removes a deleted pod at once. The runtime has drifted
    meanwhile, so the replacement shows whether it runs the launched trajectory.
    """
    obj, pod = _launched_session(cluster, namespace)
    launched_hash = obj["status"]["launchedTrajectoryHash"]
    generation = must_get(cluster, "statefulset", namespace, session_name("s"))["metadata"][
        "generation"
    ]
    apply(cluster, namespace, _session(image_=IMAGE_B))
    wait_status(cluster, "agentspec", namespace, "s", drifted, what="s to show drift")
    settle(cluster, namespace)
    hold_exit(cluster, namespace, pod)
    try:
        with PodWatch(cluster, namespace, "s") as pods_seen:
            mark = audit_mark(cluster)
            cluster.kubectl(
                "delete", "pod", "-n", namespace, pod["metadata"]["name"], "--wait=false"
            )
            wait_for(lambda: terminating(cluster, namespace, pod), what="the pod to be stopped")
            time.sleep(3)  # the old session still runs: no second one may start meanwhile
            assert set(pods_seen.images) == {uid(pod)}, "a new pod started beside the old one"
            held = pods(cluster, namespace, "s")
            assert [uid(p) for p in held] == [uid(pod)], "a new pod started beside the old one"
            assert held[0]["status"]["phase"] == "Running"
            assert held[0]["metadata"].get("deletionTimestamp")
            assert pods_seen.running() == {uid(pod)}
            release_exit(cluster, namespace, pod)
            back = running_pod(cluster, namespace, "s", not_uid=uid(pod))
            wait_for(lambda: pods_seen.running() == {uid(back)}, what="the watch to see it")
            settle(cluster, namespace)
    finally:
        release_exit(cluster, namespace, pod)
    assert pods_seen.overlaps == [], f"two session pods Running at once: {pods_seen.overlaps}"
    assert pods_seen.ran == [uid(pod), uid(back)], (pods_seen.ran, pods_seen.images)
    assert set(pods_seen.images) == {uid(pod), uid(back)}, pods_seen.images
    assert set(pods_seen.names.values()) == {pod_name("s")}, pods_seen.names
    assert [uid(p) for p in pods(cluster, namespace, "s")] == [uid(back)]
    assert image(back) == IMAGE_A, "the replacement runs the drifted runtime"
    assert back["metadata"]["annotations"][TRAJECTORY_HASH] == launched_hash
    assert back["metadata"]["annotations"][LAUNCH_GENERATION] == "1"
    # The StatefulSet controller brought it back: Bindery wrote nothing to the workload.
    writes = controller_writes(cluster, namespace, mark)
    workload = ("statefulsets", "pods", "controllerrevisions")
    assert not [w for w in writes if w.resource in workload], writes
    sts = must_get(cluster, "statefulset", namespace, session_name("s"))
    assert sts["metadata"]["generation"] == generation
    st = must_get(cluster, "agentspec", namespace, "s")
    assert drifted(st)
    assert (st["status"]["launch"], st["status"]["launchedTrajectoryHash"]) == (
        "1/1",
        launched_hash,
    )
    assert events(cluster, namespace, "s", "Relaunched") == 0


# ====================================================================== 7. no runtime


def test_an_agent_without_runtime_gets_bindings_only_and_losing_it_ends_the_session(
    cluster: Cluster, namespace: str, controller: ControllerProcess
) -> None:
    apply_types(cluster)
    apply(cluster, namespace, agent("bare", resources=[NOTES]))
    obj = wait_status(cluster, "agentspec", namespace, "bare", ready)
    settle(cluster, namespace)
    assert bindings_document(cluster, namespace, "bare") is not None
    assert get(cluster, "statefulset", namespace, session_name("bare")) is None
    assert session_workloads(cluster, namespace, "bare") == []
    assert pods(cluster, namespace, "bare") == []
    st = must_get(cluster, "agentspec", namespace, "bare")["status"]
    assert not set(LAUNCH_FIELDS) & set(st), st
    assert condition(obj, "RelaunchRequired") == {}

    _launched_session(cluster, namespace, _session(relaunch=2), generation=2)
    apply(cluster, namespace, agent("s", resources=[NOTES], relaunch=2))
    wait_for(
        lambda: statefulset(cluster, namespace, "s") is None,
        what="the session StatefulSet to be deleted",
    )
    wait_for(
        lambda: pods(cluster, namespace, "s") == [],
        timeout=60,
        what="the session pod to be garbage-collected",
    )
    obj = wait_status(
        cluster,
        "agentspec",
        namespace,
        "s",
        lambda o: ready(o) and not set(LAUNCH_FIELDS) & set(o["status"]),
        what="the launch status to go",
    )
    assert condition(obj, "RelaunchRequired") == {}
    assert bindings_document(cluster, namespace, "s") is not None
    settle(cluster, namespace)
    assert statefulset(cluster, namespace, "s") is None
    assert session_workloads(cluster, namespace, "s") == []
