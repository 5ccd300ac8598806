"""The bindings document a session receives, read into typed objects.

The controller writes the document (``controller/domain/delivery.py``) into the agent's bindings
ConfigMap, mounted in the session at :data:`DEFAULT_BINDINGS_FILE`. This module only reads it.
Unknown fields are ignored, so a session built against this version keeps reading documents from a
newer controller.

A document is identified by its digest (``sha256:`` and the hex sha256 of the file's exact bytes):
:func:`load_bindings`, :func:`parse_bindings` and the watcher record it on :attr:`Bindings.digest`,
which is what a runtime acknowledges (:mod:`controller.session.acknowledge`).
"""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field, PrivateAttr, ValidationError
from pydantic.alias_generators import to_camel

from controller.domain.delivery import BINDINGS_FILE
from controller.domain.errors import InvalidInputError
from controller.domain.models import API_VERSION, WORK_ROLE, Access, BindingMode
from controller.domain.results import BindingState, BoundResource
from controller.k8s.builders import BINDINGS_ENV, BINDINGS_MOUNT

DEFAULT_BINDINGS_FILE = f"{BINDINGS_MOUNT}/{BINDINGS_FILE}"
"""Where the session reads the bindings file (also in ``$BINDERY_BINDINGS_FILE``)."""


class BindingsError(InvalidInputError):
    """The bindings document cannot be read or is not a bindings document."""


class _Document(BaseModel):
    model_config = ConfigDict(
        frozen=True, extra="ignore", alias_generator=to_camel, populate_by_name=True
    )


class AgentRef(_Document):
    namespace: str
    name: str

    @property
    def key(self) -> str:
        return f"{self.namespace}/{self.name}"


class Fence(_Document):
    """The fencing token of a ``work`` hold: the hold Lease's identity.

    A new hold on the same URI is a new Lease (another uid), so a tool that records the token it
    last saw for a URI can refuse a caller presenting an older one: a stale holder.
    """

    uid: str
    """The hold Lease's ``metadata.uid``."""
    resource_version: str
    """The hold Lease's ``metadata.resourceVersion`` when it was created."""


class DeliveredBinding(_Document):
    """One of the agent's direct bindings (``spec.resources``), as resolved."""

    name: str
    tag: str
    uri: str
    state: BindingState
    resource: BoundResource | None = None
    hold: Fence | None = None
    """The fencing token, on the ``work`` binding only and only while it is held."""


class DeliveredSlot(_Document):
    """One tool slot, as resolved. A ``parameter`` slot in state ``Deferred`` is resolved at
    invocation (see :mod:`controller.session.resolver`)."""

    name: str
    mode: BindingMode
    access: Access
    resource_type: str
    state: BindingState
    resource: BoundResource | None = None

    @property
    def deferred(self) -> bool:
        return self.state is BindingState.DEFERRED


class DeliveredTool(_Document):
    name: str
    slots: list[DeliveredSlot] = Field(default_factory=list)

    def slot(self, name: str) -> DeliveredSlot | None:
        return next((s for s in self.slots if s.name == name), None)


class Bindings(_Document):
    """The whole document: who the agent is, its direct bindings, its tools' slots."""

    api_version: str
    kind: str
    agent: AgentRef
    resources: list[DeliveredBinding] = Field(default_factory=list)
    tools: list[DeliveredTool] = Field(default_factory=list)
    _digest: str = PrivateAttr(default="")

    @property
    def digest(self) -> str:
        """``sha256:<hex>`` of the bytes this document was read from: what a runtime
        acknowledges. Empty when it was built some other way (``model_validate``, by hand)."""
        return self._digest

    def tool(self, name: str) -> DeliveredTool | None:
        return next((t for t in self.tools if t.name == name), None)

    def binding(self, name: str) -> DeliveredBinding | None:
        return next((r for r in self.resources if r.name == name), None)

    @property
    def work(self) -> DeliveredBinding | None:
        """The agent's work binding: present only while the agent holds its work URI."""
        return self.binding(WORK_ROLE)

    @property
    def fence(self) -> Fence | None:
        """The fencing token of the ``work`` hold (None while no work is held, or from a
        controller that does not send one): pass it to tools that can refuse a stale holder."""
        work = self.work
        return work.hold if work is not None else None


def digest_of(raw: bytes) -> str:
    """A document's identity: ``sha256:<hex>`` of its exact bytes (as
    :func:`controller.domain.acknowledgement.digest` computes it from the rendered text)."""
    return "sha256:" + hashlib.sha256(raw).hexdigest()


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
    if not isinstance(data, dict) or data.get("kind") != "Bindings":
        raise BindingsError(
            f"{source} is not a Bindery bindings document (expected a JSON object with kind "
            "'Bindings'): check the file path"
        )
    if data.get("apiVersion") != API_VERSION:
        raise BindingsError(
            f"{source} has apiVersion {data.get('apiVersion')!r}, this library reads "
            f"{API_VERSION!r}: use a library version matching the controller"
        )
    try:
        document = Bindings.model_validate(data)
    except ValidationError as exc:
        raise BindingsError(
            f"{source} is not a valid bindings document: {exc.errors()[0]['msg']} at "
            f"{'.'.join(str(p) for p in exc.errors()[0]['loc'])}; use a library version "
            "matching the controller"
        ) from exc
    document._digest = digest_of(raw)
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
