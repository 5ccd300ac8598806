"""The conditions every kind's status carries, as kstatus reads them (``Ready``, ``Reconciling``,
``Stalled``), and the times they are stamped with.

:func:`health_conditions` builds the three from one of three outcomes (the table in
docs/design.md, "Status semantics"):

- healthy: Ready=True;
- waiting for something the next apply brings without a change to this object (a missing Tool,
  Resource or ResourceType, a work hold another agent holds): Ready=False and Reconciling=True
  with the same reason, so kstatus says InProgress and Flux keeps waiting;
- needing a person to change this object or another's content (a type incompatibility, an
  ambiguity, a parentTypes cycle, an invalid spec): Ready=False and Stalled=True, so kstatus says
  Failed at once.

Reconciling and Stalled are never both True: kstatus reads whichever comes first. A condition's
``lastTransitionTime`` is carried over while its status stays the same (:func:`merge_conditions`),
so an unchanged world yields a byte-identical status and the reconciler writes nothing.
"""

from __future__ import annotations

import re
from datetime import UTC, datetime
from typing import Any

from bindery_session.wire import now_rfc3339 as session_now

MISSING_DEPENDENCY = "MissingDependency"
"""The Ready (and Reconciling) reason of an object that waits for another one to be created."""


def now_rfc3339() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def now_micro_rfc3339() -> str:
    """Now in microseconds (the API's MicroTime form), for times a duration is counted from:
    a whole-second stamp would shorten a grace by up to a second. The session library's
    formatter: the sidecar and the runtime stamp their records the same way."""
    return session_now()


MAX_MESSAGE = 8192
"""Condition messages are cut here (the API allows 32768): a status must stay writable."""


def _clip(message: str) -> str:
    if len(message) <= MAX_MESSAGE:
        return message
    cut = message[: MAX_MESSAGE - 40]
    return f"{cut}... ({len(message) - len(cut)} more characters)"


MAX_REASON = 128
"""Condition reasons are cut here (the API allows 1024)."""

_REASON = re.compile(r"[A-Za-z]([A-Za-z0-9_,:]*[A-Za-z0-9_])?")
_NOT_IN_REASON = re.compile(r"[^A-Za-z0-9_,:]+")


def reason_word(reason: str) -> str:
    """``reason`` as the CRDs' condition schema takes it (CamelCase: a letter, then letters,
    digits, ``_``, ``,`` or ``:``, ending in a letter, digit or ``_``). Reasons are Bindery's own
    words but for a session's, which come from its pod (a kubelet's, a scheduler's or anyone's
    who may write pod status): ``no-fit!`` becomes ``NoFit``, so a status is never refused for
    a word someone else chose."""
    if len(reason) <= MAX_REASON and _REASON.fullmatch(reason):
        return reason
    words = [w for w in _NOT_IN_REASON.split(reason) if w]
    word = "".join(w[:1].upper() + w[1:] for w in words)[:MAX_REASON].rstrip(",:")
    if not word[:1].isascii() or not word[:1].isalpha():
        word = f"Reason{word}"[:MAX_REASON].rstrip(",:")
    return word if word != "Reason" else "Unknown"


def condition(
    type_: str, status: bool, reason: str, message: str, generation: int
) -> dict[str, Any]:
    message = _clip(message)
    return {
        "type": type_,
        "status": "True" if status else "False",
        "reason": reason_word(reason),
        "message": message,
        "observedGeneration": generation,
    }


RECONCILED = "Reconciled"
"""The reason of a Reconciling or Stalled condition that is False."""


def health_conditions(
    ready: dict[str, Any], *, progressing: bool = False, stalled: bool = False
) -> list[dict[str, Any]]:
    """``ready`` followed by the Reconciling and Stalled conditions that go with it.

    A Ready=False condition is either ``progressing`` (Reconciling=True: the next apply can clear
    it) or ``stalled`` (Stalled=True: a person must act), and the True one repeats Ready's reason
    and message, which is what kstatus, Flux and Argo CD show. Stalled wins if both are asked.
    """
    generation = int(ready["observedGeneration"])
    stalled = stalled and ready["status"] == "False"
    progressing = progressing and ready["status"] == "False" and not stalled
    reason, message = ready["reason"], ready["message"]
    return [
        ready,
        condition(
            "Reconciling",
            progressing,
            reason if progressing else RECONCILED,
            message if progressing else "",
            generation,
        ),
        condition(
            "Stalled",
            stalled,
            reason if stalled else RECONCILED,
            message if stalled else "",
            generation,
        ),
    ]


def merge_conditions(
    old: list[dict[str, Any]] | None, new: list[dict[str, Any]], now: str
) -> list[dict[str, Any]]:
    """Stamp ``lastTransitionTime``: kept from ``old`` while a condition's status is unchanged."""
    previous = {c.get("type"): c for c in old or []}
    out = []
    for cond in new:
        before = previous.get(cond["type"])
        same = before is not None and before.get("status") == cond["status"]
        stamp = before.get("lastTransitionTime", now) if same and before else now
        out.append({**cond, "lastTransitionTime": stamp})
    return out


def ready_condition(st: dict[str, Any]) -> dict[str, Any]:
    return next((c for c in st.get("conditions") or [] if c.get("type") == "Ready"), {})


def is_ready(st: dict[str, Any]) -> bool:
    return ready_condition(st).get("status") == "True"


def ready_message(st: dict[str, Any]) -> str:
    return str(ready_condition(st).get("message", ""))


def is_stalled(st: dict[str, Any]) -> bool:
    """Whether the status's Stalled condition is True (a person must act)."""
    return any(
        c.get("type") == "Stalled" and c.get("status") == "True" for c in st.get("conditions") or []
    )
