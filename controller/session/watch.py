"""Noticing a new bindings document without restarting the session.

The kubelet projects a ConfigMap volume as a timestamped directory (``..2026_12_01_06_30_00.1``)
holding the files, a ``..data`` symlink to it, and one symlink per key (``bindings.json ->
..data/bindings.json``). An update writes a new timestamped directory and renames a fresh symlink
over ``..data``: one atomic swap, so a reader sees the old document or the new one, never half of
each. The file itself is never written in place, so watching it for writes sees nothing.

:class:`BindingsWatcher` therefore polls what the swap changes: the ``..data`` target, and the
identity (inode, size, mtime) of the file the path resolves to; when either moved it reads the
document and reports it only if its content changed (a swap can carry the same bytes). The same
checks work for a plain file replaced by a rename, or written in place (a document read half
written is not reported; the next poll reads it whole). Polling needs nothing beyond the standard
library and costs two ``stat`` calls a second.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import os
import threading
from collections.abc import AsyncIterator, Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import structlog

from controller.session.document import Bindings, BindingsError, bindings_path, parse_bindings

DATA_LINK = "..data"
"""The symlink the kubelet swaps atomically in a projected ConfigMap volume."""

log = structlog.get_logger("bindery.session")


@dataclass(frozen=True)
class _Version:
    """What a document swap or rewrite changes, read without reading the document."""

    data_target: str
    """Where ``..data`` points ("" outside a kubelet-projected volume)."""
    inode: int
    size: int
    mtime_ns: int


class BindingsWatcher:
    """Polls the bindings file and reports each new document once.

    ``poll()`` checks once; ``changes()`` is a blocking iterator, ``watch(callback)`` calls back,
    ``achanges()`` is the asyncio variant. Each starts with the current document (when there is
    one), then yields a document whenever its content changed. One watcher serves one consumer.
    """

    def __init__(self, path: str | os.PathLike[str] | None = None, *, interval: float = 1.0):
        self.path: Path = bindings_path(path)
        self.interval = interval
        self._version: _Version | None = None
        self._digest = ""

    def _probe(self) -> _Version | None:
        try:
            target = os.readlink(self.path.parent / DATA_LINK)
        except OSError:
            target = ""
        try:
            st = os.stat(self.path)
        except OSError:
            return None
        return _Version(target, st.st_ino, st.st_size, st.st_mtime_ns)

    def poll(self) -> Bindings | None:
        """The document, if it changed since the last one reported (the first poll reports the
        current one); None if it did not, or if it is missing or unreadable for now."""
        version = self._probe()
        if version is None or version == self._version:
            return None
        try:
            raw = self.path.read_bytes()
        except OSError:
            return None  # swapped away between the probe and the read: the next poll sees it
        self._version = version
        digest = hashlib.sha256(raw).hexdigest()
        if digest == self._digest:
            return None
        try:
            document = parse_bindings(raw.decode("utf-8"), f"the bindings file {self.path}")
        except (BindingsError, UnicodeDecodeError) as exc:
            # A file written in place may be read half-written; its next write changes the
            # version, and the next poll reads it again.
            log.warning("bindings file not readable yet", path=str(self.path), error=str(exc))
            return None
        self._digest = digest
        return document

    def changes(self, stop: threading.Event | None = None) -> Iterator[Bindings]:
        """The current document, then each new one, until ``stop`` is set (blocking)."""
        stop = stop or threading.Event()
        while not stop.is_set():
            document = self.poll()
            if document is not None:
                yield document
            stop.wait(self.interval)

    def watch(
        self, callback: Callable[[Bindings], None], stop: threading.Event | None = None
    ) -> None:
        """Call ``callback`` with the current document, then with each new one, until ``stop``
        is set (blocking: run it in a thread of its own to watch in the background)."""
        for document in self.changes(stop):
            callback(document)

    async def achanges(self, stop: asyncio.Event | None = None) -> AsyncIterator[Bindings]:
        """:meth:`changes` for asyncio: the event loop is never blocked (a poll is two stats,
        and a read only when something moved)."""
        stop = stop or asyncio.Event()
        while not stop.is_set():
            document = self.poll()
            if document is not None:
                yield document
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(stop.wait(), self.interval)
