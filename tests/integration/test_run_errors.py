"""`bindery run` as a user starts it: one active controller by default, and a one-line error with
its own exit code for each thing that stops it from starting."""

from __future__ import annotations

import asyncio
import contextlib
import os
import socket
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import urlsplit

import pytest
import yaml

from controller.runtime.exits import Exit
from harness.cluster import LocalCluster
from harness.system import free_port
from tests.integration.kube import get
from tests.support import REPO_ROOT, Cluster, ControllerProcess, wait_for

pytestmark = pytest.mark.integration


def bindery_run(
    *args: str, kubeconfig: Path | None, home: Path, timeout: float = 60
) -> subprocess.CompletedProcess[str]:
    """``bindery run`` in a subprocess; today's failures would hang here (kopf retries)."""
    env = {
        k: v
        for k, v in os.environ.items()
        if k not in ("KUBECONFIG", "KUBERNETES_SERVICE_HOST", "POD_NAMESPACE")
    }
    env.update(HOME=str(home), PYTHONPATH=str(REPO_ROOT))
    if kubeconfig is not None:
        env["KUBECONFIG"] = str(kubeconfig)
    return subprocess.run(
        [sys.executable, "-m", "controller", "run", "--liveness=", "--metrics-port=0", *args],
        capture_output=True,
        text=True,
        env=env,
        cwd=REPO_ROOT,
        timeout=timeout,
        check=False,
    )


def assert_one_line_error(proc: subprocess.CompletedProcess[str], code: int, *parts: str) -> None:
    lines = [line for line in proc.stderr.splitlines() if line.startswith("error: ")]
    assert proc.returncode == code, (proc.returncode, proc.stderr[-2000:])
    assert len(lines) == 1, proc.stderr[-2000:]
    assert "Traceback" not in proc.stderr, proc.stderr[-2000:]
    for part in parts:
        assert part in lines[0], lines[0]


def test_missing_kubeconfig(tmp_path: Path) -> None:
    proc = bindery_run(kubeconfig=tmp_path / "nowhere", home=tmp_path)
    assert_one_line_error(proc, Exit.NO_KUBECONFIG, "no kubeconfig", str(tmp_path / "nowhere"))
    proc = bindery_run(kubeconfig=None, home=tmp_path)  # ~/.kube/config absent
    assert_one_line_error(proc, Exit.NO_KUBECONFIG, "~/.kube/config", "KUBECONFIG")


def _pointed_at(cluster: Cluster, server: str, path: Path) -> Path:
    config = yaml.safe_load(cluster.kubeconfig.read_text())
    for entry in config["clusters"]:
        entry["cluster"]["server"] = server
    path.write_text(yaml.safe_dump(config))
    return path


def test_unreachable_api_server(cluster: Cluster, tmp_path: Path) -> None:
    server = f"https://127.0.0.1:{free_port()}"
    kubeconfig = _pointed_at(cluster, server, tmp_path / "kubeconfig")
    started = time.monotonic()
    proc = bindery_run("--wait-for-api-server=3", kubeconfig=kubeconfig, home=tmp_path, timeout=30)
    assert time.monotonic() - started >= 3  # asked again while the wait lasted
    assert "waiting for the API server" in proc.stderr + proc.stdout
    assert_one_line_error(proc, Exit.UNREACHABLE, "unreachable", server)


@contextlib.contextmanager
def _forwarding(port: int, to: tuple[str, int]) -> Iterator[None]:
    """Forward TCP from 127.0.0.1:``port`` to ``to`` (TLS passes through untouched): the API
    server, reachable at the kubeconfig's address from now on."""
    loop = asyncio.new_event_loop()
    ready = threading.Event()

    async def pipe(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while data := await reader.read(65536):
                writer.write(data)
                await writer.drain()
        except (ConnectionError, asyncio.CancelledError):
            pass
        finally:
            writer.close()

    async def connected(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        up_reader, up_writer = await asyncio.open_connection(*to)
        await asyncio.gather(pipe(reader, up_writer), pipe(up_reader, writer))

    async def serve() -> None:
        server = await asyncio.start_server(connected, "127.0.0.1", port)
        ready.set()
        async with server:
            await server.serve_forever()

    async def shutdown() -> None:
        tasks = [t for t in asyncio.all_tasks() if t is not asyncio.current_task()]
        for t in tasks:
            t.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)

    thread = threading.Thread(target=loop.run_forever, daemon=True)
    thread.start()
    asyncio.run_coroutine_threadsafe(serve(), loop)
    assert ready.wait(10), "the forwarder did not start"
    try:
        yield
    finally:
        asyncio.run_coroutine_threadsafe(shutdown(), loop).result(10)
        loop.call_soon_threadsafe(loop.stop)
        thread.join(10)
        loop.close()


def test_an_api_server_back_within_the_wait_is_waited_for(
    cluster: Cluster, crds: list[str], namespace: str, tmp_path: Path
) -> None:
    """A controller restarted while the control plane restarts too keeps asking instead of
    exiting (and being held back by its pod's restart backoff)."""
    real = urlsplit(
        yaml.safe_load(cluster.kubeconfig.read_text())["clusters"][0]["cluster"]["server"]
    )
    port = free_port()
    kubeconfig = _pointed_at(cluster, f"https://127.0.0.1:{port}", tmp_path / "kubeconfig")
    log = tmp_path / "controller.log"
    env = {k: v for k, v in os.environ.items() if k not in ("KUBERNETES_SERVICE_HOST",)}
    env.update(KUBECONFIG=str(kubeconfig), PYTHONPATH=str(REPO_ROOT))
    with open(log, "wb") as out:
        proc = subprocess.Popen(
            [sys.executable, "-m", "controller", "run", "--standalone", "--namespace", namespace,
             "--liveness=", "--metrics-port=0", "--wait-for-api-server=60"],
            stdout=out, stderr=subprocess.STDOUT, env=env, cwd=REPO_ROOT,
        )  # fmt: skip
    try:
        wait_for(lambda: "waiting for the API server" in log.read_text(), what="a first wait")
        with _forwarding(port, (real.hostname or "127.0.0.1", real.port or 443)):
            wait_for(lambda: "controller started" in log.read_text(), what="the controller")
            assert proc.poll() is None, log.read_text()[-2000:]
            proc.kill()  # before the forwarder goes: no connection is left half open
            proc.wait(10)
    finally:
        proc.kill()
        proc.wait(10)


@pytest.fixture
def bare_cluster(tmp_path: Path) -> Iterator[Path]:
    """A second real control plane that has never seen Bindery's CRDs."""
    local = LocalCluster(tmp_path / "bare", nodes=False)
    state = local.up()
    try:
        yield Path(state.kubeconfig)
    finally:
        local.down()


def test_missing_crds(bare_cluster: Path, tmp_path: Path) -> None:
    proc = bindery_run(kubeconfig=bare_cluster, home=tmp_path)
    assert_one_line_error(
        proc, Exit.NO_CRDS, "agentspecs.bindery.dev", "kubectl apply --server-side -f crds/"
    )


@pytest.mark.parametrize("flag", ["liveness", "metrics"])
def test_port_in_use(cluster: Cluster, crds: list[str], tmp_path: Path, flag: str) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        args = (
            [f"--liveness=http://127.0.0.1:{port}/healthz"]
            if flag == "liveness"
            else ["--metrics-port", str(port)]
        )
        proc = bindery_run(*args, "--standalone", kubeconfig=cluster.kubeconfig, home=tmp_path)
    assert_one_line_error(proc, Exit.PORT_IN_USE, f"port {port}", "in use")


def test_standalone_and_leader_elect_exclude_each_other(tmp_path: Path) -> None:
    proc = bindery_run("--standalone", "--leader-elect", kubeconfig=None, home=tmp_path)
    assert proc.returncode == 2
    assert "not allowed with argument" in proc.stderr


def test_leader_election_is_the_default(
    cluster: Cluster, crds: list[str], namespace: str, tmp_path: Path
) -> None:
    """No flag: a second instance waits for the Lease instead of reconciling beside the first.
    The Lease lives in the kubeconfig context's namespace (``default`` here)."""
    lease = f"bindery-default-{uuid.uuid4().hex[:8]}"
    args = ("--leader-election-id", lease)
    first = ControllerProcess(
        cluster, namespace, tmp_path, args=args, ready_line="waiting to lead", name="one"
    )
    second = ControllerProcess(
        cluster, namespace, tmp_path, args=args, ready_line="waiting to lead", name="two"
    )
    try:
        first.start()
        wait_for(lambda: "became the leader" in first.logs(), what="the first to lead")
        second.start()
        held = get(cluster, "lease", "default", lease)
        assert held is not None
        assert held["spec"]["holderIdentity"]
        assert "became the leader" not in second.logs()
        assert '"mode": "leader election"' in second.logs()
    finally:
        second.stop()
        first.stop()
        cluster.kubectl("delete", "lease", lease, "-n", "default", check=False)
