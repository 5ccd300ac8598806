"""Acknowledgements: what a session says it did with a bindings document, and what follows.

A document is identified by its digest (sha256 of its bytes). The session's delivery sidecar
records, on the agent's acknowledgement Lease (``bindery-ack-<agent>``), which pod it speaks for
and the digests it delivered (the file is in place) and that the runtime applied or refused.
This module reads and writes those records and decides, from them and the session pod, whether
the session has let go of what the controller withdrew: the condition for releasing a ``work``
hold (handoff A -> no holder -> B) and for an agent to be Ready.

What the runtime writes for the sidecar to read (the acknowledgement file, its path, its states,
the digest that names a document) is the session library's wire (:mod:`bindery_session.wire`),
re-exported here under the names the controller uses.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime
from enum import Enum

from bindery_session.wire import (
    ACK_ENV,
    ACK_FILE,
    ACK_MOUNT,
    APPLIED,
    REFUSED,
    STARTED,
    digest,
)

__all__ = [
    "ACKNOWLEDGED_AT",
    "ACKNOWLEDGES",
    "ACK_ENV",
    "ACK_FILE",
    "ACK_MOUNT",
    "ANNOTATIONS",
    "APPLIED",
    "APPLIED_DIGEST",
    "DELIVERED_AT",
    "DELIVERED_DIGEST",
    "POD_NAME",
    "POD_UID",
    "REFUSAL",
    "REFUSED",
    "REFUSED_DIGEST",
    "STARTED",
    "Acknowledgement",
    "Confirmation",
    "DeliveryView",
    "SessionPod",
    "confirmation",
    "countable_time",
    "digest",
    "read_time",
    "seconds_since",
]

POD_UID = "bindery.dev/pod-uid"
POD_NAME = "bindery.dev/pod-name"
DELIVERED_DIGEST = "bindery.dev/delivered-digest"
DELIVERED_AT = "bindery.dev/delivered-at"
APPLIED_DIGEST = "bindery.dev/applied-digest"
REFUSED_DIGEST = "bindery.dev/refused-digest"
REFUSAL = "bindery.dev/refusal"
ACKNOWLEDGED_AT = "bindery.dev/acknowledged-at"
ACKNOWLEDGES = "bindery.dev/acknowledges"
ANNOTATIONS = (
    POD_UID,
    POD_NAME,
    DELIVERED_DIGEST,
    DELIVERED_AT,
    APPLIED_DIGEST,
    REFUSED_DIGEST,
    REFUSAL,
    ACKNOWLEDGED_AT,
    ACKNOWLEDGES,
)


@dataclass(frozen=True)
class Acknowledgement:
    """One session pod's record on the acknowledgement Lease."""

    pod_uid: str = ""
    pod_name: str = ""
    delivered_digest: str = ""
    delivered_at: str = ""
    applied_digest: str = ""
    refused_digest: str = ""
    refusal: str = ""
    acknowledged_at: str = ""
    acknowledges: bool = False
    """The runtime has acknowledged something in this pod: only ``applied`` counts from now."""

    @classmethod
    def from_annotations(cls, annotations: dict[str, str]) -> Acknowledgement:
        return cls(
            pod_uid=annotations.get(POD_UID, ""),
            pod_name=annotations.get(POD_NAME, ""),
            delivered_digest=annotations.get(DELIVERED_DIGEST, ""),
            delivered_at=annotations.get(DELIVERED_AT, ""),
            applied_digest=annotations.get(APPLIED_DIGEST, ""),
            refused_digest=annotations.get(REFUSED_DIGEST, ""),
            refusal=annotations.get(REFUSAL, ""),
            acknowledged_at=annotations.get(ACKNOWLEDGED_AT, ""),
            acknowledges=annotations.get(ACKNOWLEDGES) == "true",
        )

    def annotations(self) -> dict[str, str | None]:
        """The merge patch of the Lease's annotations for this record (None removes a key)."""
        values = {
            POD_UID: self.pod_uid,
            POD_NAME: self.pod_name,
            DELIVERED_DIGEST: self.delivered_digest,
            DELIVERED_AT: self.delivered_at,
            APPLIED_DIGEST: self.applied_digest,
            REFUSED_DIGEST: self.refused_digest,
            REFUSAL: self.refusal,
            ACKNOWLEDGED_AT: self.acknowledged_at,
            ACKNOWLEDGES: "true" if self.acknowledges else "",
        }
        return {k: (v or None) for k, v in values.items()}

    def confirms(self, document_digest: str) -> bool:
        """Whether this pod has taken ``document_digest`` in: applied it when its runtime
        acknowledges, else the sidecar delivered it."""
        if self.acknowledges:
            return self.applied_digest == document_digest
        return document_digest in (self.delivered_digest, self.applied_digest)


class Confirmation(Enum):
    """Whether the session has let go of what the document it was last sent withdrew."""

    CONFIRMED = "Confirmed"
    """The current pod acknowledged the document, or no session process runs."""
    PENDING = "Pending"
    """The session runs and can acknowledge, and has not yet."""
    UNVERIFIABLE = "Unverifiable"
    """The session runs but cannot acknowledge (a pod without the delivery sidecar)."""
    REFUSED = "Refused"
    """The runtime refused the document."""


@dataclass(frozen=True)
class SessionPod:
    """What the controller knows of an agent's session pod."""

    uid: str
    running: bool
    """Not Succeeded or Failed (a Terminating pod still runs)."""
    acknowledging: bool
    """It has the delivery sidecar."""


def confirmation(
    pod: SessionPod | None, ack: Acknowledgement | None, document_digest: str
) -> Confirmation:
    """Where the session stands with the document whose digest is ``document_digest``."""
    if pod is None or not pod.running:
        return Confirmation.CONFIRMED
    if not pod.acknowledging:
        return Confirmation.UNVERIFIABLE
    if ack is None or ack.pod_uid != pod.uid:
        return Confirmation.PENDING
    if ack.refused_digest == document_digest:
        return Confirmation.REFUSED
    return Confirmation.CONFIRMED if ack.confirms(document_digest) else Confirmation.PENDING


FUTURE_SKEW = 60.0
"""Seconds a recorded time may lie ahead of ``now`` (clocks of two replicas differ a little)
and still count as a time something happened."""


def read_time(stamp: object) -> datetime | None:
    """An RFC 3339 time as an aware datetime (UTC when it names no offset); None for anything
    else: not a string, empty, not a time, outside the calendar once made UTC. A status is
    written by others too (anyone allowed to write the status subresource): no value of it may
    raise here."""
    if not isinstance(stamp, str) or not stamp.strip():
        return None
    try:
        then = datetime.fromisoformat(stamp.strip().replace("Z", "+00:00").replace("z", "+00:00"))
        if then.tzinfo is None:
            then = then.replace(tzinfo=UTC)
        then.astimezone(UTC)  # an offset that moves it out of the calendar raises here
    except (ValueError, TypeError, OverflowError):
        return None
    return then


def countable_time(stamp: object, now: datetime) -> bool:
    """Whether ``stamp`` is a time a duration can be counted from at ``now``: readable, and not
    ahead of ``now`` by more than :data:`FUTURE_SKEW` (a time in the future would hold every
    timeout off for ever)."""
    then = read_time(stamp)
    if then is None:
        return False
    return seconds_between(now, then) <= FUTURE_SKEW


def seconds_since(stamp: object, now: datetime) -> float:
    """Seconds from an RFC 3339 time to ``now`` (0 when ``stamp`` is empty, unreadable or
    ahead of ``now``): whatever ``stamp`` holds, this never raises."""
    then = read_time(stamp)
    if then is None:
        return 0.0
    return max(0.0, seconds_between(then, now))


def seconds_between(start: datetime, end: datetime) -> float:
    """Seconds from ``start`` to ``end`` (a naive time counts as UTC)."""
    if start.tzinfo is None:
        start = start.replace(tzinfo=UTC)
    if end.tzinfo is None:
        end = end.replace(tzinfo=UTC)
    try:
        return (end - start).total_seconds()
    except OverflowError:
        return 0.0


@dataclass(frozen=True)
class DeliveryView:
    """Where the delivery of an agent's current document stands, as status reports it."""

    digest: str
    """What the controller wrote (the ConfigMap's document)."""
    written_at: str
    confirmation: Confirmation
    record: Acknowledgement | None = None
    """The current pod's acknowledgement record (None: none, or another pod's)."""
    pod_uid: str = ""
    overdue: bool = False
    """The session can acknowledge and has not, past the acknowledgement timeout."""
    releasing: tuple[str, ...] = ()
    """Work URIs whose holds wait for the session to let go of them."""

    def as_status(self) -> dict[str, str | bool]:
        out: dict[str, str | bool] = {"digest": self.digest, "writtenAt": self.written_at}
        record = self.record
        if record is not None:
            out.update(
                {
                    "deliveredDigest": record.delivered_digest,
                    "appliedDigest": record.applied_digest,
                    "acknowledgedAt": record.acknowledged_at or record.delivered_at,
                }
            )
            if record.refused_digest == self.digest:
                out["message"] = record.refusal
        if self.pod_uid:
            out["podUID"] = self.pod_uid
        out = {k: v for k, v in out.items() if v}
        out["synced"] = self.confirmation in (Confirmation.CONFIRMED, Confirmation.UNVERIFIABLE)
        return out

    @property
    def pending(self) -> bool:
        return self.confirmation is Confirmation.PENDING
