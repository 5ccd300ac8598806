"""Shared fixtures: one real local control plane per test session, a namespace per test.

Integration tests talk to a real etcd + kube-apiserver (+ kube-controller-manager, kube-scheduler
and a kwok fake node) built from the Go module proxy by ``harness/tools/build.sh``. Nothing here
mocks the API server. The control plane is started lazily, so a run of only unit tests never
builds it.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client, config

from controller.k8s.api import USER_AGENT
from harness.cluster import ClusterState, LocalCluster, kubectl

REPO_ROOT = Path(__file__).resolve().parent.parent
CRD_DIR = REPO_ROOT / "crds"


@dataclass
class Cluster:
    """A running local control plane, as tests see it."""

    state: ClusterState

    @property
    def kubeconfig(self) -> Path:
        return Path(self.state.kubeconfig)

    @property
    def bin_dir(self) -> Path:
        return Path(self.state.bin_dir)

    @property
    def audit_log(self) -> Path:
        return Path(self.state.audit_log)

    def kubectl(
        self, *args: str, input: str | None = None, check: bool = True
    ) -> subprocess.CompletedProcess[str]:
        proc = kubectl(self.bin_dir, self.kubeconfig, *args, input=input, check=False)
        if check and proc.returncode != 0:
            raise AssertionError(
                f"kubectl {' '.join(args)} exited {proc.returncode}:\n{proc.stderr}"
            )
        return proc

    def api_client(self) -> client.ApiClient:
        cfg = client.Configuration()
        config.load_kube_config(config_file=str(self.kubeconfig), client_configuration=cfg)
        return client.ApiClient(cfg)


@pytest.fixture(scope="session")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    local = LocalCluster(tmp_path_factory.mktemp("cluster"), audit=True, nodes=True)
    state = local.up()
    try:
        yield Cluster(state)
    finally:
        local.down()


def wait_for(predicate: Any, timeout: float = 30.0, interval: float = 0.1, what: str = "") -> Any:
    """Poll ``predicate`` until it returns a truthy value; fail with ``what`` on timeout."""
    deadline = time.monotonic() + timeout
    last: Any = None
    while time.monotonic() < deadline:
        last = predicate()
        if last:
            return last
        time.sleep(interval)
    raise AssertionError(
        f"timed out after {timeout}s waiting for {what or predicate} (last: {last!r})"
    )


@pytest.fixture(scope="session")
def crds(cluster: Cluster) -> list[str]:
    """Apply every CRD under crds/ and wait until the API server serves them."""
    files = sorted(CRD_DIR.glob("*.yaml"))
    assert files, f"no CRDs found under {CRD_DIR}"
    for path in files:
        cluster.kubectl("apply", "--server-side", "-f", str(path))
    names = [
        line.split("/", 1)[1]
        for line in cluster.kubectl("get", "-f", str(CRD_DIR), "-o", "name").stdout.split()
    ]
    for name in names:
        cluster.kubectl("wait", "--for=condition=Established", f"crd/{name}", "--timeout=60s")
    return names


@pytest.fixture
def namespace(cluster: Cluster) -> Iterator[str]:
    """A fresh namespace for one test, deleted (without waiting) afterwards."""
    name = f"t-{uuid.uuid4().hex[:10]}"
    cluster.kubectl("create", "namespace", name)
    try:
        yield name
    finally:
        cluster.kubectl("delete", "namespace", name, "--wait=false", check=False)


class ControllerProcess:
    """The real controller (``bindery run``) as a subprocess watching one namespace.

    A subprocess, not a thread: tests can kill it at any point (SIGKILL, no cleanup) and start a
    new one, exactly as a crashed or rescheduled controller pod would be.
    """

    def __init__(
        self,
        cluster: Cluster,
        namespace: str,
        log_dir: Path,
        *,
        args: tuple[str, ...] = ("--standalone",),
        ready_line: str = "controller started",
        name: str = "controller",
    ) -> None:
        self.cluster = cluster
        self.namespace = namespace
        self.log_dir = log_dir
        self.args = args
        self.ready_line = ready_line
        self.name = name
        self.proc: subprocess.Popen[bytes] | None = None
        self.starts = 0

    @property
    def log_path(self) -> Path:
        return self.log_dir / f"{self.name}-{self.starts}.log"

    def start(self) -> ControllerProcess:
        self.starts += 1
        env = {
            **os.environ,
            "KUBECONFIG": str(self.cluster.kubeconfig),
            "PYTHONPATH": str(REPO_ROOT),
        }
        with open(self.log_path, "wb") as out:
            self.proc = subprocess.Popen(
                [
                    sys.executable,
                    "-m",
                    "controller",
                    "run",
                    *self.args,
                    "--namespace",
                    self.namespace,
                    "--liveness=",
                    "--metrics-port",
                    "0",
                    "--log-level",
                    "DEBUG",
                ],
                stdout=out,
                stderr=subprocess.STDOUT,
                env=env,
                cwd=REPO_ROOT,
            )
        wait_for(
            lambda: self._alive() and self.ready_line in self.log_path.read_text(),
            timeout=60,
            what=f"the controller to start (log: {self.log_path})",
        )
        return self

    def _alive(self) -> bool:
        if self.proc is None or self.proc.poll() is not None:
            raise AssertionError(f"the controller exited; its log:\n{self.logs()[-4000:]}")
        return True

    def logs(self) -> str:
        return "".join(
            p.read_text(errors="replace") for p in sorted(self.log_dir.glob(f"{self.name}-*.log"))
        )

    def lines_before_shutdown(self) -> list[str]:
        """Each run's log lines until it was told to stop: kopf's own teardown is not the
        controller's behaviour under test."""
        lines: list[str] = []
        for path in sorted(self.log_dir.glob(f"{self.name}-*.log")):
            for line in path.read_text(errors="replace").splitlines():
                if "Operator is stopping" in line:
                    break
                lines.append(line)
        return lines

    def kill(self) -> None:
        """SIGKILL: no cleanup handlers, no graceful shutdown."""
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(timeout=10)

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout=10)


@pytest.fixture
def controller(
    cluster: Cluster, crds: list[str], namespace: str, tmp_path: Path
) -> Iterator[ControllerProcess]:
    """The controller running against the test's namespace; fails the test if it crashed."""
    proc = ControllerProcess(cluster, namespace, tmp_path).start()
    try:
        yield proc
        proc._alive()
        # Delete the agents while the controller runs, so their finalizers are honoured and
        # the namespace can go.
        cluster.kubectl("delete", "agentspec", "--all", "-n", namespace, "--timeout=60s")
    finally:
        proc.stop()
    errors = [line for line in proc.lines_before_shutdown() if '"level": "error"' in line]
    assert not errors, "the controller logged errors:\n" + "\n".join(errors[:20])


@dataclass(frozen=True)
class Write:
    verb: str
    resource: str
    namespace: str
    name: str
    subresource: str


def controller_writes(cluster: Cluster, namespace: str, since: float = 0.0) -> list[Write]:
    """API writes the controller made in ``namespace`` (from the API server's audit log).

    ``since`` is a byte offset into the audit log (see ``audit_mark``), so a test can count the
    writes caused by one change.
    """
    writes = []
    with open(cluster.audit_log, "rb") as log:
        log.seek(int(since))
        for raw in log:
            if not raw.endswith(b"\n"):
                break  # the API server is still writing this line
            entry = json.loads(raw)
            if not str(entry.get("userAgent", "")).startswith(USER_AGENT.split("/")[0]):
                continue
            ref = entry.get("objectRef") or {}
            if ref.get("namespace", "") != namespace or entry.get("stage") != "ResponseComplete":
                continue
            writes.append(
                Write(
                    entry["verb"],
                    ref.get("resource", ""),
                    namespace,
                    ref.get("name", ""),
                    ref.get("subresource", ""),
                )
            )
    return writes


def audit_mark(cluster: Cluster) -> float:
    """The end of the audit log's last complete line: count writes after this point.

    The API server may be half-way through writing a line; the mark never falls inside it.
    """
    with open(cluster.audit_log, "rb") as log:
        end = log.seek(0, os.SEEK_END)
        while end > 0:
            start = max(0, end - 65536)
            log.seek(start)
            newline = log.read(end - start).rfind(b"\n")
            if newline >= 0:
                return float(start + newline + 1)
            end = start
    return 0.0
