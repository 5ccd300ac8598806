"""What session processes on the real node run in tests and benchmarks, and how to read what
those processes saw.

Each probe is a Python program passed to the project's image (``localhost/bindery:dev``) as its
command. It prints one JSON line per thing it does, stamped with ``time.time()``: a container
shares the host's clock, so the tests can compare the stamps of two processes with each other and
with the moment they changed a spec.
"""

from __future__ import annotations

import json
import subprocess
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

Kubectl = Callable[..., subprocess.CompletedProcess[str]]
"""``kubectl(*args, check=False)`` against the control plane (the caller's own runner)."""

PROJECT_IMAGE = "localhost/bindery:dev"

_PROGRAM = r"""
import json, os, time
from bindery_session import BindingsWatcher

def out(**fields):
    print(json.dumps({"t": time.time(), **fields}), flush=True)

out(event="started", pod=os.environ.get("HOSTNAME", ""))
for bindings in BindingsWatcher(interval=0.02, acknowledge=ACKNOWLEDGE).changes():
    out(
        event="applied",
        work=bindings.work.uri if bindings.work else None,
        fence=bindings.fence.uid if bindings.fence else None,
        digest=bindings.digest,
        resources=sorted(r.name for r in bindings.resources),
    )
"""

WATCHER = _PROGRAM.replace("ACKNOWLEDGE", "True")
"""A runtime on the session library that acknowledges: it logs every document it applies (it
stops using the last one when it takes up the next, and acknowledges then)."""
READER = _PROGRAM.replace("ACKNOWLEDGE", "False")
"""The same runtime without acknowledging (the sidecar reports ``delivered`` for it)."""


def runtime(program: str = WATCHER, **extra: Any) -> dict[str, Any]:
    return {
        "image": PROJECT_IMAGE,
        "command": ["python", "-c", program],
        **extra,
    }


@dataclass(frozen=True)
class Line:
    t: float
    event: str
    fields: dict[str, Any]


def lines(kubectl: Kubectl, namespace: str, pod: str, container: str = "agent") -> list[Line]:
    """Every JSON line the probe in ``pod`` printed (its current container)."""
    proc = kubectl("logs", "-n", namespace, pod, "-c", container, check=False)
    out = []
    for raw in proc.stdout.splitlines():
        try:
            data = json.loads(raw)
        except ValueError:
            continue
        if isinstance(data, dict) and "t" in data:
            out.append(Line(float(data["t"]), str(data.get("event")), data))
    return out


def applied(kubectl: Kubectl, namespace: str, pod: str) -> list[Line]:
    return [line for line in lines(kubectl, namespace, pod) if line.event == "applied"]


def holding(entries: list[Line], uri: str, until: float) -> list[tuple[float, float]]:
    """The intervals during which a process's latest applied document had ``uri`` as work."""
    out: list[tuple[float, float]] = []
    start: float | None = None
    for line in entries:
        has = line.fields.get("work") == uri
        if has and start is None:
            start = line.t
        elif not has and start is not None:
            out.append((start, line.t))
            start = None
    if start is not None:
        out.append((start, until))
    return out


def overlap(a: list[tuple[float, float]], b: list[tuple[float, float]]) -> float:
    """The longest single stretch of time covered by an interval of ``a`` and one of ``b``."""
    longest = 0.0
    for a0, a1 in a:
        for b0, b1 in b:
            longest = max(longest, min(a1, b1) - max(a0, b0))
    return longest
