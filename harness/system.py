"""Processes and ports on this machine, for the control plane and the real node alike."""

from __future__ import annotations

import os
import signal
import socket
import time
from contextlib import suppress

import structlog

log = structlog.get_logger("bindery.harness")


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on now."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def alive(pid: int) -> bool:
    if pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except OSError:
        return False
    return True


def _signal(pid: int, sig: signal.Signals) -> None:
    """The process group if ``pid`` leads one (what the harness starts), else the process."""
    try:
        os.killpg(pid, sig)
    except (ProcessLookupError, PermissionError):
        with suppress(ProcessLookupError, PermissionError):
            os.kill(pid, sig)


def terminate(pid: int, name: str, grace: float = 10.0) -> None:
    """SIGTERM, wait up to ``grace`` seconds, then SIGKILL whatever is left."""
    if not alive(pid):
        return
    _signal(pid, signal.SIGTERM)
    deadline = time.monotonic() + grace
    while time.monotonic() < deadline and alive(pid):
        with suppress(ChildProcessError):
            if os.waitpid(pid, os.WNOHANG)[0] == pid:
                return
        time.sleep(0.05)
    if alive(pid):
        log.warning("process did not stop on SIGTERM; killing it", process=name, pid=pid)
        _signal(pid, signal.SIGKILL)
        with suppress(ChildProcessError):
            os.waitpid(pid, 0)
