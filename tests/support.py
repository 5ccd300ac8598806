"""What the tests share beside their fixtures: the running control plane as tests see it, polling,
the controller as a child process, and the controller's writes read from the audit log.

The fixtures themselves are in ``conftest.py``; the harness (``harness/``) underneath is shared
with bench and chaos.
"""

from __future__ import annotations

import json
import os
import subprocess
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kubernetes import client, config

from controller.k8s.api import USER_AGENT
from harness import process
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


def running(local: LocalCluster, timeout: float = 90.0) -> Iterator[Cluster]:
    """A session fixture's body: ``local`` up for the tests, down after them."""
    state = local.up(timeout=timeout)
    try:
        yield Cluster(state)
    finally:
        local.down()


def install_crds(cluster: Cluster) -> list[str]:
    """Apply every CRD under crds/ and wait until the API server serves them; their names."""
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


PROJECT_IMAGE = "localhost/bindery:dev"
"""The project's image as the real node's containerd has it (built by harness.images)."""


def lane_environment(cluster: Cluster) -> dict[str, str]:
    """The controller's settings for a test lane.

    On a real node, sessions get the delivery sidecar (the project's own image) and the default
    grace for sessions that cannot acknowledge. On kwok no process runs, so no session can
    acknowledge: the write counts at once (grace 0), which is the delivery contract's behaviour
    for such sessions with that setting; the grace itself has its own tests.
    """
    if cluster.state.node_root:
        return {"BINDERY_SESSION_DELIVERY_IMAGE": PROJECT_IMAGE}
    return {"BINDERY_UNACKNOWLEDGED_RELEASE_SECONDS": "0"}


class ControllerProcess(process.ControllerProcess):
    """The real controller (``bindery run``) as a subprocess watching one namespace of the test
    cluster; a controller that exited fails the test with its log."""

    def __init__(
        self,
        cluster: Cluster,
        namespace: str,
        log_dir: Path,
        *,
        args: tuple[str, ...] = ("--standalone",),
        ready_line: str = process.READY_LINE,
        ready_lines: tuple[str, ...] = (),
        name: str = "controller",
        env: dict[str, str] | None = None,
    ) -> None:
        super().__init__(
            cluster.kubeconfig,
            namespace,
            log_dir,
            args=args,
            ready_lines=ready_lines or (ready_line,),
            name=name,
            env={**lane_environment(cluster), **(env or {})},
        )
        self.cluster = cluster

    def _alive(self) -> bool:
        if not self.alive():
            raise AssertionError(f"the controller exited; its log:\n{self.logs()[-4000:]}")
        return True


@contextmanager
def controller_for(
    cluster: Cluster, namespace: str, log_dir: Path, **options: Any
) -> Iterator[ControllerProcess]:
    """A fixture's body: the controller for the test's namespace (``options`` as
    :class:`ControllerProcess` takes them). The test fails if it exited or logged an error. The
    agents are deleted while it still runs, so their finalizers are honoured and the namespace
    can go."""
    proc = ControllerProcess(cluster, namespace, log_dir, **options).start()
    try:
        yield proc
        proc._alive()
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


@dataclass(frozen=True)
class AuditedWrite:
    """A write anyone made, as the audit log records it (``Write`` is the controller's only)."""

    verb: str
    resource: str
    name: str
    subresource: str
    user_agent: str
    code: int


def audited_writes(cluster: Cluster, namespace: str, since: float = 0.0) -> list[AuditedWrite]:
    """Every completed write in ``namespace`` after the byte offset ``since``, by any client."""
    writes = []
    with open(cluster.audit_log, "rb") as log:
        log.seek(int(since))
        for raw in log:
            if not raw.endswith(b"\n"):
                break  # the API server is still writing this line
            entry = json.loads(raw)
            ref = entry.get("objectRef") or {}
            if ref.get("namespace", "") != namespace or entry.get("stage") != "ResponseComplete":
                continue
            writes.append(
                AuditedWrite(
                    entry["verb"],
                    ref.get("resource", ""),
                    ref.get("name", ""),
                    ref.get("subresource", ""),
                    str(entry.get("userAgent", "")),
                    int((entry.get("responseStatus") or {}).get("code", 0)),
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


def controller_writes(cluster: Cluster, namespace: str, since: float = 0.0) -> list[Write]:
    """API writes the controller made in ``namespace`` (from the API server's audit log).

    ``since`` is a byte offset into the audit log (see ``audit_mark``), so a test can count the
    writes caused by one change.
    """
    controller = USER_AGENT.split("/")[0]
    return [
        Write(w.verb, w.resource, namespace, w.name, w.subresource)
        for w in audited_writes(cluster, namespace, since)
        if w.user_agent.startswith(controller)
    ]
