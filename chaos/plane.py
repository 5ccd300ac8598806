"""The processes a chaos run disturbs: the controller, and the local kube-apiserver.

Nothing here changes ``controller/``: the API server is restarted from the harness with the
command line and log file :class:`harness.cluster.LocalCluster` left behind (its pid is in
``state.json``; its argv is read back from ``/proc``), and the new pid is written back to the
state so ``LocalCluster.down`` stops it.
"""

from __future__ import annotations

import os
import signal
import ssl
import subprocess
import time
import urllib.error
import urllib.request
from contextlib import suppress
from pathlib import Path
from typing import Self

import structlog

from harness.cluster import ADMIN_TOKEN, ClusterState, LocalCluster
from harness.errors import HarnessError
from harness.process import ControllerProcess

log = structlog.get_logger("bindery.chaos")

APISERVER = "kube-apiserver"


class Controller(ControllerProcess):
    """``bindery run --standalone --namespace NS``; counts the harness's kills and the exits it
    did not cause (a supervisor would restart them)."""

    def __init__(
        self,
        kubeconfig: str,
        namespace: str,
        log_dir: Path,
        log_level: str = "INFO",
        args: tuple[str, ...] = ("--standalone",),
    ) -> None:
        super().__init__(kubeconfig, namespace, log_dir, args=args, log_level=log_level)
        self.kills = 0
        self.exits: list[str] = []
        """Starts that ended without the harness's signal (a supervisor would restart them)."""
        self._exits_seen: set[subprocess.Popen[bytes]] = set()

    def start(self, *, wait: bool = True, timeout: float = 90.0) -> Self:
        return super().start(wait=wait, timeout=timeout)

    def alive(self) -> bool:
        """Still running; a controller found to have exited by itself is counted in ``exits``."""
        if self.proc is None:
            return False
        code = self.proc.poll()
        if code is not None and self.proc not in self._exits_seen:
            self._exits_seen.add(self.proc)
            self.exits.append(f"{self.log_path.name} exited by itself with code {code}")
        return code is None

    def kill(self) -> None:
        """SIGKILL: no cleanup, as a crashed or evicted controller pod."""
        if self.alive():
            super().kill()
            self.kills += 1

    def stop(self) -> None:
        if self.alive():
            super().stop()


class ApiServer:
    """Kill, stop or freeze the local kube-apiserver and bring it back with the same argv."""

    def __init__(self, cluster: LocalCluster) -> None:
        self.cluster = cluster
        state = cluster.state
        if state is None:
            raise HarnessError("the local control plane is not running")
        self.state: ClusterState = state
        pid = state.pids[APISERVER]
        try:
            self.argv = Path(f"/proc/{pid}/cmdline").read_bytes().rstrip(b"\0").split(b"\0")
        except OSError as exc:
            raise HarnessError(
                f"cannot read the kube-apiserver command line from /proc/{pid}: {exc}; "
                "API-server restarts need Linux /proc (run without --restart-apiserver)"
            ) from exc
        self.proc: subprocess.Popen[bytes] | None = None
        self.log_path = Path(state.state_dir) / "logs" / f"{APISERVER}.log"
        self.restarts = 0
        self.freezes = 0

    @property
    def pid(self) -> int:
        return self.state.pids[APISERVER]

    def _reap(self, pid: int, grace: float) -> None:
        """Wait for ``pid`` to exit (SIGKILL after ``grace`` s): its port must be free."""
        child = self.cluster._procs.get(APISERVER)
        proc = child if child is not None and child.pid == pid else self.proc
        if proc is None or proc.pid != pid:
            return
        try:
            proc.wait(timeout=grace)
        except subprocess.TimeoutExpired:
            with suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
            proc.wait(timeout=30)

    def restart(self, *, graceful: bool, downtime: float) -> float:
        """Stop it (SIGTERM, SIGKILL after 5 s; or SIGKILL), wait ``downtime`` s more, start
        it; returns the seconds it was unavailable (from the signal until ready again)."""
        old = self.pid
        signalled = time.monotonic()
        with suppress(ProcessLookupError):
            os.kill(old, signal.SIGTERM if graceful else signal.SIGKILL)
        self._reap(old, grace=5.0 if graceful else 30.0)
        time.sleep(downtime)
        with self.log_path.open("ab") as out:
            self.proc = subprocess.Popen(
                self.argv,
                stdout=out,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                start_new_session=True,
            )
        self.state.pids[APISERVER] = self.proc.pid
        self.state.save()
        self.restarts += 1
        self.wait_ready()
        return time.monotonic() - signalled

    def freeze(self, seconds: float) -> None:
        """SIGSTOP for ``seconds``, then SIGCONT: a server that hangs, connections open."""
        os.kill(self.pid, signal.SIGSTOP)
        try:
            time.sleep(seconds)
        finally:
            os.kill(self.pid, signal.SIGCONT)
        self.freezes += 1

    def wait_ready(self, timeout: float = 90.0) -> None:
        ca = Path(self.state.data_dir) / "pki" / "ca.crt"
        ctx = ssl.create_default_context(cafile=str(ca))
        req = urllib.request.Request(  # noqa: S310 - our own https://127.0.0.1 server
            f"{self.state.server}/readyz", headers={"Authorization": f"Bearer {ADMIN_TOKEN}"}
        )
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc is not None and self.proc.poll() is not None:
                raise HarnessError(
                    f"kube-apiserver exited with {self.proc.returncode} after a restart; "
                    f"see {self.log_path}"
                )
            with (
                suppress(OSError, urllib.error.URLError),
                urllib.request.urlopen(req, context=ctx, timeout=2) as resp,  # noqa: S310
            ):
                if resp.status == 200:
                    return
            time.sleep(0.2)
        raise HarnessError(f"kube-apiserver was not ready {timeout} s after a restart")
