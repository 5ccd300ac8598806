"""The exit codes of ``bindery`` and ``kubectl bindery``: one enum, defined once.

It lives in the runtime layer because ``bindery run``'s start-up checks (``preflight``) raise
with these codes, and the runtime may not import the CLI above it; ``controller.cli.exits``
re-exports it for the commands.
"""

from __future__ import annotations

from enum import IntEnum


class Exit(IntEnum):
    """What a ``bindery`` process's exit status means."""

    OK = 0
    FAILURE = 1
    """The command failed and said why on stderr (e.g. ``why`` found no such agent)."""
    USAGE = 2
    """The command line was wrong (argparse's code)."""
    NO_KUBECONFIG = 3
    """No in-cluster configuration and no usable kubeconfig."""
    UNREACHABLE = 4
    """The API server did not answer (or refused our credentials)."""
    NO_CRDS = 5
    """The API server does not serve Bindery's kinds: the CRDs are not applied."""
    PORT_IN_USE = 6
    """The liveness or metrics port is taken (often: another ``bindery run``)."""
    INTERRUPTED = 130
    """Ctrl-C (128 + SIGINT)."""
