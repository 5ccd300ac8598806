"""The controller's side of delivery: the Lease's acknowledgement record, where the session stands
with the current document, and how an agent's status reports it."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from controller.domain.acknowledgement import (
    APPLIED_DIGEST,
    POD_UID,
    Acknowledgement,
    Confirmation,
    DeliveryView,
    SessionPod,
    confirmation,
    seconds_since,
)
from controller.domain.results import AgentResolution
from controller.domain.status import RELEASING_STATE, agent_status
from controller.domain.work import WorkPlan, WorkState

DIGEST = "sha256:0123456789abcdef0123456789"
OLD = "sha256:ffffffffffffffffffffffffff"
URI = "github-issue://example/project/1"
T0 = "2024-01-01T00:00:00Z"
POD = SessionPod(uid="pod-1", running=True, acknowledging=True)


def test_the_lease_annotations_round_trip_and_empty_fields_are_removed() -> None:
    record = Acknowledgement(pod_uid="pod-1", applied_digest=DIGEST, acknowledges=True)
    patch = record.annotations()
    assert patch[POD_UID] == "pod-1"
    assert patch[APPLIED_DIGEST] == DIGEST
    assert patch["bindery.dev/refusal"] is None  # an empty field removes its annotation
    kept = {k: v for k, v in patch.items() if v is not None}
    assert Acknowledgement.from_annotations(kept) == record


def test_an_acknowledging_runtime_confirms_only_what_it_applied() -> None:
    applied = Acknowledgement(
        pod_uid="pod-1", delivered_digest=DIGEST, applied_digest=OLD, acknowledges=True
    )
    assert not applied.confirms(DIGEST)  # delivered is not enough when the runtime acknowledges
    assert applied.confirms(OLD)
    delivered = Acknowledgement(pod_uid="pod-1", delivered_digest=DIGEST)
    assert delivered.confirms(DIGEST)  # a runtime that does not acknowledge: delivery counts


def test_where_the_session_stands_with_the_document() -> None:
    assert confirmation(None, None, DIGEST) is Confirmation.CONFIRMED
    ended = SessionPod(uid="pod-1", running=False, acknowledging=True)
    assert confirmation(ended, None, DIGEST) is Confirmation.CONFIRMED
    without_sidecar = SessionPod(uid="pod-1", running=True, acknowledging=False)
    assert confirmation(without_sidecar, None, DIGEST) is Confirmation.UNVERIFIABLE
    assert confirmation(POD, None, DIGEST) is Confirmation.PENDING
    other_pod = Acknowledgement(pod_uid="pod-0", delivered_digest=DIGEST)
    assert confirmation(POD, other_pod, DIGEST) is Confirmation.PENDING
    refused = Acknowledgement(pod_uid="pod-1", refused_digest=DIGEST, refusal="no")
    assert confirmation(POD, refused, DIGEST) is Confirmation.REFUSED
    delivered = Acknowledgement(pod_uid="pod-1", delivered_digest=DIGEST)
    assert confirmation(POD, delivered, DIGEST) is Confirmation.CONFIRMED
    assert confirmation(POD, delivered, OLD) is Confirmation.PENDING


def test_seconds_since_a_stamp_and_an_unreadable_one() -> None:
    now = datetime(2024, 1, 1, 0, 0, 30, tzinfo=UTC)
    assert seconds_since(T0, now) == 30.0
    assert seconds_since("2024-01-01T00:01:00Z", now) == 0.0  # never negative
    assert seconds_since("", now) == 0.0
    assert seconds_since("yesterday", now) == 0.0


def _status(delivery: DeliveryView, work: WorkPlan | None = None) -> dict[str, Any]:
    return agent_status(
        generation=2,
        resolution=AgentResolution(agent="team/alice"),
        work=work or WorkPlan(state=WorkState.IDLE),
        waiting_since="",
        config_map="alice-bindings",
        session=None,
        old={},
        now=T0,
        delivery=delivery,
    )


def _conditions(status: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {c["type"]: c for c in status["conditions"]}


def test_a_refused_document_is_stalled_and_its_refusal_shown() -> None:
    record = Acknowledgement(
        pod_uid="pod-1", delivered_digest=DIGEST, refused_digest=DIGEST, refusal="slot 'repo'?"
    )
    view = DeliveryView(DIGEST, T0, Confirmation.REFUSED, record=record, pod_uid="pod-1")
    status = _status(view)
    ready = _conditions(status)["Ready"]
    assert (ready["status"], ready["reason"]) == ("False", "DocumentRefused")
    assert f"refused bindings document {DIGEST[:19]}: slot 'repo'?" in ready["message"]
    assert _conditions(status)["Stalled"]["status"] == "True"
    assert status["delivery"] == {
        "digest": DIGEST,
        "writtenAt": T0,
        "deliveredDigest": DIGEST,
        "message": "slot 'repo'?",
        "podUID": "pod-1",
        "synced": False,
    }  # empty fields (what was applied, when) are left out


def test_an_overdue_acknowledgement_is_stalled_and_the_released_uri_named() -> None:
    view = DeliveryView(
        DIGEST, T0, Confirmation.PENDING, pod_uid="pod-1", overdue=True, releasing=(URI,)
    )
    status = _status(view)
    assert status["state"] == RELEASING_STATE
    ready = _conditions(status)["Ready"]
    assert ready["reason"] == "SessionNotAcknowledging"
    assert (
        f"session pod pod-1 has not acknowledged bindings document {DIGEST[:19]}"
        in (ready["message"])
    )
    assert f"work URI {URI!r} is released once it has" in ready["message"]
    assert _conditions(status)["Stalled"]["status"] == "True"


def test_a_pending_delivery_is_reconciling() -> None:
    status = _status(DeliveryView(DIGEST, T0, Confirmation.PENDING, pod_uid="pod-1"))
    ready = _conditions(status)["Ready"]
    assert ready["reason"] == "DeliveryPending"
    assert ready["message"] == f"waiting for the session to apply bindings document {DIGEST[:19]}"
    assert _conditions(status)["Reconciling"]["status"] == "True"
    assert status["delivery"]["synced"] is False


def test_a_confirmed_delivery_is_ready_and_synced() -> None:
    record = Acknowledgement(pod_uid="pod-1", delivered_digest=DIGEST, delivered_at=T0)
    status = _status(DeliveryView(DIGEST, T0, Confirmation.CONFIRMED, record=record))
    assert _conditions(status)["Ready"]["reason"] == "BindingsDelivered"
    assert status["delivery"] == {
        "digest": DIGEST,
        "writtenAt": T0,
        "deliveredDigest": DIGEST,
        "acknowledgedAt": T0,  # the delivery time when nothing acknowledged it yet
        "synced": True,
    }
