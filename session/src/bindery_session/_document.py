"""Reading the bindings document the session receives.

The controller renders the document (:class:`~bindery_session.wire.Bindings`) into the agent's
bindings ConfigMap; in the session it is at :data:`~bindery_session.wire.DEFAULT_BINDINGS_FILE`
(or ``$BINDERY_BINDINGS_FILE``). A document read here records the digest of the bytes it was
read from (:attr:`Bindings.digest`): what a runtime acknowledges.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

from pydantic import ValidationError

from bindery_session._errors import BindingsError
from bindery_session.wire import (
    API_VERSION,
    BINDINGS_ENV,
    DEFAULT_BINDINGS_FILE,
    KIND,
    Bindings,
    digest,
)


def parse_bindings(text: str | bytes, source: str = "the bindings document") -> Bindings:
    """Read a bindings document from its JSON text or bytes; ``source`` names it in errors.

    The result's :attr:`~Bindings.digest` is that of ``text`` (of its UTF-8 encoding for a
    ``str``): pass the file's bytes to be sure it is the digest of the file.
    """
    raw = text if isinstance(text, bytes) else text.encode("utf-8")
    try:
        data = json.loads(raw.decode("utf-8"))
    except UnicodeDecodeError as exc:
        raise BindingsError(
            f"{source} is not UTF-8 text ({exc}); it is written by the Bindery controller into "
            "the agent's bindings ConfigMap: check the file path"
        ) from exc
    except ValueError as exc:
        raise BindingsError(
            f"{source} is not JSON ({exc}); it is written by the Bindery controller into the "
            "agent's bindings ConfigMap: check the file path and that the ConfigMap is mounted"
        ) from exc
    if not isinstance(data, dict) or data.get("kind") != KIND:
        raise BindingsError(
            f"{source} is not a Bindery bindings document (expected a JSON object with kind "
            f"{KIND!r}): check the file path"
        )
    if data.get("apiVersion") != API_VERSION:
        raise BindingsError(
            f"{source} has apiVersion {data.get('apiVersion')!r}, this library reads "
            f"{API_VERSION!r}: use a library version matching the controller"
        )
    try:
        document = Bindings.model_validate(data)
    except ValidationError as exc:
        first = exc.errors()[0]
        raise BindingsError(
            f"{source} is not a valid bindings document: {first['msg']} at "
            f"{'.'.join(str(p) for p in first['loc'])}; use a library version "
            "matching the controller"
        ) from exc
    document._digest = digest(raw)
    return document


def bindings_path(path: str | os.PathLike[str] | None = None) -> Path:
    """``path``, else ``$BINDERY_BINDINGS_FILE``, else the mount path the controller uses."""
    return Path(path or os.environ.get(BINDINGS_ENV) or DEFAULT_BINDINGS_FILE)


def load_bindings(path: str | os.PathLike[str] | None = None) -> Bindings:
    """Read the delivered bindings document (see :func:`bindings_path` for where); its
    :attr:`~Bindings.digest` is that of the file's bytes."""
    file = bindings_path(path)
    try:
        raw = file.read_bytes()
    except OSError as exc:
        raise BindingsError(
            f"cannot read the bindings file {file}: {exc.strerror or exc}; set "
            f"{BINDINGS_ENV} (or --bindings) to the mounted file, which the controller mounts "
            f"at {DEFAULT_BINDINGS_FILE}"
        ) from exc
    return parse_bindings(raw, f"the bindings file {file}")
