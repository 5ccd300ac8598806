"""The processes the end-to-end benchmark starts: the controller and the baseline client.

Both are started the same way (``python -m ...`` with the cluster's kubeconfig), their spawn
instant is the start of the clock, and their RSS and CPU time are read through psutil
(/proc/<pid>/status and /proc/<pid>/stat).
"""

from __future__ import annotations

import json
import re
import subprocess
import threading
import time
import urllib.request
from contextlib import suppress
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Self

import psutil

from harness.process import ChildProcess, controller_argv
from harness.system import free_port


class Proc(ChildProcess):
    """A child process whose clock starts at its spawn, logging to one file, its RSS and CPU
    time read through psutil."""

    def __init__(
        self, argv: list[str], kubeconfig: str, log_path: Path, src: Path | None = None
    ) -> None:
        super().__init__(argv, kubeconfig, log_path.parent, src=src)
        self.fixed_log_path = log_path
        self.ps: psutil.Process | None = None

    @property
    def log_path(self) -> Path:
        return self.fixed_log_path

    def log_paths(self) -> list[Path]:
        return [self.fixed_log_path]

    def start(self) -> Self:
        self.spawn()
        self.ps = psutil.Process(self.pid)
        return self

    def rss_mib(self) -> float:
        assert self.ps is not None
        return float(self.ps.memory_info().rss) / 2**20

    def hwm_mib(self) -> float:
        """Peak RSS (VmHWM) so far."""
        for line in Path(f"/proc/{self.pid}/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
        return float("nan")

    def cpu_seconds(self) -> float:
        assert self.ps is not None
        t = self.ps.cpu_times()
        return float(t.user + t.system)


class ControllerProc(Proc):
    name = "controller"

    def __init__(
        self,
        kubeconfig: str,
        namespace: str,
        log_path: Path,
        *,
        log_level: str = "INFO",
        src: Path | None = None,
        liveness: bool = False,
    ) -> None:
        self.metrics_port = free_port()
        self.liveness_url = f"http://127.0.0.1:{free_port()}/healthz" if liveness else ""
        argv = controller_argv(
            namespace,
            log_level=log_level,
            metrics_port=self.metrics_port,
            liveness=self.liveness_url,
        )
        super().__init__(argv, kubeconfig, log_path, src)

    def metrics(self) -> dict[str, float]:
        """The controller's Prometheus counters and gauges (samples without labels summed)."""
        url = f"http://127.0.0.1:{self.metrics_port}/metrics"
        with urllib.request.urlopen(url, timeout=2) as resp:
            text = resp.read().decode()
        out: dict[str, float] = {}
        for line in text.splitlines():
            if not line or line.startswith("#"):
                continue
            m = re.match(r"^([a-zA-Z_:]+)(\{[^}]*\})?\s+(\S+)$", line)
            if m:
                out[m.group(1) + (m.group(2) or "")] = float(m.group(3))
        return out

    def reconciles(self) -> tuple[float, float] | None:
        """(reconcile passes so far, queue depth), or None while the endpoint is not up."""
        try:
            m = self.metrics()
        except OSError:
            return None
        total = sum(v for k, v in m.items() if k.startswith("bindery_reconciles_total{"))
        return total, m.get("bindery_queue_depth", 0.0)

    def started_at(self) -> float | None:
        """Seconds from spawn to the "controller started" log line (after its initial LIST)."""
        with suppress(OSError):
            for line in self.log_path.read_text(errors="replace").splitlines():
                if "controller started" in line:
                    with suppress(ValueError):
                        stamp = json.loads(line).get("timestamp", "")
                        wall = datetime.fromisoformat(stamp.replace("Z", "+00:00")).timestamp()
                        return wall - self.spawned_wall
        return None

    def started_agents(self) -> int | None:
        with suppress(OSError):
            for line in self.log_path.read_text(errors="replace").splitlines():
                if "controller started" in line:
                    with suppress(ValueError):
                        return int(json.loads(line).get("agents"))
        return None


class BaselineProc(Proc):
    name = "baseline client"

    def __init__(
        self,
        kubeconfig: str,
        namespace: str,
        log_path: Path,
        workers: int = 8,
        writes: str = "status",
    ) -> None:
        """``writes``: "status" (one status patch per agent) or "same" (the bindings ConfigMap
        and the status, the writes Bindery's design needs; see bench/e2e_baseline.py)."""
        if writes == "same":
            self.name = "same-writes baseline client"
        super().__init__(
            [
                "-m",
                "bench.e2e_baseline",
                "--kubeconfig",
                kubeconfig,
                "--namespace",
                namespace,
                "--workers",
                str(workers),
                "--writes",
                writes,
            ],
            kubeconfig,
            log_path,
        )


class KopfFloorProc(Proc):
    """bench/e2e_kopf_floor.py: kopf alone, listing the four Bindery kinds of one namespace."""

    name = "kopf floor"

    def __init__(self, kubeconfig: str, namespace: str, expect: int, log_path: Path) -> None:
        super().__init__(
            ["-m", "bench.e2e_kopf_floor", "--namespace", namespace, "--expect", str(expect)],
            kubeconfig,
            log_path,
        )

    def result(self, timeout: float) -> dict[str, float]:
        """Wait for it to stop by itself; its figures (seconds from spawn, CPU seconds)."""
        assert self.proc is not None
        try:
            self.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.stop()
            raise RuntimeError(f"the kopf floor did not list everything in {timeout} s") from None
        for line in reversed(self.log_path.read_text(errors="replace").splitlines()):
            if line.startswith("{"):
                with suppress(ValueError):
                    figures: dict[str, float] = json.loads(line)
                    return figures
        tail = self.log_path.read_text(errors="replace")[-3000:]
        raise RuntimeError(f"the kopf floor printed no figures; last lines:\n{tail}")


@dataclass
class Settled:
    """How a controller start went: when it had reconciled everything and gone quiet."""

    reconciled_s: float
    """Spawn -> the reconcile counter reached its final value (queue empty)."""
    quiet_s: float
    """Spawn -> the start of the final stretch with CPU below the quiet threshold."""
    passes: float
    cpu_s: float
    """CPU seconds the process used from spawn to quiet."""

    @property
    def settled_s(self) -> float:
        return max(self.reconciled_s, self.quiet_s)


def wait_settled(
    ctl: ControllerProc,
    min_passes: int,
    *,
    quiet_window: float = 3.0,
    cpu_quiet: float = 0.10,
    timeout: float = 600.0,
    interval: float = 0.1,
) -> Settled:
    """Poll the controller's metrics and CPU until it has made at least ``min_passes`` reconcile
    passes, its queue is empty, the pass counter has not moved for ``quiet_window`` seconds and
    its CPU use over that window is below ``cpu_quiet`` (a fraction of one core)."""
    samples: list[tuple[float, float, float, float]] = []  # (t, passes, depth, cpu)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        ctl.check()
        now = time.monotonic()
        got = ctl.reconciles()
        cpu = ctl.cpu_seconds()
        if got is not None:
            samples.append((now, got[0], got[1], cpu))
            passes = got[0]
            window = [s for s in samples if s[0] >= now - quiet_window]
            old = window[0]
            if (
                passes >= min_passes
                and got[1] == 0
                and now - samples[0][0] >= quiet_window
                and old[0] <= now - quiet_window + 2 * interval
                and old[1] == passes
                and (cpu - old[3]) < cpu_quiet * (now - old[0])
            ):
                return _settled(ctl, samples, cpu_quiet, interval)
        time.sleep(interval)
    raise TimeoutError(f"the controller did not settle in {timeout} s (samples: {samples[-3:]})")


def _settled(
    ctl: ControllerProc,
    samples: list[tuple[float, float, float, float]],
    cpu_quiet: float,
    dt: float,
) -> Settled:
    final = samples[-1][1]
    reconciled = next(s[0] for s in samples if s[1] >= final)
    # the quiet stretch: walk back while each ~0.5 s step used little CPU
    quiet = samples[-1][0]
    step = max(1, round(0.5 / dt))
    i = len(samples) - 1
    while i - step >= 0:
        a, b = samples[i - step], samples[i]
        if b[3] - a[3] >= cpu_quiet * (b[0] - a[0]):
            break
        quiet = a[0]
        i -= step
    return Settled(
        reconciled_s=reconciled - ctl.spawned_at,
        quiet_s=quiet - ctl.spawned_at,
        passes=final,
        cpu_s=samples[-1][3],
    )


class LivenessProber:
    """Asks a controller's liveness endpoint every ``period`` seconds, as the kubelet would
    (``timeout`` seconds per answer), from a thread, until :meth:`stop`: how long each answer
    took while the controller started, and which came late or not at all.

    Refused connections before the first answer are the endpoint not served yet, not failures.
    """

    def __init__(self, url: str, *, period: float = 2.0, timeout: float = 5.0) -> None:
        if not url.startswith("http://"):
            raise ValueError(f"liveness prober: {url!r} is not an http:// URL")
        self.url, self.period, self.timeout = url, period, timeout
        self.answers: list[float] = []
        self.failures: list[str] = []
        self.first_answer_s: float | None = None
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="liveness", daemon=True)
        self._began = 0.0

    def start(self) -> Self:
        self._began = time.monotonic()
        self._thread.start()
        return self

    def stop(self) -> dict[str, float | int | None]:
        """Stop asking; the figures: answers, failures, the slowest answer (seconds)."""
        self._stop.set()
        self._thread.join(self.timeout + self.period)
        return {
            "answers": len(self.answers),
            "failures": len(self.failures),
            "slowest_s": round(max(self.answers), 3) if self.answers else None,
            "first_answer_s": self.first_answer_s,
        }

    def _run(self) -> None:
        while not self._stop.wait(self.period):
            t = time.monotonic()
            try:
                with urllib.request.urlopen(self.url, timeout=self.timeout) as resp:  # noqa: S310
                    resp.read()
                    ok = resp.status == 200
            except OSError as exc:
                if self.first_answer_s is None and "refused" in str(exc).lower():
                    continue  # not served yet
                self.failures.append(f"{t - self._began:.1f} s: {exc}")
                continue
            took = time.monotonic() - t
            if self.first_answer_s is None:
                self.first_answer_s = round(t - self._began, 1)
            if ok and took <= self.timeout:
                self.answers.append(took)
            else:
                self.failures.append(f"{t - self._began:.1f} s: HTTP {resp.status} in {took:.1f} s")
