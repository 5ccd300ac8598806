"""Telling the controller what the runtime did with a bindings document.

The runtime writes one small JSON file, which the session pod's delivery sidecar reads and
records on the agent's acknowledgement Lease (see :mod:`controller.domain.acknowledgement`)::

    {"digest": "sha256:<hex>", "state": "Applied", "message": "", "at": "2026-12-01T06:30:00.1Z"}

* :func:`announce` (state ``Started``, no digest): this runtime acknowledges documents. Written
  before the runtime first reads the bindings file; from then on only ``Applied`` confirms a
  document, and a session that never acknowledges one is reported Stalled.
* :func:`acknowledge` (``Applied``): the runtime applied the document with that digest and
  stopped using anything it no longer carries (a ``work`` binding withdrawn from it).
* :func:`refuse` (``Refused``, with the reason as ``message``): it will not apply the document.

The file is at ``path``, else ``$BINDERY_ACK_FILE``, else :data:`DEFAULT_ACK_FILE` (an emptyDir
the session pod shares with the sidecar). Each write replaces it whole: a temporary file in the
same directory, flushed to disk, renamed over it, so the sidecar never reads half a record.
"""

from __future__ import annotations

import contextlib
import json
import os
import tempfile
from datetime import UTC, datetime
from pathlib import Path

from controller.domain.acknowledgement import (
    ACK_ENV,
    ACK_FILE,
    ACK_MOUNT,
    APPLIED,
    REFUSED,
    STARTED,
)
from controller.domain.errors import RunError
from controller.session.document import Bindings

DEFAULT_ACK_FILE = f"{ACK_MOUNT}/{ACK_FILE}"
"""Where the session pod mounts the acknowledgement directory (also in ``$BINDERY_ACK_FILE``)."""


class AcknowledgeError(RunError):
    """The acknowledgement cannot be written, or there is nothing to acknowledge."""


def ack_path(path: str | os.PathLike[str] | None = None) -> Path:
    """``path``, else ``$BINDERY_ACK_FILE``, else the path the session pod mounts."""
    return Path(path or os.environ.get(ACK_ENV) or DEFAULT_ACK_FILE)


def announce(path: str | os.PathLike[str] | None = None) -> Path:
    """Say that this runtime acknowledges documents (state ``Started``): call it once, before
    the first read of the bindings file. Returns the file written."""
    return _write(ack_path(path), digest="", state=STARTED, message="")


def acknowledge(bindings: Bindings, path: str | os.PathLike[str] | None = None) -> Path:
    """Say that the runtime applied ``bindings`` and stopped using anything it no longer carries
    (state ``Applied``). Returns the file written."""
    digest = _digest(bindings, "acknowledge")
    return _write(ack_path(path), digest=digest, state=APPLIED, message="")


def refuse(bindings: Bindings, reason: str, path: str | os.PathLike[str] | None = None) -> Path:
    """Say that the runtime refuses ``bindings``, and why (state ``Refused``; the controller
    shows ``reason`` in the agent's status). Returns the file written."""
    if not reason.strip():
        raise AcknowledgeError(
            "a refusal needs a reason: say what is wrong with the document, the controller shows "
            "it in the agent's status"
        )
    return _write(ack_path(path), digest=_digest(bindings, "refuse"), state=REFUSED, message=reason)


def _digest(bindings: Bindings, verb: str) -> str:
    if not bindings.digest:
        raise AcknowledgeError(
            f"cannot {verb} a Bindings object without a digest (it was not read from a bindings "
            "file): load it with load_bindings() or BindingsWatcher, which record the digest of "
            "the bytes they read"
        )
    return bindings.digest


def _now() -> str:
    return datetime.now(UTC).isoformat(timespec="microseconds").replace("+00:00", "Z")


def _record(digest: str, state: str, message: str, at: str) -> str:
    """The file's content for one acknowledgement."""
    return json.dumps({"digest": digest, "state": state, "message": message, "at": at}) + "\n"


def _write(file: Path, *, digest: str, state: str, message: str) -> Path:
    content = _record(digest, state, message, _now()).encode("utf-8")
    directory = file.parent
    outside = f"outside a session set {ACK_ENV} to a file in a directory that exists"
    if not directory.is_dir():
        raise AcknowledgeError(
            f"cannot write the acknowledgement file {file}: the directory {directory} does not "
            f"exist; the session pod mounts it at {ACK_MOUNT} (check that the pod has the "
            f"Bindery delivery sidecar); {outside}"
        )
    try:
        fd, temp = tempfile.mkstemp(prefix=f".{file.name}.", suffix=".tmp", dir=directory)
    except OSError as exc:
        raise AcknowledgeError(
            f"cannot write the acknowledgement file {file}: {exc.strerror or exc} creating a "
            f"file in {directory}; the runtime's user must be able to write there "
            f"(the session pod mounts it at {ACK_MOUNT}); {outside}"
        ) from exc
    try:
        with os.fdopen(fd, "wb") as out:
            out.write(content)
            out.flush()
            os.fsync(out.fileno())
        os.replace(temp, file)
    except OSError as exc:
        with contextlib.suppress(OSError):
            os.unlink(temp)
        raise AcknowledgeError(
            f"cannot write the acknowledgement file {file}: {exc.strerror or exc}; it must be a "
            f"regular file the runtime may replace (the session pod mounts its directory at "
            f"{ACK_MOUNT}); {outside}"
        ) from exc
    _sync_directory(directory)
    return file


def _sync_directory(directory: Path) -> None:
    """Make the rename durable (best effort: not every file system opens directories)."""
    with contextlib.suppress(OSError):
        fd = os.open(directory, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)
