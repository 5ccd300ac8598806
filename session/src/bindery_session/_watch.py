"""Noticing a new bindings document without restarting the session.

In a session pod the delivery sidecar writes the file (into an emptyDir) by temp file + rename:
the path then names a new file (a new inode). Elsewhere (an external runtime mounting the
ConfigMap, a pod from before the sidecar) it is the kubelet's own projection: a timestamped
directory (``..2026_12_01_06_30_00.1``) holding the files, a ``..data`` symlink to it, and one
symlink per key (``bindings.json -> ..data/bindings.json``). An update writes a new timestamped
directory and renames a fresh symlink over ``..data``: one atomic swap. Neither way writes the
file in place, so watching the file itself sees nothing.

:class:`BindingsWatcher` watches the file's directory instead: on Linux with inotify (both
renames happen in that directory, and are reported within a millisecond), else, or when inotify
is not available, by polling every ``interval`` seconds; with inotify it still looks once per
``interval``. Either way it compares what a swap changes: the ``..data`` target and the identity
(inode, size, mtime) of the file the path resolves to. When either moved it reads the document
and reports it only if its content changed (a swap can carry the same bytes). A document read
half written (a file written in place) is not reported; its next write is.

With ``acknowledge=True`` the watcher also tells the controller what the runtime did with each
document: ``Started`` before its first read, then ``Applied`` once the consumer is done with a
document (or ``Refused`` when a ``watch`` callback raised).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import threading
from collections.abc import AsyncIterator, Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

from bindery_session._acknowledge import ack_path as resolve_ack_path
from bindery_session._acknowledge import acknowledge as write_applied
from bindery_session._acknowledge import announce, refuse
from bindery_session._document import bindings_path, parse_bindings
from bindery_session._errors import BindingsError
from bindery_session._inotify import DirectoryWatch, open_watch
from bindery_session.wire import Bindings, digest

DATA_LINK = "..data"
"""The symlink the kubelet swaps atomically in a projected ConfigMap volume."""

STOP_CHECK = 0.1
"""Seconds a blocking wait on the directory watch lasts before it looks at ``stop`` again."""

log = logging.getLogger("bindery.session")


@dataclass(frozen=True)
class _Version:
    """What a document swap or rewrite changes, read without reading the document."""

    data_target: str
    """Where ``..data`` points ("" outside a kubelet-projected volume)."""
    inode: int
    size: int
    mtime_ns: int


class BindingsWatcher:
    """Watches the bindings file and reports each new document once.

    ``poll()`` checks once; ``changes()`` is a blocking iterator, ``watch(callback)`` calls back,
    ``achanges()`` is the asyncio variant. Each starts with the current document (when there is
    one), then yields a document whenever its content changed. One watcher serves one consumer.

    ``interval`` is how often it looks without being told (the only way where the platform
    offers no directory watch, a safety net where it does); ``notify=False`` polls only.

    ``acknowledge=True`` makes the watcher acknowledge for the runtime (to the file at
    ``ack_path``, else ``$BINDERY_ACK_FILE``, else the mounted path):

    * it announces (``Started``) once, at its first poll, before it first reads the bindings file;
    * ``changes()`` and ``achanges()`` acknowledge a document (``Applied``) when the consumer asks
      for the next one, that is once the loop body ran for it. Leaving the loop (``break``, an
      exception, closing the iterator) does not acknowledge the document in hand: call
      :func:`~bindery_session.acknowledge` yourself if it was applied;
    * ``watch(callback)`` acknowledges a document once the callback returned; when the callback
      raises an :class:`Exception`, it refuses the document with the exception's text, logs it,
      and keeps watching (without ``acknowledge`` the exception propagates);
    * ``poll()`` announces but acknowledges nothing: whoever calls it acknowledges.

    A failed acknowledgement write raises :class:`~bindery_session.AcknowledgeError`.
    """

    def __init__(
        self,
        path: str | os.PathLike[str] | None = None,
        *,
        interval: float = 1.0,
        notify: bool = True,
        acknowledge: bool = False,
        ack_path: str | os.PathLike[str] | None = None,
    ):
        self.path: Path = bindings_path(path)
        self.interval = interval
        self.notify = notify
        self.acknowledges = acknowledge
        self.ack_path: Path | None = resolve_ack_path(ack_path) if acknowledge else None
        self._announced = False
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
        if self.acknowledges and not self._announced:
            announce(self.ack_path)
            self._announced = True
        version = self._probe()
        if version is None or version == self._version:
            return None
        try:
            raw = self.path.read_bytes()
        except OSError:
            return None  # swapped away between the probe and the read: the next look sees it
        self._version = version
        identity = digest(raw)
        if identity == self._digest:
            return None
        try:
            document = parse_bindings(raw, f"the bindings file {self.path}")
        except BindingsError as exc:
            # A file written in place may be read half-written; its next write changes the
            # version, and the next poll reads it again.
            log.warning("bindings file %s not readable yet: %s", self.path, exc)
            return None
        self._digest = identity
        return document

    def _watch(self) -> DirectoryWatch | None:
        return open_watch(self.path.parent) if self.notify else None

    def _applied(self, document: Bindings) -> None:
        if self.acknowledges:
            write_applied(document, self.ack_path)

    def _documents(self, stop: threading.Event) -> Iterator[Bindings]:
        watch = self._watch()
        try:
            while not stop.is_set():
                document = self.poll()
                if document is not None:
                    yield document
                if watch is None:
                    stop.wait(self.interval)
                    watch = self._watch()  # the directory may exist now
                    continue
                waited = 0.0
                while not stop.is_set() and waited < self.interval:
                    step = min(STOP_CHECK, self.interval - waited)
                    if watch.wait(step):
                        break
                    waited += step
        finally:
            if watch is not None:
                watch.close()

    def changes(self, stop: threading.Event | None = None) -> Iterator[Bindings]:
        """The current document, then each new one, until ``stop`` is set (blocking). With
        ``acknowledge``, each is acknowledged when the next is asked for."""
        for document in self._documents(stop or threading.Event()):
            yield document
            self._applied(document)

    def watch(
        self, callback: Callable[[Bindings], None], stop: threading.Event | None = None
    ) -> None:
        """Call ``callback`` with the current document, then with each new one, until ``stop``
        is set (blocking: run it in a thread of its own to watch in the background). With
        ``acknowledge``, a document is acknowledged when the callback returns, and refused with
        the exception's text when it raises (and the watch goes on)."""
        for document in self._documents(stop or threading.Event()):
            if not self.acknowledges:
                callback(document)
                continue
            try:
                callback(document)
            except Exception as exc:
                reason = str(exc) or type(exc).__name__
                log.warning("bindings %s refused: the callback raised: %s", document.digest, reason)
                refuse(document, reason, self.ack_path)
                continue
            write_applied(document, self.ack_path)

    async def achanges(self, stop: asyncio.Event | None = None) -> AsyncIterator[Bindings]:
        """:meth:`changes` for asyncio: the event loop is never blocked (the directory watch is
        one of the loop's readers; a look is two stats, and a read only when something moved;
        an acknowledgement, a write of a small file). With ``acknowledge``, each document is
        acknowledged when the next is asked for."""
        stop = stop or asyncio.Event()
        loop = asyncio.get_running_loop()
        watch = self._watch()
        changed = asyncio.Event()
        if watch is not None:
            notified = watch

            def on_ready() -> None:
                notified.drain()  # consumed at once: a pending event would call back again
                changed.set()

            try:
                loop.add_reader(watch.fd, on_ready)
            except (NotImplementedError, RuntimeError):  # a loop without readers: poll
                watch.close()
                watch = None
        try:
            while not stop.is_set():
                document = self.poll()
                if document is not None:
                    yield document
                    self._applied(document)
                await _first(stop, changed, self.interval)
                changed.clear()
        finally:
            if watch is not None:
                loop.remove_reader(watch.fd)
                watch.close()


async def _first(stop: asyncio.Event, changed: asyncio.Event, timeout: float) -> None:
    """Wait until ``stop`` or ``changed`` is set, or ``timeout`` seconds passed."""
    waits = {asyncio.ensure_future(stop.wait()), asyncio.ensure_future(changed.wait())}
    try:
        await asyncio.wait(waits, timeout=timeout, return_when=asyncio.FIRST_COMPLETED)
    finally:
        for pending in waits:
            pending.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await asyncio.gather(*waits, return_exceptions=True)
