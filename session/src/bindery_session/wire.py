"""The shapes that cross between the Bindery controller and a session, defined once for both.

* :class:`Bindings`: the bindings document. The controller builds one from an agent's resolution
  and delivers :meth:`Bindings.render` (canonical JSON) in the agent's bindings ConfigMap; the
  session's delivery sidecar puts those bytes at :data:`DEFAULT_BINDINGS_FILE`; the session reads
  them back into the same model. A document is identified by its :func:`digest`.
* :class:`AckRecord`: the acknowledgement file the runtime writes at :data:`DEFAULT_ACK_FILE` and
  the sidecar reads (``{"digest", "state", "message", "at"}``).
* The paths and environment variables both sides agree on, and :func:`now_rfc3339` for the
  times written in them.

Reading is tolerant: fields this version does not know are ignored, so a session built against
it keeps reading documents from a newer controller.
"""

from __future__ import annotations

import hashlib
import json
import math
from collections.abc import Mapping
from datetime import datetime, timezone
from enum import Enum
from json.encoder import encode_basestring as _escape
from typing import Any, Final, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    PrivateAttr,
    SerializerFunctionWrapHandler,
    ValidationError,
    model_serializer,
)
from pydantic.alias_generators import to_camel

API_VERSION = "bindery.dev/v1alpha1"
"""The API version a document carries; this library reads only documents of this version."""
KIND = "Bindings"
WORK_ROLE = "work"
"""The binding name whose URI is held by at most one agent at a time."""

BINDINGS_MOUNT = "/var/run/bindery"
"""Where the session pod mounts the directory holding the bindings document."""
BINDINGS_FILE = "bindings.json"
"""The document's file name (and its key in the agent's bindings ConfigMap)."""
BINDINGS_ENV = "BINDERY_BINDINGS_FILE"
"""The environment variable that holds the bindings file's path in the runtime."""
DEFAULT_BINDINGS_FILE = f"{BINDINGS_MOUNT}/{BINDINGS_FILE}"
"""Where the session reads the bindings file (also in ``$BINDERY_BINDINGS_FILE``)."""

ACK_MOUNT = "/var/run/bindery-ack"
"""Where the runtime writes its acknowledgement file (an emptyDir shared with the sidecar)."""
ACK_FILE = "ack.json"
ACK_ENV = "BINDERY_ACK_FILE"
"""The environment variable that holds the acknowledgement file's path in the runtime."""
DEFAULT_ACK_FILE = f"{ACK_MOUNT}/{ACK_FILE}"
"""Where the session pod mounts the acknowledgement directory (also in ``$BINDERY_ACK_FILE``)."""

STARTED: Final = "Started"
"""The runtime acknowledges documents (it says so before it first reads one)."""
APPLIED: Final = "Applied"
"""The runtime applied the document and stopped using anything it no longer carries."""
REFUSED: Final = "Refused"
"""The runtime refused the document (the acknowledgement's ``message`` says why)."""
AckState = Literal["Started", "Applied", "Refused"]


def digest(data: str | bytes) -> str:
    """A document's identity: ``sha256:<hex>`` of its exact bytes (of the UTF-8 encoding of a
    ``str``). What the controller records, the sidecar reports and a runtime acknowledges."""
    raw = data.encode("utf-8") if isinstance(data, str) else data
    return "sha256:" + hashlib.sha256(raw).hexdigest()


def render(document: Mapping[str, Any]) -> str:
    """Canonical JSON text for a document: sorted keys, two-space indent, UTF-8 kept, one final
    newline. Equal documents render to equal bytes, across passes and processes.

    The bytes are exactly ``json.dumps(document, indent=2, sort_keys=True, ensure_ascii=False)``
    plus the newline. The standard library writes an indented text through its pure-Python
    encoder, a generator per nesting level, and a controller renders every agent's document on
    every pass (each agent once at start-up): the same text is written here directly, strings
    through the standard library's own (C) escaping, about four times faster. A value outside
    JSON's shapes is left to ``json.dumps``, which raises as it would.
    """
    parts: list[str] = []
    try:
        _write(document, "\n", parts)
    except _NotPlainJsonError:
        return json.dumps(document, indent=2, sort_keys=True, ensure_ascii=False) + "\n"
    parts.append("\n")
    return "".join(parts)


class _NotPlainJsonError(Exception):
    """A value :func:`_write` leaves to ``json.dumps`` (a non-string key, a non-JSON type)."""


_CONSTANTS: Final = {None: "null", True: "true", False: "false"}


def _write(value: Any, newline: str, parts: list[str]) -> None:
    """Append ``value`` as ``json.dumps(indent=2, sort_keys=True, ensure_ascii=False)`` writes
    it, at the indentation ``newline`` ends with."""
    if isinstance(value, str):
        parts.append(_escape(value))
    elif isinstance(value, dict):
        if not value:
            parts.append("{}")
            return
        inner = newline + "  "
        separator = "{" + inner
        for key in sorted(value):
            if not isinstance(key, str):
                raise _NotPlainJsonError
            parts.append(separator)
            parts.append(_escape(key))
            parts.append(": ")
            _write(value[key], inner, parts)
            separator = "," + inner
        parts.append(newline + "}")
    elif isinstance(value, (list, tuple)):
        if not value:
            parts.append("[]")
            return
        inner = newline + "  "
        separator = "[" + inner
        for item in value:
            parts.append(separator)
            _write(item, inner, parts)
            separator = "," + inner
        parts.append(newline + "]")
    else:
        parts.append(_scalar(value))


def _scalar(value: Any) -> str:
    """A JSON scalar as ``json.dumps`` writes it (``int.__repr__``/``float.__repr__`` for
    subclasses too, NaN and the infinities by name)."""
    if value is None or value is True or value is False:
        return _CONSTANTS[value]
    if isinstance(value, int):
        return int.__repr__(value)
    if isinstance(value, float):
        if math.isnan(value):
            return "NaN"
        if math.isinf(value):
            return "Infinity" if value > 0 else "-Infinity"
        return float.__repr__(value)
    raise _NotPlainJsonError


def rfc3339(moment: datetime) -> str:
    """``moment`` in UTC as RFC 3339 with microseconds (the API's MicroTime form)."""
    return moment.astimezone(timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def now_rfc3339() -> str:
    """Now, as :func:`rfc3339` writes it."""
    return rfc3339(datetime.now(timezone.utc))


class _Value(str, Enum):
    """A string enumeration that prints and formats as its value (``enum.StrEnum`` is 3.11+)."""

    def __str__(self) -> str:
        return str(self.value)

    def __format__(self, spec: str) -> str:
        return format(str(self.value), spec)


class BindingState(_Value):
    BOUND = "Bound"
    DEFERRED = "Deferred"
    """A ``parameter`` slot whose value the caller supplies when it calls the tool."""
    UNBOUND = "Unbound"
    ERROR = "Error"


class BindingMode(_Value):
    CONTEXTUAL = "contextual"
    STATIC = "static"
    PARAMETER = "parameter"
    DIRECT = "direct"
    """Not a slot mode: an agent's own URI-identified bindings (``resources``)."""


class Access(_Value):
    READ_ONLY = "read_only"
    READ_WRITE = "read_write"
    WRITE_ONLY = "write_only"


class _Wire(BaseModel):
    model_config = ConfigDict(
        frozen=True, extra="ignore", alias_generator=to_camel, populate_by_name=True
    )


class AgentRef(_Wire):
    namespace: str
    name: str

    @property
    def key(self) -> str:
        return f"{self.namespace}/{self.name}"


class Fence(_Wire):
    """The fencing token of a ``work`` hold: the hold Lease's identity.

    A new hold on the same URI is a new Lease (another uid), so a tool that records the token it
    last saw for a URI can refuse a caller presenting an older one: a stale holder.
    """

    uid: str
    """The hold Lease's ``metadata.uid``."""
    resource_version: str
    """The hold Lease's ``metadata.resourceVersion`` when it was created."""


class DeliveredResource(_Wire):
    """The concrete resource a binding or slot resolved to. ``name``/``namespace``/``uid`` are
    empty for a resource that exists only as an agent's direct binding (no registered Resource
    has its URI). Empty fields are left out of the document."""

    uri: str
    type: str
    alias: str = ""
    name: str = ""
    namespace: str = ""
    uid: str = ""
    attributes: dict[str, str] = Field(default_factory=dict)
    """The registered Resource's free-form attributes."""
    grant: str = ""
    """For a Resource of another namespace, the ResourceGrant (``namespace/name``) that lets it
    be bound."""

    @model_serializer(mode="wrap")
    def _without_empty(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
        dumped: dict[str, Any] = handler(self)
        return {k: v for k, v in dumped.items() if v or k in ("uri", "type")}


class DeliveredBinding(_Wire):
    """One of the agent's direct bindings (``spec.resources``), as resolved."""

    name: str
    tag: str
    uri: str
    state: BindingState
    resource: DeliveredResource | None = None
    hold: Fence | None = None
    """The fencing token, on the ``work`` binding only and only while it is held."""


class DeliveredSlot(_Wire):
    """One tool slot, as resolved. A ``parameter`` slot in state ``Deferred`` is resolved at
    invocation (``bindery resolve``)."""

    name: str
    mode: BindingMode
    access: Access
    resource_type: str
    state: BindingState
    resource: DeliveredResource | None = None

    @property
    def deferred(self) -> bool:
        return self.state is BindingState.DEFERRED


class DeliveredTool(_Wire):
    name: str
    slots: list[DeliveredSlot] = Field(default_factory=list)

    def slot(self, name: str) -> DeliveredSlot | None:
        return next((s for s in self.slots if s.name == name), None)


class Bindings(_Wire):
    """The bindings document: who the agent is, its direct bindings, its tools' slots.

    It carries no timestamps or generations; its ``nonce`` is new with each document the
    controller writes, so no two writes share a digest, even when their bindings are equal.
    """

    api_version: str = API_VERSION
    kind: str = KIND
    agent: AgentRef
    resources: list[DeliveredBinding] = Field(default_factory=list)
    tools: list[DeliveredTool] = Field(default_factory=list)
    nonce: str | None = None
    """Unique to this write of the document (absent from a controller before it): a runtime
    that acknowledges by digest confirms this write, never an earlier one with equal bindings
    (a ``work`` binding given and withdrawn again while the runtime was still applying)."""
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

    @property
    def work_uris(self) -> set[str]:
        """The URIs delivered under the ``work`` role."""
        return {r.uri for r in self.resources if r.name == WORK_ROLE}

    def without_work(self) -> Bindings:
        """This document with its ``work`` URIs withdrawn under every role and from every slot
        (what the session must stop using before the hold goes)."""
        uris = self.work_uris
        if not uris:
            return self

        def mentions(entry: DeliveredBinding) -> bool:
            return entry.uri in uris or (entry.resource is not None and entry.resource.uri in uris)

        tools = [
            tool.model_copy(
                update={
                    "slots": [
                        s.model_copy(update={"resource": None})
                        if s.resource is not None and s.resource.uri in uris
                        else s
                        for s in tool.slots
                    ]
                }
            )
            for tool in self.tools
        ]
        return self.model_copy(
            update={"resources": [r for r in self.resources if not mentions(r)], "tools": tools}
        )

    def document(self) -> dict[str, Any]:
        """The document as JSON values, as the controller delivers it."""
        return self.model_dump(mode="json", by_alias=True, exclude_none=True)

    def render(self) -> str:
        """The document's canonical bytes (see :func:`render`): what the controller delivers."""
        return render(self.document())

    @classmethod
    def tolerant(cls, text: str | bytes) -> Bindings | None:
        """A document read from text that may be anything (a ConfigMap edited by hand): None
        when it is not a bindings document."""
        try:
            return cls.model_validate_json(text)
        except ValidationError:
            return None


class AckRecord(BaseModel):
    """The acknowledgement file: what the runtime did with the document of ``digest``.

    One JSON object on one line, replaced whole by each write::

        {"digest": "sha256:<hex>", "state": "Applied", "message": "", "at": "<RFC 3339>"}

    ``Started`` carries no digest (the runtime says it acknowledges documents); ``Refused``
    carries the reason in ``message``.
    """

    model_config = ConfigDict(frozen=True, extra="ignore")

    digest: str
    state: AckState
    message: str = ""
    at: str = ""

    def line(self) -> str:
        """The file's content."""
        return json.dumps(self.model_dump()) + "\n"

    @classmethod
    def read(cls, raw: str | bytes) -> AckRecord | None:
        """The record in a file's content; None while it is not one (a state this version does
        not know, a file being written by a runtime that does not replace it whole)."""
        try:
            return cls.model_validate_json(raw)
        except ValidationError:
            return None
