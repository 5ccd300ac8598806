"""The read-only look-ups resolution makes of the registry (which answers them from its indexes)."""

from __future__ import annotations

from typing import Protocol

from controller.domain.grants import GrantUse, ResourceGrantObject, Target
from controller.domain.models import ResourceObject, ToolObject
from controller.domain.results import ToolValidation
from controller.domain.types import TypeGraph


class RegistryView(Protocol):
    """The look-ups resolution needs (the registry provides them, from its indexes)."""

    @property
    def types(self) -> TypeGraph: ...

    def resource(self, key: str) -> ResourceObject | None: ...

    def resource_by_uid(self, uid: str) -> ResourceObject | None: ...

    def resources_with_uri(self, namespace: str, uri: str) -> list[ResourceObject]: ...

    def tool(self, key: str) -> ToolObject | None: ...

    def validate_tool(self, tool_key: str) -> ToolValidation:
        """What :func:`~controller.domain.slots.checked_tool_slots` says of the Tool, possibly
        cached."""
        ...

    def selected_resources(self, agent_key: str) -> list[ResourceObject]: ...

    def grant_for(self, referrer: str, target: Target, use: GrantUse) -> ResourceGrantObject | None:
        """The ResourceGrant of ``target``'s namespace that lets namespace ``referrer`` bind it by
        ``use`` (see :func:`~controller.domain.grants.granting`), or None."""
        ...
