"""Replacing a small file whole, so that a reader sees the old content or the new, never half.

The delivery sidecar writes the bindings document this way and a runtime its acknowledgement:
each reads what the other replaced.
"""

from __future__ import annotations

import contextlib
import os
import tempfile
from pathlib import Path


def write_atomically(path: str | os.PathLike[str], data: bytes, mode: int = 0o644) -> Path:
    """Replace ``path`` with ``data``: a temporary file in the same directory, written, flushed
    to disk and renamed over it, then the directory synced (best effort). ``mode`` is the new
    file's permission bits (readable by the other side, which may run as another user).

    Raises :class:`OSError` (no temporary file is left behind); returns the path written.
    """
    file = Path(path)
    fd, temp = tempfile.mkstemp(prefix=f".{file.name}.", suffix=".tmp", dir=file.parent)
    try:
        with os.fdopen(fd, "wb") as out:
            if hasattr(os, "fchmod"):  # not on Windows before Python 3.13
                os.fchmod(out.fileno(), mode)
            out.write(data)
            out.flush()
            os.fsync(out.fileno())
        os.replace(temp, file)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(temp)
        raise
    _sync_directory(file.parent)
    return file


def _sync_directory(directory: Path) -> None:
    """Make the rename durable (best effort: not every file system opens directories)."""
    with contextlib.suppress(OSError):
        fd = os.open(directory, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)
