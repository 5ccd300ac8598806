"""The bindings document a session receives, read into typed objects.

The controller writes the document (``controller/domain/delivery.py``) into the agent's bindings
ConfigMap, mounted in the session at :data:`DEFAULT_BINDINGS_FILE`. This module only reads it.
Unknown fields are ignored, so a session built against this version keeps reading documents from a
newer controller.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field, ValidationError
from pydantic.alias_generators import to_camel

from controller.domain.delivery import BINDINGS_FILE
from controller.domain.models import API_VERSION, WORK_ROLE, Access, BindingMode
from controller.domain.results import BindingState, BoundResource
from controller.k8s.builders import BINDINGS_ENV, BINDINGS_MOUNT

DEFAULT_BINDINGS_FILE = f"{BINDINGS_MOUNT}/{BINDINGS_FILE}"
"""Where the session builder mounts the bindings file (also in ``$BINDERY_BINDINGS_FILE``)."""


class BindingsError(Exception):
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


class DeliveredBinding(_Document):
    """One of the agent's direct bindings (``spec.resources``), as resolved."""

    name: str
    tag: str
    uri: str
    state: BindingState
    resource: BoundResource | None = None


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

    def tool(self, name: str) -> DeliveredTool | None:
        return next((t for t in self.tools if t.name == name), None)

    def binding(self, name: str) -> DeliveredBinding | None:
        return next((r for r in self.resources if r.name == name), None)

    @property
    def work(self) -> DeliveredBinding | None:
        """The agent's work binding: present only while the agent holds its work URI."""
        return self.binding(WORK_ROLE)


def parse_bindings(text: str, source: str = "the bindings document") -> Bindings:
    """Read a bindings document from its JSON text; ``source`` names it in errors."""
    try:
        data = json.loads(text)
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
        return Bindings.model_validate(data)
    except ValidationError as exc:
        raise BindingsError(
            f"{source} is not a valid bindings document: {exc.errors()[0]['msg']} at "
            f"{'.'.join(str(p) for p in exc.errors()[0]['loc'])}; use a library version "
            "matching the controller"
        ) from exc


def bindings_path(path: str | os.PathLike[str] | None = None) -> Path:
    """``path``, else ``$BINDERY_BINDINGS_FILE``, else the mount path the controller uses."""
    return Path(path or os.environ.get(BINDINGS_ENV) or DEFAULT_BINDINGS_FILE)


def load_bindings(path: str | os.PathLike[str] | None = None) -> Bindings:
    """Read the delivered bindings document (see :func:`bindings_path` for where)."""
    file = bindings_path(path)
    try:
        text = file.read_text(encoding="utf-8")
    except OSError as exc:
        raise BindingsError(
            f"cannot read the bindings file {file}: {exc.strerror or exc}; set "
            f"{BINDINGS_ENV} (or --bindings) to the mounted file, which the controller mounts "
            f"at {DEFAULT_BINDINGS_FILE}"
        ) from exc
    return parse_bindings(text, f"the bindings file {file}")
