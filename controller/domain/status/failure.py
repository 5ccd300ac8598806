"""One rule for every pass that fails: the object says so, without claiming what it did not do.

An exception from one object's spec or status (a value the models or the pass cannot take, a
status the API server refuses, a fault in Bindery itself) never leaves that object without a
truthful status, and never stops the other objects' passes:

- **a spec the project refuses** (a :class:`~controller.domain.errors.InvalidInputError`, or a
  spec the models reject at intake): the refusal *is* what the new generation means, so the
  status claims it: ``observedGeneration`` is the new generation, Ready=False and Stalled=True
  with reason ``InvalidSpec`` naming the field (:func:`~controller.domain.status.invalid_status`);
- **anything else** (:func:`failed_status`): Ready=False and Stalled=True with reason
  ``ReconcileFailed``, naming the field when it is known and the error, while
  ``observedGeneration`` stays where it was: the status still describes the last generation the
  controller reconciled, and kstatus, Flux and Argo CD read the new one as not yet observed. The
  other fields are kept as last observed. The pass is retried with backoff; a Warning event
  ``ReconcileFailed`` says the same.

Which field an error is about travels with the exception as a note (PEP 678): a pass that knows
adds one (:func:`field_note`; the status write names the fields the API server refused), and
:func:`field_of` reads it back. Pure: no I/O.
"""

from __future__ import annotations

from typing import Any

from pydantic import ValidationError

from controller.domain.status.conditions import (
    MAX_MESSAGE,
    condition,
    health_conditions,
    merge_conditions,
)
from controller.domain.status.events import Note
from controller.domain.status.fields import ERROR_STATE

FAILED_REASON = "ReconcileFailed"
"""The Ready and Stalled reason (and the Warning event's) of an object whose pass failed."""

INVALID_SPEC_REASON = "InvalidSpec"
"""The Ready and Stalled reason of an object whose spec the project refuses."""

MAX_ERRORS = 5
"""How many of a refused spec's errors a message lists before it says "and N more"."""

_NOTE = "bindery field: "


def field_note(field: str) -> str:
    """The note that names ``field`` on an exception (``exc.add_note(field_note(...))``, where a
    pass knows which field a failure is about: the status write names the fields the API server
    refused); :func:`field_of` reads it back."""
    return f"{_NOTE}{field}"


def field_of(exc: BaseException) -> str:
    """The field a :func:`field_note` named on ``exc`` ("" when none did; the first if several
    did)."""
    for note in getattr(exc, "__notes__", ()):
        if isinstance(note, str) and note.startswith(_NOTE):
            return note[len(_NOTE) :]
    return ""


def one_line(text: str, limit: int = 1024) -> str:
    """``text`` on one line, at most ``limit`` characters (saying it was cut)."""
    flat = " ".join(str(text).split())
    if len(flat) <= limit:
        return flat
    return f"{flat[: max(0, limit - 40)]}... ({len(flat)} characters, cut)"


def refusal(exc: BaseException) -> str:
    """Why a spec cannot be parsed, field by field, in one line: pydantic's errors as
    ``spec.<path>: <why>`` (the first :data:`MAX_ERRORS`, then "and N more"), any other
    exception as the field it names (else ``spec``), its type and message."""
    if isinstance(exc, ValidationError):
        errors = exc.errors()
        parts = []
        for err in errors[:MAX_ERRORS]:
            where = ".".join(str(p) for p in err.get("loc", ()))
            parts.append(f"spec.{where}: {err.get('msg', '')}" if where else str(err.get("msg")))
        more = len(errors) - MAX_ERRORS
        if more > 0:
            parts.append(f"and {more} more")
        return one_line("; ".join(parts), MAX_MESSAGE // 2)
    where = field_of(exc) or "spec"
    return one_line(
        f"{where}: {type(exc).__name__}: {exc}; the controller's models cannot take this value: "
        "check it against 'kubectl explain'",
        MAX_MESSAGE // 2,
    )


def failure_message(
    what: str, generation: int, exc: BaseException, field: str = "", fix: str = ""
) -> str:
    """What a failed pass says: which object and generation, the field (when known), the
    error, and what to do (``fix``, else what fits the field)."""
    field = field or field_of(exc)
    where = (
        f"{field}: "
        if field
        else "(no field of its own named: a fault in Bindery or in what it read) "
    )
    error = one_line(f"{type(exc).__name__}: {exc}", 2048)
    fix = fix or (
        f"correct {field}"
        if field and not field.startswith("status")
        else "the controller rewrites its own status fields on the next pass; if this persists, "
        "report it with the controller's log"
        if field
        else "report it with the controller's log (the traceback is logged at warning level)"
    )
    return (
        f"{what}: generation {generation} could not be reconciled: {where}{error}; status "
        f"still describes the generation in observedGeneration, and the pass is retried with "
        f"backoff. Fix: {fix}"
    )


def failed_status(
    *,
    generation: int,
    old: dict[str, Any],
    now: str,
    message: str,
    state: bool = False,
) -> dict[str, Any]:
    """The status of an object whose pass at ``generation`` failed: the fields of ``old`` as
    last observed, ``observedGeneration`` where it was (-1 when never observed), and Ready=False
    with Stalled=True (reason ``ReconcileFailed``) saying why; ``state`` sets an agent's
    ``state`` to Error. The conditions' own ``observedGeneration`` is ``generation``: they are
    what this pass found about it."""
    conditions = health_conditions(
        condition("Ready", False, FAILED_REASON, message, generation), stalled=True
    )
    kept = {k: v for k, v in old.items() if k != "conditions"}
    before = old.get("observedGeneration")
    observed = before if isinstance(before, int) and not isinstance(before, bool) else -1
    out: dict[str, Any] = {
        **kept,
        "observedGeneration": min(observed, generation),
        "conditions": merge_conditions(old.get("conditions"), conditions, now),
    }
    if state:
        out["state"] = ERROR_STATE
    return out


def failed_note(message: str) -> Note:
    """The Warning event of a failed pass."""
    return Note(FAILED_REASON, message, warning=True)


def refused_note(message: str) -> Note:
    """The Warning event of a refused spec."""
    return Note(INVALID_SPEC_REASON, message, warning=True)
