"""Session pods found by what they are, and whether they have let go of an agent's work."""

from __future__ import annotations

from controller.domain import acknowledgement as ack
from controller.domain import session_pods as sp
from controller.domain.delivery import render

X = "gh://org/repo/issues/1"
LABELS = {
    "app.kubernetes.io/managed-by": "bindery",
    "app.kubernetes.io/component": "session",
    "bindery.dev/agent": "a",
}


def doc(work: str | None) -> str:
    """A bindings document carrying ``work`` as the agent's work (or none)."""
    resources = [{"name": "work", "tag": "issue", "uri": work, "state": "Bound"}]
    return render(
        {
            "apiVersion": "bindery.dev/v1alpha1",
            "kind": "Bindings",
            "agent": {"namespace": "team", "name": "a"},
            "resources": resources if work else [],
            "tools": [],
        }
    )


def pod(uid: str, *, running: bool = True, acknowledging: bool = True) -> ack.SessionPod:
    return ack.SessionPod(uid=uid, running=running, acknowledging=acknowledging)


def record(pod_uid: str, document: str) -> ack.Acknowledgement:
    return ack.Acknowledgement(pod_uid=pod_uid, delivered_digest=ack.digest(document))


def test_a_session_pod_is_known_by_its_labels_not_its_owner() -> None:
    assert sp.is_session_pod(LABELS, "a", "uid-1")
    assert sp.is_session_pod({**LABELS, sp.AGENT_UID_LABEL: "uid-1"}, "a", "uid-1")
    # Another incarnation's pod (a later agent of the same name) is not this one's session.
    assert not sp.is_session_pod({**LABELS, sp.AGENT_UID_LABEL: "uid-2"}, "a", "uid-1")
    # Asked by name only, every pod of the name counts.
    assert sp.is_session_pod({**LABELS, sp.AGENT_UID_LABEL: "uid-2"}, "a")
    for key in LABELS:
        assert not sp.is_session_pod({k: v for k, v in LABELS.items() if k != key}, "a")
    assert not sp.is_session_pod({**LABELS, "app.kubernetes.io/component": "bindings"}, "a")
    assert not sp.is_session_pod(LABELS, "b")


def test_standing_is_the_least_settled_running_pod() -> None:
    d = doc(None)
    confirmed = record("p1", d)
    assert sp.standing([], None, ack.digest(d)) == (ack.Confirmation.CONFIRMED, None)
    stopped = pod("p0", running=False)
    assert sp.standing([stopped], None, ack.digest(d)) == (ack.Confirmation.CONFIRMED, stopped)
    one = pod("p1")
    assert sp.standing([one], confirmed, ack.digest(d)) == (ack.Confirmation.CONFIRMED, one)
    # A second running pod (an orphan beside its successor): the record speaks for one only.
    other = pod("p2")
    assert sp.standing([one, other], confirmed, ack.digest(d)) == (
        ack.Confirmation.PENDING,
        other,
    )
    legacy = pod("p3", acknowledging=False)
    assert sp.standing([one, legacy], confirmed, ack.digest(d))[0] is (
        ack.Confirmation.UNVERIFIABLE
    )
    assert sp.standing([legacy, other], confirmed, ack.digest(d))[1] is other


def test_a_gone_agents_session_lets_go_only_stopped_or_acknowledged_without_the_work() -> None:
    with_x, without_x = doc(X), doc(None)
    assert sp.let_go([], None, "", [X])
    assert sp.let_go([pod("p1", running=False)], None, with_x, [X])
    # Running, and it acknowledged the document without X: let go.
    assert sp.let_go([pod("p1")], record("p1", without_x), without_x, [X])
    # Running, the current document still carries X: not let go, whatever it acknowledged.
    assert not sp.let_go([pod("p1")], record("p1", with_x), with_x, [X])
    # Running and silent, or another pod's record, or no document at all.
    assert not sp.let_go([pod("p1")], None, without_x, [X])
    assert not sp.let_go([pod("p1")], record("p0", without_x), without_x, [X])
    assert not sp.let_go([pod("p1")], record("p1", without_x), "", [X])
    # A pod that cannot acknowledge is waited for until it stops: no grace here.
    assert not sp.let_go([pod("p1", acknowledging=False)], None, without_x, [X])
