"""Sampling profiles of the controller during a benchmark phase, with py-spy.

``Profiler(pid, out)`` attaches ``py-spy record --nonblocking --gil --format raw`` to a running
process: only the thread holding the GIL is sampled (where the process spends its Python CPU),
as collapsed stacks, one ``frame;frame;... count`` per line; ``summarize(path)`` prints where
the samples fall: by thread role, the top functions by self time, the top frames of this
project (and of kopf, the Kubernetes client, pydantic...) by inclusive time, and ``layers``:
every sample given to one layer (kopf, HTTP client and threads, JSON, the controller's
reconcile, intake and start-up, imports, the event loop) by the first frame from its leaf up
that belongs to one, so that the shares add up to 100 %.

    .venv/bin/python -m bench.e2e_profile PROFILE.txt [--top 25]
"""

from __future__ import annotations

import argparse
import re
import shutil
import signal
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

PY_SPY = Path(sys.executable).parent / "py-spy"


def available() -> bool:
    return PY_SPY.exists() or shutil.which("py-spy") is not None


class Profiler:
    def __init__(self, pid: int, out: Path, rate: int = 100) -> None:
        self.out = out
        exe = str(PY_SPY) if PY_SPY.exists() else "py-spy"
        out.parent.mkdir(parents=True, exist_ok=True)
        self.proc = subprocess.Popen(
            [
                exe,
                "record",
                "--pid",
                str(pid),
                "--rate",
                str(rate),
                "--nonblocking",
                "--gil",
                "--format",
                "raw",
                "--output",
                str(out),
            ],
            stdout=subprocess.DEVNULL,
            stderr=open(out.with_suffix(".log"), "wb"),  # noqa: SIM115
        )
        time.sleep(0.3)

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGINT)
            try:
                self.proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.proc.kill()


_FRAME = re.compile(r"^(?P<func>.*?) \((?P<file>[^()]*?)(?::(?P<line>\d+))?\)$")


def _short(frame: str) -> str:
    m = _FRAME.match(frame)
    if not m:
        return frame
    file = m.group("file")
    for marker in ("site-packages/", "/controller/", "/lib/python3"):
        if marker in file:
            file = file.split(marker, 1)[1]
            if marker == "/controller/":
                file = "controller/" + file
            break
    return f"{m.group('func')} ({file})"


def load(path: Path) -> list[tuple[list[str], int]]:
    stacks = []
    for line in path.read_text(errors="replace").splitlines():
        stack, _, count = line.rpartition(" ")
        if not stack or not count.isdigit():
            continue
        stacks.append((stack.split(";"), int(count)))
    return stacks


_LAYERS: list[tuple[str, tuple[str, ...]]] = [
    ("JSON", ("/json/",)),
    ("kopf", ("/kopf/",)),
    (
        "HTTP client and threads",
        (
            "/aiohttp/",
            "/yarl/",
            "/multidict/",
            "/kubernetes/",
            "/urllib3/",
            "/http/client",
            "ssl.py",
            "socket.py",
            "concurrent/futures",
            "threading.py",
            "/queue.py",
        ),
    ),
    ("controller", ("/controller/", "/pydantic", "/structlog/")),
    ("event loop", ("/asyncio/", "selectors.py")),
]
_CONTROLLER_PARTS: list[tuple[str, tuple[str, ...]]] = [
    ("start-up listing", ("listing (", "catch_up (")),
    ("reconcile", ("controller/reconcile/workers.py", "controller/reconcile/agent.py")),
    ("intake", ("controller/reconcile/intake.py",)),
]


def _layer_of(frame: str) -> str | None:
    m = _FRAME.match(frame)
    file = "/" + (m.group("file") if m else frame)  # py-spy prints paths relative to sys.path
    for name, markers in _LAYERS:
        if any(k in file for k in markers):
            return name
    return None


def layers(path: Path) -> list[tuple[str, float]]:
    """Each sample's layer: imports if anything on its stack imports; else the layer of the
    first frame from the leaf up that has one (the standard library takes its caller's); the
    controller's samples split by where they were called from, JSON's by its caller."""
    stacks = load(path)
    total = sum(c for _, c in stacks) or 1
    out: Counter[str] = Counter()
    for frames, count in stacks:
        if any("importlib._bootstrap" in f for f in frames):
            out["imports (start-up)"] += count
            continue
        found = "other"
        for depth in range(len(frames) - 1, -1, -1):
            layer = _layer_of(frames[depth])
            if layer is None:
                continue
            found = layer
            if layer == "JSON":
                way = "encode" if "encoder.py" in frames[-1] else "decode"
                caller = next(
                    (f for f in reversed(frames[:depth]) if _layer_of(f) not in (None, "JSON")),
                    "?",
                )
                found = f"JSON {way}, called by {_short(caller)}"
            elif layer == "controller":
                part = next(
                    (
                        name
                        for name, keys in _CONTROLLER_PARTS
                        if any(k in f for f in frames for k in keys)
                    ),
                    "other",
                )
                found = f"controller: {part}"
            break
        out[found] += count
    return [(name, count / total) for name, count in out.most_common()]


def summarize(path: Path, top: int = 25) -> str:
    stacks = load(path)
    total = sum(c for _, c in stacks) or 1
    threads: Counter[str] = Counter()
    self_time: Counter[str] = Counter()
    inclusive: Counter[str] = Counter()
    idle = 0
    for frames, count in stacks:
        thread = frames[0] if frames and frames[0].startswith(("thread", "process")) else "?"
        thread = re.sub(r"\(0x[0-9a-f]+\)", "", thread).strip()
        threads[thread] += count
        leaf = _short(frames[-1])
        if any(k in leaf for k in ("select (", "poll (", "_worker (concurrent", "wait (threading")):
            idle += count
        self_time[leaf] += count
        seen = set()
        for f in frames[1:]:
            s = _short(f)
            if s not in seen:
                seen.add(s)
                inclusive[s] += count
    lines = [f"{path}: {total} samples (rate as recorded); idle-looking leaves {idle / total:.0%}"]
    lines.append("threads: " + ", ".join(f"{t} {c / total:.0%}" for t, c in threads.most_common(6)))
    lines.append(f"top {top} by self time:")
    lines += [f"  {c / total:6.1%}  {f}" for f, c in self_time.most_common(top)]
    lines.append(f"top {top} by inclusive time (controller/, kopf, kubernetes, pydantic, json):")
    keep = ("controller/", "kopf/", "kubernetes/", "pydantic", "json/", "structlog", "urllib3")
    lines += [
        f"  {c / total:6.1%}  {f}"
        for f, c in [(f, c) for f, c in inclusive.most_common() if any(k in f for k in keep)][:top]
    ]
    lines.append("by layer (each sample once, by the first frame from its leaf that has one):")
    lines += [f"  {share:6.1%}  {name}" for name, share in layers(path)]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description="summarize a py-spy raw profile")
    p.add_argument("path", type=Path)
    p.add_argument("--top", type=int, default=25)
    args = p.parse_args(argv)
    print(summarize(args.path, args.top))
    return 0


if __name__ == "__main__":
    sys.exit(main())
