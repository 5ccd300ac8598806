"""The one shape of every resolution message, and the fix a type mismatch suggests.

Messages follow one shape so that a user reading ``status`` can act on any of them:
``<who>: <what is wrong>. Candidates: <each one considered and why it lost>. Fix: <what to do>.``
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from controller.domain.results import Candidate
from controller.domain.types import TypeGraph

MAX_LISTED = 10
"""Candidates a message names one by one; the rest are counted (``and N more``), so a slot
among a thousand Resources still has a short message."""

MAX_SHOWN_URI = 256
"""Characters of a candidate's URI a message shows (a URI may have 2048)."""


def message(
    subject: str, problem: str, fix: str, candidates: Sequence[Candidate] | None = None
) -> str:
    """``<subject>: <problem>. [Candidates: ... .] Fix: <fix>.`` (candidates only for slots):
    the first :data:`MAX_LISTED` candidates, then how many more there are."""
    if candidates is None:
        return f"{subject}: {problem}. Fix: {fix}."
    considered = (
        "; ".join(f"{_short(c.uri)!r}: {c.reason}" for c in candidates[:MAX_LISTED]) or "none"
    )
    if len(candidates) > MAX_LISTED:
        considered += f"; and {len(candidates) - MAX_LISTED} more"
    return f"{subject}: {problem}. Candidates: {considered}. Fix: {fix}."


def _short(uri: str) -> str:
    return uri if len(uri) <= MAX_SHOWN_URI else uri[:MAX_SHOWN_URI] + "..."


def type_fix(types: TypeGraph, type_names: Iterable[str], otherwise: str) -> str:
    """The fix for a type mismatch: create the types that are missing, or ``otherwise``."""
    missing = sorted({name for name in type_names if name not in types})
    if not missing:
        return otherwise
    kind = "a ResourceType" if len(missing) == 1 else "ResourceTypes"
    named = " and ".join(repr(name) for name in missing)
    return f"create {kind} named {named}, or {otherwise}"
