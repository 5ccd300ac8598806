"""Telling the controller what the runtime did with a bindings document.

The runtime writes one small JSON file (:class:`~bindery_session.wire.AckRecord`), which the
session pod's delivery sidecar reads and records for the controller::

    {"digest": "sha256:<hex>", "state": "Applied", "message": "", "at": "2026-12-01T06:30:00.1Z"}

* :func:`announce` (state ``Started``, no digest): this runtime acknowledges documents. Written
  before the runtime first reads the bindings file; from then on only ``Applied`` confirms a
  document, and a session that never acknowledges one is reported Stalled.
* :func:`acknowledge` (``Applied``): the runtime applied the document with that digest and
  stopped using anything it no longer carries (a ``work`` binding withdrawn from it).
* :func:`refuse` (``Refused``, with the reason as ``message``): it will not apply the document.

The file is at ``path``, else ``$BINDERY_ACK_FILE``, else
:data:`~bindery_session.wire.DEFAULT_ACK_FILE` (an emptyDir the session pod shares with the
sidecar). Each write replaces it whole (:func:`~bindery_session.files.write_atomically`), so the
sidecar never reads half a record.
"""

from __future__ import annotations

import os
from pathlib import Path

from bindery_session._errors import AcknowledgeError
from bindery_session.files import write_atomically
from bindery_session.wire import (
    ACK_ENV,
    ACK_MOUNT,
    APPLIED,
    DEFAULT_ACK_FILE,
    REFUSED,
    STARTED,
    AckRecord,
    AckState,
    Bindings,
    now_rfc3339,
)


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


def _write(file: Path, *, digest: str, state: AckState, message: str) -> Path:
    record = AckRecord(digest=digest, state=state, message=message, at=now_rfc3339())
    directory = file.parent
    outside = f"outside a session set {ACK_ENV} to a file in a directory that exists"
    if not directory.is_dir():
        raise AcknowledgeError(
            f"cannot write the acknowledgement file {file}: the directory {directory} does not "
            f"exist; the session pod mounts it at {ACK_MOUNT} (check that the pod has the "
            f"Bindery delivery sidecar); {outside}"
        )
    try:
        return write_atomically(file, record.line().encode("utf-8"))
    except OSError as exc:
        raise AcknowledgeError(
            f"cannot write the acknowledgement file {file}: {exc.strerror or exc}; the runtime's "
            f"user must be able to create files in {directory} and replace {file.name} there "
            f"(the session pod mounts it at {ACK_MOUNT}); {outside}"
        ) from exc
