"""A directory watch through Linux inotify, called with ctypes (no dependency to install).

The bindings document is never written in place: the delivery sidecar renames a new file over
it, and the kubelet's projection renames a fresh ``..data`` symlink. Both are entries moved into
the document's directory, which a watch on the directory reports at once. :func:`open_watch`
returns None where inotify is not available (another system, a C library without it, the
per-user limit on watches reached): the watcher then polls.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import os
import select
import sys
from pathlib import Path

IN_MODIFY = 0x002
IN_ATTRIB = 0x004
IN_CLOSE_WRITE = 0x008
IN_MOVED_FROM = 0x040
IN_MOVED_TO = 0x080
IN_CREATE = 0x100
IN_DELETE = 0x200
IN_DELETE_SELF = 0x400
IN_MOVE_SELF = 0x800
IN_NONBLOCK = os.O_NONBLOCK
IN_CLOEXEC = 0o2000000

CHANGES = (
    IN_MODIFY
    | IN_ATTRIB
    | IN_CLOSE_WRITE
    | IN_MOVED_FROM
    | IN_MOVED_TO
    | IN_CREATE
    | IN_DELETE
    | IN_DELETE_SELF
    | IN_MOVE_SELF
)
"""Anything that can change what the document's path names, or the directory itself going."""


class DirectoryWatch:
    """An inotify descriptor watching one directory. :meth:`wait` blocks until something
    changed there (or the timeout); :attr:`fd` can be handed to an event loop's reader."""

    def __init__(self, fd: int) -> None:
        self.fd = fd
        self._poll = select.poll()  # not select(): a descriptor may be above FD_SETSIZE
        self._poll.register(fd, select.POLLIN)

    def wait(self, timeout: float) -> bool:
        """Whether something changed within ``timeout`` seconds (the events are consumed)."""
        ready = self._poll.poll(max(0, round(timeout * 1000)))
        if ready:
            self.drain()
        return bool(ready)

    def drain(self) -> None:
        """Consume the pending events: the watcher rereads the path, whatever they were."""
        try:
            while os.read(self.fd, 65536):
                pass
        except (BlockingIOError, InterruptedError):
            return

    def close(self) -> None:
        if self.fd >= 0:
            os.close(self.fd)
            self.fd = -1


def open_watch(directory: Path) -> DirectoryWatch | None:
    """A watch on ``directory``, or None where inotify cannot provide one."""
    if not sys.platform.startswith("linux"):
        return None
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)
        init, add = libc.inotify_init1, libc.inotify_add_watch
    except (OSError, AttributeError):
        return None
    init.argtypes, init.restype = [ctypes.c_int], ctypes.c_int
    add.argtypes, add.restype = [ctypes.c_int, ctypes.c_char_p, ctypes.c_uint32], ctypes.c_int
    fd = init(IN_NONBLOCK | IN_CLOEXEC)
    if fd < 0:
        return None
    if add(fd, os.fsencode(directory), CHANGES) < 0:
        os.close(fd)
        return None
    return DirectoryWatch(fd)
