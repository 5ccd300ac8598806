"""The adapter as a process on the loopback, and the TypeScript SDK's client beside it.

Shared by the loopback tests and the bench: :func:`adapter_process` starts
``python -m controller.mcp serve`` over a bindings file and an ack directory; :func:`node_probe`
installs the TypeScript SDK (``tests/mcp/node``: a committed package.json and lockfile) into a
cache directory keyed by them, outside the checkout, and returns the command that runs the probe.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
NODE_DIR = Path(__file__).resolve().parent / "node"
CACHE = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "bindery"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


def listening(port: int) -> bool:
    try:
        socket.create_connection(("127.0.0.1", port), 0.2).close()
    except OSError:
        return False
    return True


@dataclass
class Served:
    url: str
    port: int
    bindings: Path
    ack: Path
    process: subprocess.Popen[str]
    log: Path

    def output(self) -> str:
        return self.log.read_text(errors="replace")


def start(
    bindings: Path, ack: Path, port: int, log: Path, *args: str, env: dict[str, str] | None = None
) -> subprocess.Popen[str]:
    with log.open("a") as out:
        return subprocess.Popen(
            [
                sys.executable, "-m", "controller.mcp", "serve",
                f"--listen=127.0.0.1:{port}", f"--bindings={bindings}", f"--ack-file={ack}",
                "--resolve=off", *args,
            ],
            cwd=REPO,
            env={**os.environ, "PYTHONPATH": str(REPO), **(env or {})},
            stdout=out,
            stderr=subprocess.STDOUT,
            text=True,
        )  # fmt: skip


def wait_listening(
    process: subprocess.Popen[str], port: int, log: Path, timeout: float = 60
) -> None:
    deadline = time.monotonic() + timeout
    while not listening(port):
        if process.poll() is not None:
            raise AssertionError(f"the adapter exited ({process.returncode}):\n{log.read_text()}")
        if time.monotonic() > deadline:
            raise AssertionError(
                f"the adapter is not listening after {timeout} s:\n{log.read_text()}"
            )
        time.sleep(0.05)


def stop(process: subprocess.Popen[str]) -> None:
    if process.poll() is None:
        process.terminate()
        try:
            process.wait(10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(10)


@contextmanager
def adapter_process(directory: Path, *args: str) -> Iterator[Served]:
    """The adapter serving ``directory/bindings/bindings.json`` (which must exist) and writing
    ``directory/ack/ack.json``, on a free loopback port, until the block ends."""
    bindings = directory / "bindings" / "bindings.json"
    ack = directory / "ack" / "ack.json"
    ack.parent.mkdir(exist_ok=True)
    port = free_port()
    log = directory / "adapter.log"
    process = start(bindings, ack, port, log, *args)
    try:
        wait_listening(process, port, log)
        yield Served(f"http://127.0.0.1:{port}/mcp", port, bindings, ack, process, log)
    finally:
        stop(process)


def node_probe() -> list[str]:
    """``node probe.mjs``, with the TypeScript SDK installed (``npm ci``) into a cache directory
    keyed by the committed package.json and lockfile. Raises AssertionError when node or npm
    is missing or the install fails: the independent client is part of the test, not optional."""
    node, npm = shutil.which("node"), shutil.which("npm")
    needed = "node and npm (Node 20 or later) are needed for the TypeScript client"
    assert node, needed
    assert npm, needed
    manifest = [NODE_DIR / "package.json", NODE_DIR / "package-lock.json"]
    key = hashlib.sha256(b"".join(p.read_bytes() for p in manifest)).hexdigest()[:12]
    target = CACHE / f"mcp-node-{key}"
    if not (target / ".complete").exists():
        shutil.rmtree(target, ignore_errors=True)
        target.mkdir(parents=True)
        for path in manifest:
            shutil.copy(path, target / path.name)
        proc = subprocess.run(
            [npm, "ci", "--ignore-scripts", "--no-audit", "--no-fund"],
            cwd=target,
            capture_output=True,
            text=True,
            check=False,
            timeout=600,
        )
        assert proc.returncode == 0, (
            f"npm could not install the TypeScript SDK into {target} (from {NODE_DIR}):\n"
            f"{proc.stdout[-2000:]}\n{proc.stderr[-3000:]}"
        )
        (target / ".complete").write_text(key + "\n")
    shutil.copy(NODE_DIR / "probe.mjs", target / "probe.mjs")
    return [node, str(target / "probe.mjs")]
