"""The Kubernetes minors Bindery is tested on, and what to say about a cluster outside them.

The range is the one the chart's ``kubeVersion`` states and ``make test`` covers (the full suite
on the newest, a compatibility lane on the oldest). A controller started on a cluster outside it
still runs (``bindery run`` is not the chart, and a managed cluster may be a minor ahead of the
tests): it says once, at start-up, what may not work there and why.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

OLDEST = (1, 33)
"""The first minor in which native sidecar containers are GA (a session's delivery sidecar)."""
NEWEST = (1, 37)
"""The newest minor the test suite runs on."""

CHART_KUBE_VERSION = f">={OLDEST[0]}.{OLDEST[1]}.0-0 <{NEWEST[0]}.{NEWEST[1] + 1}.0-0"
"""The chart's ``kubeVersion`` for the range (a test keeps Chart.yaml equal to it)."""

_NUMBER = re.compile(r"^(\d+)")


@dataclass(frozen=True)
class ServerVersion:
    """What an API server's ``/version`` says about itself."""

    git_version: str
    major: int | None
    minor: int | None

    @classmethod
    def of(cls, body: dict[str, object]) -> ServerVersion:
        """From the ``/version`` document. Providers append to the minor (``"33+"`` on some
        managed clusters), so only its leading digits count; a field without them is unknown."""
        return cls(
            git_version=str(body.get("gitVersion") or "unknown"),
            major=_leading_int(body.get("major")),
            minor=_leading_int(body.get("minor")),
        )

    @property
    def minor_pair(self) -> tuple[int, int] | None:
        if self.major is None or self.minor is None:
            return None
        return (self.major, self.minor)


def _leading_int(value: object) -> int | None:
    found = _NUMBER.match(str(value or ""))
    return int(found.group(1)) if found else None


def support_note(server: ServerVersion) -> str | None:
    """None for a minor in the tested range; otherwise the one line to log about the cluster:
    what it is, what may not work there, and what to do."""
    tested = f"{OLDEST[0]}.{OLDEST[1]} to {NEWEST[0]}.{NEWEST[1]}"
    pair = server.minor_pair
    if pair is None:
        return (
            f"the API server's version {server.git_version!r} names no minor Bindery can read; "
            f"it is tested on Kubernetes {tested}: check the cluster's version with "
            "'kubectl version'"
        )
    if pair < OLDEST:
        return (
            f"Kubernetes {server.git_version} is older than {OLDEST[0]}.{OLDEST[1]}, the oldest "
            f"Bindery is tested on ({tested}): a session's delivery sidecar is a native sidecar "
            "container, which such a cluster may have switched off (the session would then never "
            "start), and the admission policies and CRD rules may be refused; upgrade the cluster "
            f"to {OLDEST[0]}.{OLDEST[1]} or newer"
        )
    if pair > NEWEST:
        return (
            f"Kubernetes {server.git_version} is newer than {NEWEST[0]}.{NEWEST[1]}, the newest "
            f"Bindery is tested on ({tested}): it is expected to work, but nothing has shown it "
            "yet; report what you see"
        )
    return None
