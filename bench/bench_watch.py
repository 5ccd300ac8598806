"""How soon the session library's watcher notices a replaced bindings document.

A document is replaced as the delivery sidecar replaces it (a temporary file written and synced,
then renamed over the path) or as the kubelet updates a projected ConfigMap volume (a new
timestamped directory, then a fresh ``..data`` symlink renamed over the old); the figure is the
time from the rename to the watcher's callback, in one process (``time.perf_counter``). The
watcher runs as a runtime runs it (``BindingsWatcher.watch`` in a thread of its own), through its
directory watch (inotify) and, beside it, polling alone (its fallback where the platform has no
directory watch, at the default interval of 1 s). The files live in /dev/shm where it exists,
like the session pod's memory-backed emptyDir.

    .venv/bin/python -m bench.bench_watch [--replacements 100] [--poll-interval 1.0]
"""

from __future__ import annotations

import argparse
import os
import random
import shutil
import statistics
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path

from bindery_session import Bindings, BindingsWatcher
from bindery_session.testing import FakeBindings

TARGET_P99_MS = 50.0


def quantile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def rename_into(path: Path, data: bytes) -> Callable[[], None]:
    """The sidecar's replacement, split so that the rename alone is what gets timed."""
    temp = path.with_name(f".{path.name}.bench")
    with open(temp, "wb") as out:
        out.write(data)
        out.flush()
        os.fsync(out.fileno())
    return lambda: os.replace(temp, path)


def swap_into(volume: Path, data: bytes, n: int) -> Callable[[], None]:
    """The kubelet's update of a projected volume, up to the ``..data`` swap."""
    stamp = f"..2026_12_01_06_30_00.{n}"
    (volume / stamp).mkdir()
    (volume / stamp / "bindings.json").write_bytes(data)
    (volume / "..data_tmp").symlink_to(stamp)
    return lambda: os.rename(volume / "..data_tmp", volume / "..data")


def measure(
    path: Path,
    replace: Callable[[bytes, int], Callable[[], None]],
    count: int,
    interval: float,
    *,
    notify: bool = True,
    phase: float = 0.01,
) -> list[float]:
    """Milliseconds from each of ``count`` replacements to the watcher's callback; each comes
    a random time (up to ``phase`` seconds) after the previous notice, as changes do."""
    seen = threading.Event()
    stop = threading.Event()

    def noticed(_: Bindings) -> None:
        seen.set()

    thread = threading.Thread(
        target=BindingsWatcher(path, interval=interval, notify=notify).watch,
        args=(noticed, stop),
        daemon=True,
    )
    thread.start()
    if not seen.wait(10):
        raise SystemExit(f"the watcher never reported the first document at {path}")
    fake = FakeBindings(path.parent / ".documents")
    latencies = []
    rng = random.Random(count)
    try:
        for n in range(count):
            seen.clear()
            data = fake.document({"src": f"git://r{n}"}).render().encode()
            rename = replace(data, n)
            time.sleep(rng.uniform(0, phase))
            started = time.perf_counter()
            rename()
            if not seen.wait(10):
                raise SystemExit(f"replacement {n} at {path} was not noticed within 10 s")
            latencies.append((time.perf_counter() - started) * 1000)
    finally:
        stop.set()
        thread.join(5)
        fake.close()
    return latencies


def kubelet_volume(root: Path) -> Path:
    volume = root / "kubelet"
    volume.mkdir()
    seed = FakeBindings(root / ".seed").document({"src": "git://seed"}).render().encode()
    swap_into(volume, seed, 0)()
    (volume / "bindings.json").symlink_to(Path("..data") / "bindings.json")
    return volume / "bindings.json"


def report(label: str, values: list[float], target: float | None) -> None:
    p50, p99 = statistics.median(values), quantile(values, 0.99)
    detail = f"p99, p50 {p50:.1f} ms, max {max(values):.1f} ms, n={len(values)}"
    if target is None:
        print(f"{label}: {p99:.1f} ms {detail}")
    else:
        print(f"{label}: {p99:.1f} ms {detail} (target <= {target:g} ms, ratio {p99 / target:.2f})")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("--replacements", type=int, default=100)
    parser.add_argument("--poll-interval", type=float, default=1.0)
    args = parser.parse_args(argv)
    shm = Path("/dev/shm")  # noqa: S108 - a private directory is made in it by mkdtemp
    root = Path(tempfile.mkdtemp(prefix="bindery-bench-watch-", dir=shm if shm.is_dir() else None))
    try:
        sidecar = root / "sidecar" / "bindings.json"
        sidecar.parent.mkdir()
        sidecar.write_text(FakeBindings(root / ".first").document({"src": "git://first"}).render())
        count = args.replacements

        def by_rename(data: bytes, _: int) -> Callable[[], None]:
            return rename_into(sidecar, data)

        watched = measure(sidecar, by_rename, count, 1.0)
        report("watch: sidecar rename -> noticed", watched, TARGET_P99_MS)
        volume = kubelet_volume(root)

        def by_swap(data: bytes, n: int) -> Callable[[], None]:
            return swap_into(volume.parent, data, n + 1)

        swapped = measure(volume, by_swap, count, 1.0)
        report("watch: kubelet ..data swap -> noticed", swapped, TARGET_P99_MS)
        polled = measure(
            sidecar, by_rename, count, args.poll_interval, notify=False, phase=args.poll_interval
        )
        report(f"poll ({args.poll_interval:g} s): sidecar rename -> noticed", polled, None)
    finally:
        shutil.rmtree(root, ignore_errors=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
