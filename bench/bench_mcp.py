"""Benchmark of the MCP adapter: notification latency, and the adapter's memory per session.

Starts one adapter process (``python -m controller.mcp serve``, as the session pod's sidecar
runs it) per session on the loopback, each over a bindings file of its own; connects two clients
to each, the Python SDK's, one per protocol generation (2026-07-28 ``subscriptions/listen`` and
2025-11-25 ``resources/subscribe``); then replaces documents as the delivery sidecar does (temp
file and rename) and times each replacement until the client is told. It prints each figure with
its target and the ratio between them (at most 1.00 meets it)::

    .venv/bin/python -m bench.bench_mcp [--sessions 4] [--changes 100]

The memory figure is the resident set of one adapter process (its whole cost per session: one
sidecar per session pod), after the changes, with both clients connected.
"""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import json
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import warnings
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import psutil
from mcp import Client
from mcp.shared.subscriptions import ResourceUpdated

REPO = Path(__file__).resolve().parent.parent
BINDINGS = "bindery://bindings"
LATENCY_TARGET_MS = 1000.0
MEMORY_TARGET_MB = 128.0
"""Below the sidecar's memory limit (192Mi), with room for a larger document."""


def _document(session: int, n: int) -> str:
    doc = {
        "apiVersion": "bindery.dev/v1alpha1",
        "kind": "Bindings",
        "agent": {"namespace": "bench", "name": f"agent-{session}"},
        "resources": [
            {"name": "src", "tag": "vcs", "uri": f"git://bench/app/r{n}", "state": "Bound"},
            {"name": "work", "tag": "issue", "uri": f"github-issue://bench/app/{n % 7}",
             "state": "Bound", "hold": {"uid": f"uid-{n}", "resourceVersion": str(n)}},
        ],
        "tools": [],
    }  # fmt: skip
    return json.dumps(doc, indent=2, sort_keys=True) + "\n"


def _deliver(path: Path, text: str) -> None:
    temp = path.with_name(f".{path.name}.tmp")
    temp.write_text(text)
    os.replace(temp, path)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


@dataclass
class Session:
    index: int
    directory: Path
    port: int
    process: subprocess.Popen[bytes]
    started: float = field(default_factory=time.monotonic)
    modern: asyncio.Queue[tuple[float, str]] = field(default_factory=asyncio.Queue)
    legacy: asyncio.Queue[tuple[float, str]] = field(default_factory=asyncio.Queue)

    @property
    def bindings(self) -> Path:
        return self.directory / "bindings.json"

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/mcp"


def _start(index: int, root: Path) -> Session:
    directory = root / f"session-{index}"
    directory.mkdir()
    _deliver(directory / "bindings.json", _document(index, 0))
    port = _free_port()
    process = subprocess.Popen(
        [
            sys.executable, "-m", "controller.mcp", "serve", f"--listen=127.0.0.1:{port}",
            f"--bindings={directory / 'bindings.json'}", f"--ack-file={directory / 'ack.json'}",
            "--resolve=off", "--log-level=WARNING",
        ],
        cwd=REPO,
        env={**os.environ, "PYTHONPATH": str(REPO)},
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )  # fmt: skip
    return Session(index, directory, port, process)


START_TIMEOUT_S = 60.0


async def _listening(session: Session) -> float:
    """Seconds until the adapter accepts connections, from when it was started."""
    started = session.started
    while True:
        try:
            _, writer = await asyncio.open_connection("127.0.0.1", session.port)
        except OSError:
            if session.process.poll() is not None or time.monotonic() - started > START_TIMEOUT_S:
                raise RuntimeError(f"adapter {session.index} did not start") from None
            await asyncio.sleep(0.02)
            continue
        writer.close()
        return time.monotonic() - started


async def _modern(session: Session, ready: asyncio.Event, stop: asyncio.Event) -> None:
    async with (
        Client(session.url, mode="auto") as client,
        client.listen(resource_subscriptions=[BINDINGS]) as subscription,
    ):
        ready.set()
        events = subscription.__aiter__()
        while not stop.is_set():
            event = await events.__anext__()
            if event == ResourceUpdated(BINDINGS):
                session.modern.put_nowait((time.perf_counter(), BINDINGS))


async def _legacy(session: Session, ready: asyncio.Event, stop: asyncio.Event) -> None:
    async def handler(message: Any) -> None:
        if getattr(message, "method", "") == "notifications/resources/updated":
            session.legacy.put_nowait((time.perf_counter(), message.params.uri))

    async with Client(session.url, mode="legacy", message_handler=handler) as client:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # resources/subscribe: the 2025 era's own way
            await client.subscribe_resource(BINDINGS)
        ready.set()
        await stop.wait()


def _quantile(samples: list[float], q: float) -> float:
    return sorted(samples)[min(len(samples) - 1, round(q * (len(samples) - 1)))]


def _ratio_line(label: str, value: float, unit: str, target: float, detail: str = "") -> str:
    return (
        f"{label}: {value:.2f} {unit}{detail} (target <= {target:g} {unit}, "
        f"ratio {value / target:.2f})"
    )


async def run(sessions: int, changes: int) -> list[str]:
    with tempfile.TemporaryDirectory(prefix="bindery-bench-mcp-") as tmp:
        started = [_start(i, Path(tmp)) for i in range(sessions)]
        stop = asyncio.Event()
        tasks: list[asyncio.Task[None]] = []
        try:
            startup = max([await _listening(s) for s in started])
            for session in started:
                for client in (_modern, _legacy):
                    ready = asyncio.Event()
                    tasks.append(asyncio.create_task(client(session, ready, stop)))
                    await asyncio.wait_for(ready.wait(), 30)
            modern: list[float] = []
            legacy: list[float] = []
            for n in range(1, changes + 1):
                session = started[n % sessions]
                t0 = time.perf_counter()
                _deliver(session.bindings, _document(session.index, n))
                m, _ = await asyncio.wait_for(session.modern.get(), 10)
                lg, _ = await asyncio.wait_for(session.legacy.get(), 10)
                modern.append((m - t0) * 1000)
                legacy.append((lg - t0) * 1000)
                await asyncio.sleep(0.01)
            rss = [psutil.Process(s.process.pid).memory_info().rss / 2**20 for s in started]
            digest = hashlib.sha256(started[0].bindings.read_bytes()).hexdigest()[:12]
        finally:
            stop.set()
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
            for s in started:
                s.process.terminate()
            for s in started:
                s.process.wait(10)
    detail = f" ({changes} changes over {sessions} sessions)"
    return [
        _ratio_line("mcp notification p50, 2026-07-28 listen", statistics.median(modern), "ms",
                    LATENCY_TARGET_MS, detail),
        _ratio_line("mcp notification p99, 2026-07-28 listen", _quantile(modern, 0.99), "ms",
                    LATENCY_TARGET_MS, detail),
        _ratio_line("mcp notification p50, 2025-11-25 subscribe", statistics.median(legacy), "ms",
                    LATENCY_TARGET_MS, detail),
        _ratio_line("mcp notification p99, 2025-11-25 subscribe", _quantile(legacy, 0.99), "ms",
                    LATENCY_TARGET_MS, detail),
        _ratio_line("mcp adapter RSS per session", max(rss), "MB", MEMORY_TARGET_MB,
                    f" (max of {sessions}; mean {statistics.mean(rss):.1f} MB)"),
        f"mcp adapters started together: all {sessions} listening after {startup:.2f} s "
        f"(last document {digest})",
    ]  # fmt: skip


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--sessions", type=int, default=4, help="adapter processes (default 4)")
    parser.add_argument("--changes", type=int, default=100, help="documents replaced (default 100)")
    args = parser.parse_args(argv)
    for line in asyncio.run(run(args.sessions, args.changes)):
        print(line)
    return 0


if __name__ == "__main__":
    sys.exit(main())
