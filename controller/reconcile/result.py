"""What one reconcile pass came to: whether it wrote anything, and when to look again."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Result:
    """A pass's outcome, returned by every reconciler and scheduled by the worker pool alone.

    ``requeue_after`` asks for another pass of the same request in that many seconds (None: no
    need; a watch event brings the next one). A pass that raises is retried with backoff
    instead, and the retry works out its own requeue again.
    """

    changed: bool = False
    requeue_after: float | None = None

    def __or__(self, other: Result) -> Result:
        """Both outcomes at once: changed if either changed, requeued at the earlier ask."""
        return Result(
            self.changed or other.changed, earliest(self.requeue_after, other.requeue_after)
        )

    def requeue(self, after: float | None) -> Result:
        """This outcome, asking also for a pass in ``after`` seconds (the earlier ask wins)."""
        return Result(self.changed, earliest(self.requeue_after, after))


def earliest(a: float | None, b: float | None) -> float | None:
    """The sooner of two requeue asks (None: no ask)."""
    if a is None:
        return b
    if b is None:
        return a
    return min(a, b)


UNCHANGED = Result()
CHANGED = Result(changed=True)
