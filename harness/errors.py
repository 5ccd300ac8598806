"""The harness's one exception tree.

``HarnessError``: the harness could not do what a test, a benchmark or its command
(``python -m harness cluster``) asked.
``ClusterError``: the local control plane, its real node or their images could not be built,
started or reached; its message says what failed, where its log is, and what to install or do.
"""

from __future__ import annotations


class HarnessError(RuntimeError):
    """The harness could not do what it was asked (a child process died, a wait ran out)."""


class ClusterError(HarnessError):
    """The local control plane, its node or its images could not be built, started or reached."""
