"""The chaos harness's replay checker on synthetic version streams (no cluster)."""

from __future__ import annotations

import random
import subprocess
import sys
from pathlib import Path
from typing import Any

from chaos.plane import Controller
from chaos.replay import (
    ACKNOWLEDGED_EXCLUSIVITY,
    AGENT,
    CONFIG_MAP,
    DELETED,
    EXCLUSIVITY,
    LEASE,
    POD,
    STATEFUL_SET,
    WITHOUT_HOLD,
    Version,
    final_state,
    replay,
)
from controller.domain import acknowledgement as ack
from controller.domain import names
from controller.domain.delivery import render
from controller.domain.work import hold_name

NS = "ns"
X = "github-issue://o/r/1"


def doc(agent: str, work: str | None) -> str:
    resources = [{"name": "work", "tag": "github-issue", "uri": work, "state": "Bound"}]
    return render(
        {
            "apiVersion": "bindery.dev/v1alpha1",
            "kind": "Bindings",
            "agent": {"namespace": NS, "name": agent},
            "resources": resources if work else [],
            "tools": [],
        }
    )


def cm(rv: int, agent: str, work: str | None, event: str = "MODIFIED") -> Version:
    body = {
        "metadata": {
            "name": f"{agent}-bindings",
            "labels": {"bindery.dev/agent": agent, "app.kubernetes.io/component": "bindings"},
        },
        "data": {"bindings.json": doc(agent, work)},
    }
    return Version(CONFIG_MAP, event, rv, body, received=rv / 10)


def hold(rv: int, agent: str, uri: str = X, event: str = "ADDED") -> Version:
    body = {
        "metadata": {
            "name": hold_name(uri),
            "annotations": {"bindery.dev/uri": uri, "bindery.dev/holder-uid": f"uid-{agent}"},
        },
        "spec": {"holderIdentity": f"{NS}/{agent}"},
    }
    return Version(LEASE, event, rv, body, received=rv / 10)


def handoff() -> list[Version]:
    """a holds X and has it delivered; a lets go; b acquires and receives X."""
    return [
        cm(1, "a", None, "ADDED"),
        cm(2, "b", None, "ADDED"),
        hold(3, "a"),
        cm(4, "a", X),
        cm(5, "a", None),
        hold(6, "a", event=DELETED),
        hold(7, "b"),
        cm(8, "b", X),
    ]


def test_a_clean_handoff_passes_in_any_arrival_order() -> None:
    versions = handoff()
    random.Random(7).shuffle(versions)  # noqa: S311 - kinds' watches interleave arbitrarily
    result = replay(versions)
    assert result.versions == 8
    assert result.episodes == []


def test_two_agents_delivered_the_same_work_uri_is_caught() -> None:
    versions = [*handoff()[:4], hold(5, "a", event=DELETED), hold(6, "b"), cm(7, "b", X)]
    versions += [cm(9, "a", None)]
    result = replay(versions)
    shared = result.of(EXCLUSIVITY)
    assert len(shared) == 1
    assert (shared[0].start_rv, shared[0].end_rv) == (7, 9)
    assert shared[0].key == (X, "a", "b")
    # a kept X delivered after its hold went: that is caught too, from rv 5.
    missing = result.of(WITHOUT_HOLD)
    assert [(e.key, e.start_rv) for e in missing] == [(("a", X), 5)]


def test_delivery_before_the_hold_is_created_is_caught() -> None:
    result = replay([cm(1, "a", X, "ADDED"), hold(2, "a")])
    [episode] = result.of(WITHOUT_HOLD)
    assert (episode.start_rv, episode.end_rv) == (1, 2)
    assert "no hold exists" in episode.detail


def test_a_deleted_bindings_config_map_delivers_nothing() -> None:
    result = replay([hold(1, "a"), cm(2, "a", X, "ADDED"), cm(3, "a", X, DELETED)])
    result2 = replay([*handoff()[:4], cm(5, "a", X, DELETED), hold(6, "a", event=DELETED)])
    assert result.episodes == []
    assert result2.episodes == []


def sts(rv: int, uid: str, agent_uid: str) -> Version:
    body = {
        "metadata": {
            "name": "a-session",
            "uid": uid,
            "ownerReferences": [{"kind": "AgentSpec", "uid": agent_uid}],
        }
    }
    return Version(STATEFUL_SET, "ADDED", rv, body)


def pod(rv: int, uid: str, sts_uid: str, generation: int, revision: str = "") -> Version:
    body = {
        "metadata": {
            "name": "a-session-0",
            "uid": uid,
            "labels": {
                "bindery.dev/agent": "a",
                "controller-revision-hash": revision or f"r{generation}",
            },
            "annotations": {"bindery.dev/launch-generation": str(generation)},
            "ownerReferences": [{"kind": "StatefulSet", "uid": sts_uid}],
        }
    }
    return Version(POD, "ADDED", rv, body)


def agent_version(rv: int, uid: str, relaunch: int) -> Version:
    body = {
        "metadata": {"name": "a", "uid": uid},
        "spec": {"runtime": {"image": "x"}, "relaunchGeneration": relaunch},
    }
    return Version(AGENT, "MODIFIED", rv, body)


def test_pod_replacements_are_intended_only_across_a_launch_generation() -> None:
    result = replay(
        [
            agent_version(1, "A", 0),
            sts(2, "S", "A"),
            pod(3, "p1", "S", 0),
            agent_version(4, "A", 1),
            pod(5, "p2", "S", 1),  # relaunch: intended
            pod(6, "p3", "S", 1),  # same workload, revision and generation: recreated in place
            pod(7, "p4", "S", 1, revision="r1-again"),  # template rewritten: unintended
            sts(8, "S2", "A"),  # the workload recreated for the same agent
            pod(9, "p5", "S2", 1, revision="r1-again"),  # a new workload: unintended too
            sts(10, "S3", "B"),  # another agent (a new incarnation): its first pod is no relaunch
            pod(11, "p6", "S3", 0),
        ]
    )
    assert result.relaunch_raises == 1
    assert [r.new_pod.split("/")[1] for r in result.replacements] == ["p2", "p3", "p4", "p5"]
    assert [r.new_pod.split("/")[1] for r in result.unintended] == ["p4", "p5"]
    assert [r.new_pod.split("/")[1] for r in result.in_place] == ["p3"]
    assert result.workload_recreations == 1


def agent_obj(name: str, work: str | None, state: str, generation: int = 2) -> dict[str, Any]:
    status: dict[str, Any] = {"observedGeneration": generation, "state": state}
    if work:
        status["work"] = {"uri": work}
    return {
        "metadata": {"name": name, "generation": generation},
        "spec": {"resources": [{"name": "work", "tag": "t", "uri": work}] if work else []},
        "status": status,
    }


def lease_obj(uri: str, agent: str) -> dict[str, Any]:
    v = hold(1, agent, uri)
    return v.body


def test_final_state_converged_and_stuck() -> None:
    agents = [
        agent_obj("a", X, "Working"),
        agent_obj("b", X, "Waiting"),
        agent_obj("c", None, "Idle"),
    ]
    config_maps = [cm(1, "a", X).body, cm(2, "b", None).body]
    assert final_state(agents, [lease_obj(X, "a")], config_maps).converged

    # The holder is gone (a ghost) while b waits: stuck.
    stuck = final_state(agents[1:], [lease_obj(X, "a")], [])
    assert not stuck.converged
    assert len(stuck.stuck) == 1
    assert "b" in stuck.stuck[0]


def test_an_agent_without_work_is_suspended_only_with_an_idle_policy() -> None:
    """An agent whose runtime has an idle policy rests Suspended without work (converged); one
    without such a policy must not."""
    idle_policy = agent_obj("a", None, "Suspended")
    idle_policy["spec"]["runtime"] = {"image": "i", "idle": {"suspendAfterSeconds": 5}}
    assert final_state([idle_policy], [], []).converged
    no_policy = agent_obj("b", None, "Suspended")
    no_policy["spec"]["runtime"] = {"image": "i"}
    result = final_state([no_policy], [], [])
    assert not result.converged
    assert result.inconsistent == ["b: no work but state Suspended"]


def test_final_state_lost_update() -> None:
    lagging = agent_obj("a", X, "Working")
    lagging["metadata"]["generation"] = 3
    wrong_uri = agent_obj("b", "github-issue://o/r/2", "Working")
    wrong_uri["status"]["work"]["uri"] = X
    result = final_state([lagging, wrong_uri], [lease_obj(X, "a")], [])
    assert len(result.lost) == 2


def test_a_failed_pass_is_not_converged_and_its_reason_is_in_the_finding() -> None:
    """A pass that failed keeps observedGeneration where it was and says why (ReconcileFailed):
    the run is not converged, and the finding carries the reason."""
    failed = agent_obj("a", X, "Error")
    failed["metadata"]["generation"] = 3
    failed["status"]["conditions"] = [
        {"type": "Ready", "status": "False", "reason": "ReconcileFailed", "message": "boom"}
    ]
    result = final_state([failed], [lease_obj(X, "a")], [])
    assert not result.converged
    assert result.lost == ["a: observedGeneration 2 != generation 3 (ReconcileFailed: boom)"]


def session_pod(
    rv: int, agent: str, uid: str, phase: str = "Running", event: str = "MODIFIED"
) -> Version:
    body = {
        "metadata": {
            "name": f"{agent}-session-0",
            "uid": uid,
            "labels": {
                "app.kubernetes.io/managed-by": "bindery",
                "app.kubernetes.io/component": "session",
                "bindery.dev/agent": agent,
            },
            "ownerReferences": [
                {
                    "kind": "StatefulSet",
                    "name": f"{agent}-session",
                    "uid": f"sts-{agent}",
                    "controller": True,
                }
            ],
        },
        "status": {"phase": phase},
    }
    return Version(POD, event, rv, body, received=rv / 10)


def acked(
    rv: int, agent: str, pod_uid: str, work: str | None, *, applied: str | None = "same"
) -> Version:
    """``agent``'s session (pod ``pod_uid``) acknowledges its document carrying ``work``: only
    delivered (``applied=None``: a runtime that does not acknowledge), or delivered and applied
    (``applied``: the work of the document applied, "same" for ``work``)."""
    delivered = ack.digest(doc(agent, work))
    record = ack.Acknowledgement(
        pod_uid=pod_uid,
        pod_name=f"{agent}-session-0",
        delivered_digest=delivered,
        applied_digest=(
            ""
            if applied is None
            else delivered
            if applied == "same"
            else ack.digest(doc(agent, applied))
        ),
        acknowledges=applied is not None,
    )
    annotations = {k: v for k, v in record.annotations().items() if v is not None}
    body = {
        "metadata": {"name": names.ack_lease_name(agent), "annotations": annotations},
        "spec": {"holderIdentity": f"{agent}-session-0"},
    }
    return Version(LEASE, "MODIFIED", rv, body, received=rv / 10)


def acknowledged_handoff() -> list[Version]:
    """a's session has X; the controller withdraws it and waits for a's acknowledgement before
    it hands X to b; b's session then acknowledges X."""
    return [
        session_pod(1, "a", "pa", event="ADDED"),
        session_pod(2, "b", "pb", event="ADDED"),
        hold(3, "a"),
        cm(4, "a", X, "ADDED"),
        acked(5, "a", "pa", X, applied=None),
        cm(6, "b", None, "ADDED"),
        acked(7, "b", "pb", None),
        cm(8, "a", None),
        acked(9, "a", "pa", None, applied=None),
        hold(10, "a", event=DELETED),
        hold(11, "b"),
        cm(12, "b", X),
        acked(13, "b", "pb", X),
    ]


def test_a_handoff_that_waits_for_the_acknowledgement_passes() -> None:
    result = replay(acknowledged_handoff())
    assert result.episodes == []
    assert result.acknowledgements == 4
    assert result.unknown_digests == set()


def test_two_sessions_acknowledging_the_same_work_uri_are_caught() -> None:
    """The hold went before a's session acknowledged the document without X: b's session
    acknowledged X while a's still had it."""
    versions = acknowledged_handoff()
    a_lets_go = versions.pop(8)
    versions = [*versions, Version(LEASE, a_lets_go.event, 14, a_lets_go.body, 1.4)]
    [episode] = replay(versions).of(ACKNOWLEDGED_EXCLUSIVITY)
    assert episode.key == (X, "a", "b")
    assert (episode.start_rv, episode.end_rv) == (13, 14)
    assert "a (pod a-session-0 uid pa" in episode.detail
    assert "first written to a-bindings at rv 4" in episode.detail
    assert "acknowledged on bindery-ack-b at rv 13" in episode.detail


def test_only_the_applied_document_counts_for_a_runtime_that_acknowledges() -> None:
    """Delivered without X is not enough once the runtime acknowledges: it still applies X."""
    versions = [
        session_pod(1, "a", "pa", event="ADDED"),
        session_pod(2, "b", "pb", event="ADDED"),
        cm(3, "a", X, "ADDED"),
        acked(4, "a", "pa", X),
        cm(5, "a", None),
        acked(6, "a", "pa", None, applied=X),  # delivered, not applied yet
        cm(7, "b", X, "ADDED"),
        acked(8, "b", "pb", X),
        acked(9, "a", "pa", None),  # applied
    ]
    [episode] = replay(versions).of(ACKNOWLEDGED_EXCLUSIVITY)
    assert (episode.start_rv, episode.end_rv) == (8, 9)


def test_a_session_whose_pod_has_gone_acknowledges_nothing() -> None:
    """The record of a pod that is gone, has ended, or is not the record's does not count."""
    base = [
        session_pod(1, "a", "pa", event="ADDED"),
        session_pod(2, "b", "pb", event="ADDED"),
        cm(3, "a", X, "ADDED"),
        acked(4, "a", "pa", X),
        cm(5, "b", X, "ADDED"),
    ]
    gone = session_pod(6, "a", "pa", event=DELETED)
    gone.body["metadata"].pop("uid")  # a deletion found by a relist names the pod only
    ended = session_pod(6, "a", "pa", phase="Succeeded")
    replaced = session_pod(6, "a", "pa2", event="ADDED")  # a new pod; "pa" still terminating
    for last in (gone, ended):
        assert replay([*base, last, acked(7, "b", "pb", X)]).of(ACKNOWLEDGED_EXCLUSIVITY) == []
    # A new pod that has acknowledged nothing, beside the old one: the old one's record counts.
    [episode] = replay([*base, replaced, acked(7, "b", "pb", X)]).of(ACKNOWLEDGED_EXCLUSIVITY)
    assert episode.start_rv == 7


def test_an_acknowledged_digest_without_a_recorded_document_is_reported() -> None:
    result = replay([session_pod(1, "a", "pa", event="ADDED"), acked(2, "a", "pa", X)])
    assert result.episodes == []
    assert result.unknown_digests == {ack.digest(doc("a", X))}


def test_a_controller_that_exits_by_itself_is_counted(tmp_path: Path) -> None:
    """Only starts that end without the harness's SIGKILL count as exits, each once."""
    controller = Controller(str(tmp_path / "kubeconfig"), "ns", tmp_path)
    controller.proc = subprocess.Popen([sys.executable, "-c", "raise SystemExit(4)"])
    controller.proc.wait(10)
    assert not controller.alive()
    assert not controller.alive()
    controller.kill()  # nothing left to kill
    assert controller.exits == ["controller-0.log exited by itself with code 4"]
    assert controller.kills == 0
    controller.proc = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    controller.kill()
    assert controller.kills == 1
    assert len(controller.exits) == 1
