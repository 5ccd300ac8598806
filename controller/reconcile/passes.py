"""One reconcile pass: what it is about, what it saw, and when it happened.

The worker pool builds a :class:`Pass` once per request it takes from the queue and hands it to
the kind's reconciler, which hands it on to every step and every write it makes: the write seam
names the request that wrote (its own write is not queued back to it), and every time the pass
records or compares is the one reading of the clock it carries.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any

from controller.domain.refs import Request
from controller.reconcile.clock import Instant
from controller.reconcile.compact import status_of

Body = dict[str, Any]


@dataclass(frozen=True)
class Pass:
    """The request being reconciled, its object as the view held it, its old status, and the
    one reading of the clock the pass tells time by."""

    request: Request
    body: Body
    """The object as observed (empty in a pass for an object no longer in the view)."""
    now: Instant
    old: Body = field(default_factory=dict)
    """The status the object carried when observed (what the new one is built beside)."""

    @classmethod
    def of(cls, request: Request, body: Body, now: Instant) -> Pass:
        """A pass over ``body`` as observed."""
        return cls(request, body, now, status_of(body))

    def seeing(self, body: Body) -> Pass:
        """The same pass, deciding from a newer version of its object."""
        return replace(self, body=body, old=status_of(body))
