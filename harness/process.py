"""Child processes: the controller (``bindery run``) and any ``python -m`` module.

A subprocess, not a thread: a test or a chaos run can kill it at any point (SIGKILL, no cleanup)
and start a new one, exactly as a crashed or rescheduled controller pod would be. Each start
logs to its own file; the clock of a start is its spawn (the benchmark measures from it).
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Self

import controller
from harness.errors import HarnessError

READY_LINE = "controller started"


def source_root() -> Path:
    """The directory that holds the ``controller`` package the children run."""
    return Path(controller.__file__).resolve().parent.parent


def controller_argv(
    namespace: str,
    *,
    args: tuple[str, ...] = ("--standalone",),
    log_level: str = "DEBUG",
    metrics_port: int = 0,
    liveness: str = "",
) -> list[str]:
    """``-m controller run ...`` for one namespace, with kopf's liveness endpoint at the URL
    ``liveness`` (none by default)."""
    return [
        *("-m", "controller", "run", *args, "--namespace", namespace, f"--liveness={liveness}"),
        *("--metrics-port", str(metrics_port), "--log-level", log_level),
    ]


class ChildProcess:
    """``python ARGV...`` with ``KUBECONFIG`` set, stdout and stderr in a log file per start."""

    name = "process"

    def __init__(
        self,
        argv: list[str],
        kubeconfig: str | Path,
        log_dir: Path,
        *,
        src: Path | None = None,
        env: Mapping[str, str] | None = None,
    ) -> None:
        self.argv = argv
        self.kubeconfig = str(kubeconfig)
        self.log_dir = log_dir
        self.src = src or source_root()
        self.env = dict(env or {})
        self.proc: subprocess.Popen[bytes] | None = None
        self.starts = 0
        self.spawned_at = 0.0  # time.monotonic() at the last spawn
        self.spawned_wall = 0.0  # time.time() at the last spawn

    @property
    def log_path(self) -> Path:
        return self.log_dir / f"{self.name}-{self.starts}.log"

    def log_paths(self) -> list[Path]:
        return sorted(self.log_dir.glob(f"{self.name}-*.log"))

    def spawn(self) -> Self:
        self.starts += 1
        env = {
            **os.environ,
            "KUBECONFIG": self.kubeconfig,
            "PYTHONPATH": str(self.src),
            **self.env,
        }
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        with self.log_path.open("wb") as out:
            self.spawned_wall = time.time()
            self.spawned_at = time.monotonic()
            self.proc = subprocess.Popen(
                [sys.executable, *self.argv],
                stdout=out,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                env=env,
                cwd=self.src,
            )
        return self

    @property
    def pid(self) -> int:
        if self.proc is None:
            raise HarnessError(f"the {self.name} was never started")
        return self.proc.pid

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def logs(self) -> str:
        """Every start's log, in order."""
        return "".join(p.read_text(errors="replace") for p in self.log_paths())

    def check(self) -> None:
        """Raise with the tail of its log if it is no longer running."""
        if not self.alive():
            raise HarnessError(
                f"the {self.name} exited; the end of its log ({self.log_path}):\n"
                f"{self.logs()[-4000:]}"
            )

    def wait_for_lines(self, lines: Iterable[str], timeout: float) -> None:
        """Until one of ``lines`` is in this start's log; raise if it exits or times out."""
        wanted = tuple(lines)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            self.check()
            if any(line in self.log_path.read_text(errors="replace") for line in wanted):
                return
            time.sleep(0.1)
        raise HarnessError(
            f"the {self.name} did not log {' or '.join(map(repr, wanted))} in {timeout} s "
            f"(log: {self.log_path})"
        )

    def kill(self) -> None:
        """SIGKILL: no cleanup handlers, no graceful shutdown."""
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(timeout=10)

    def stop(self) -> None:
        """SIGTERM, and SIGKILL if it has not stopped 20 s later."""
        if self.proc is None or self.proc.poll() is not None:
            return
        self.proc.send_signal(signal.SIGTERM)
        try:
            self.proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(timeout=10)


class ControllerProcess(ChildProcess):
    """``bindery run --namespace NS`` (``--standalone`` unless ``args`` says otherwise)."""

    name = "controller"

    def __init__(
        self,
        kubeconfig: str | Path,
        namespace: str,
        log_dir: Path,
        *,
        args: tuple[str, ...] = ("--standalone",),
        ready_lines: tuple[str, ...] = (READY_LINE,),
        name: str = "controller",
        log_level: str = "DEBUG",
        metrics_port: int = 0,
        src: Path | None = None,
        env: Mapping[str, str] | None = None,
    ) -> None:
        self.namespace = namespace
        self.name = name
        self.ready_lines = ready_lines
        self.metrics_port = metrics_port
        argv = controller_argv(namespace, args=args, log_level=log_level, metrics_port=metrics_port)
        super().__init__(argv, kubeconfig, log_dir, src=src, env=env)

    def start(self, *, wait: bool = True, timeout: float = 60.0) -> Self:
        self.spawn()
        if wait:
            self.wait_for_lines(self.ready_lines, timeout)
        return self

    def lines_before_shutdown(self) -> list[str]:
        """Each start's log lines until it was told to stop: kopf's own teardown is not the
        controller's behaviour under test."""
        lines: list[str] = []
        for path in self.log_paths():
            for line in path.read_text(errors="replace").splitlines():
                if "Operator is stopping" in line:
                    break
                lines.append(line)
        return lines

    def error_lines(self) -> list[str]:
        """Lines logged at error level, and tracebacks, of every start (file name first)."""
        return [
            f"{path.name}: {line[:400]}"
            for path in self.log_paths()
            for line in path.read_text(errors="replace").splitlines()
            if '"level": "error"' in line or "Traceback" in line
        ]
