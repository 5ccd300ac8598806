"""A status that always fits: cut to a byte budget, saying so on the status itself.

etcd refuses a request above about 1.5 MiB, and the API server a body above 3 MiB; a status that
lists every candidate of every slot of an agent that selects thousands of Resources grows past
both, and a status PATCH that is refused leaves the agent with no status at all. :func:`fit`
bounds a status to :data:`STATUS_BUDGET` bytes (well under both) in steps, each only when the one
before did not suffice, so an ordinary status is returned unchanged:

1. the ``candidates`` listed on binding rows are dropped (each row's message still names the
   first candidates and counts the rest);
2. every ``message`` is cut to :data:`MESSAGE_STEPS` characters, longest budget first;
3. binding rows are dropped from the end (tool slots go before direct bindings, which come
   first), the rows kept being the first ones;
4. as a last resort, every list but the conditions is emptied.

What was cut is said in the ``Ready`` condition's message (or the first condition's), so
``kubectl get``, kstatus and ``bindery why`` readers learn that the status is partial and why.
Pure: no clock, no I/O; the same status always fits the same way, so an unchanged world still
writes nothing.
"""

from __future__ import annotations

import copy
import json
from typing import Any

STATUS_BUDGET = 256 * 1024
"""Bytes a status may take (its JSON, UTF-8): far below etcd's and the API server's limits."""

MESSAGE_STEPS = (2048, 512, 128)
"""The lengths every message is cut to, one after the other, while the status is too large."""

NOTE_ROOM = 1024
"""Bytes kept free for the note that says what was cut."""

_CONDITIONS = "conditions"
_BINDINGS = "bindings"


_COMPACT = json.JSONEncoder(separators=(",", ":"), ensure_ascii=False)
"""``json.dumps(separators=(",", ":"), ensure_ascii=False)``, made once: every status of every
pass is measured, and ``json.dumps`` with options makes a new encoder per call."""


def size(status: dict[str, Any]) -> int:
    """The bytes ``status`` takes on the wire (compact JSON, UTF-8)."""
    return len(_COMPACT.encode(status).encode())


def clip(text: str, limit: int) -> str:
    """``text`` cut to at most ``limit`` characters, saying how many were cut."""
    if len(text) <= limit:
        return text
    tail = f"... ({len(text)} characters, cut)"
    return text[: max(0, limit - len(tail))] + tail


def fit(status: dict[str, Any], budget: int = STATUS_BUDGET) -> dict[str, Any]:
    """``status`` within ``budget`` bytes (unchanged when it already is), saying what was cut."""
    if size(status) <= budget:
        return status
    out = copy.deepcopy(status)
    room = max(0, budget - NOTE_ROOM)
    cuts: list[str] = []

    rows = [r for r in out.get(_BINDINGS) or [] if isinstance(r, dict)]
    dropped = sum(len(r.pop("candidates", None) or []) for r in rows)
    if dropped:
        cuts.append(f"{dropped} listed candidates dropped")
    for limit in MESSAGE_STEPS:
        if size(out) <= room:
            break
        if _clip_messages(out, limit):
            cuts.append(f"messages cut to {limit} characters")
    if size(out) > room and rows:
        kept = _rows_that_fit(out, rows, room)
        out[_BINDINGS] = rows[:kept]
        cuts.append(f"{len(rows) - kept} of {len(rows)} binding rows left out")
    if size(out) > room:
        emptied = [k for k, v in out.items() if isinstance(v, list) and v and k != _CONDITIONS]
        for key in emptied:
            out[key] = []
        if emptied:
            cuts.append(f"{', '.join(sorted(emptied))} left out")
    _note(out, budget, cuts)
    return out


def _clip_messages(node: Any, limit: int) -> bool:
    """Cut every ``message`` string under ``node`` to ``limit``; whether any was cut."""
    cut = False
    if isinstance(node, dict):
        for key, value in node.items():
            if key == "message" and isinstance(value, str) and len(value) > limit:
                node[key] = clip(value, limit)
                cut = True
            else:
                cut = _clip_messages(value, limit) or cut
    elif isinstance(node, list):
        for item in node:
            cut = _clip_messages(item, limit) or cut
    return cut


def _rows_that_fit(status: dict[str, Any], rows: list[dict[str, Any]], room: int) -> int:
    """How many of the first binding ``rows`` fit in ``room`` with the rest of ``status``."""
    without = size({**status, _BINDINGS: []})
    used, kept = without, 0
    for row in rows:
        used += size(row) + 1  # and its comma
        if used > room:
            break
        kept += 1
    return kept


def _note(status: dict[str, Any], budget: int, cuts: list[str]) -> None:
    conditions = [c for c in status.get(_CONDITIONS) or [] if isinstance(c, dict)]
    if not conditions:
        return
    target = next((c for c in conditions if c.get("type") == "Ready"), conditions[0])
    said = "; ".join(cuts) or "nothing could be cut"
    note = f"status cut to fit {budget} bytes ({said}); `bindery why` shows the whole resolution"
    before = clip(str(target.get("message") or ""), MESSAGE_STEPS[0])
    target["message"] = f"{before} [{note}]" if before else note
