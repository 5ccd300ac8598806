"""What one reconcile pass came to: whether it wrote anything, and when to look again."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Result:
    """A pass's outcome, returned by every reconciler and scheduled by the worker pool alone.

    ``requeue_after`` asks for another pass of the same request in that many seconds (None: no
    need; a watch event brings the next one). ``failed``: the pass could not complete and said
    so on its object (see :mod:`controller.domain.status.failure`); it is retried with the
    request's backoff, as a pass that raises is, and the retry works out its own requeue again.
    """

    changed: bool = False
    requeue_after: float | None = None
    failed: bool = False

    def __or__(self, other: Result) -> Result:
        """Both outcomes at once: changed if either changed, requeued at the earlier ask,
        failed if either failed."""
        return Result(
            self.changed or other.changed,
            earliest(self.requeue_after, other.requeue_after),
            self.failed or other.failed,
        )

    def requeue(self, after: float | None) -> Result:
        """This outcome, asking also for a pass in ``after`` seconds (the earlier ask wins)."""
        return Result(self.changed, earliest(self.requeue_after, after), self.failed)


def earliest(a: float | None, b: float | None) -> float | None:
    """The sooner of two requeue asks (None: no ask)."""
    if a is None:
        return b
    if b is None:
        return a
    return min(a, b)


UNCHANGED = Result()
CHANGED = Result(changed=True)
