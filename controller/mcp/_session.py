"""The session library as the adapter uses it: every import of it is here, in one place.

The adapter is a runtime like any other: it reads the delivered document, watches it, and writes
the acknowledgement file through the session library, so the controller's delivery contract is
the same whether a runtime acknowledges by itself or through the adapter.
"""

from __future__ import annotations

from controller.session.acknowledge import AcknowledgeError, ack_path, acknowledge, refuse
from controller.session.document import (
    Bindings,
    BindingsError,
    DeliveredBinding,
    bindings_path,
    digest_of,
    parse_bindings,
)
from controller.session.resolver import (
    KubeReader,
    ResolveError,
    SessionResolver,
    resource_json,
    session_api_client,
)
from controller.session.watch import BindingsWatcher

__all__ = [
    "AcknowledgeError",
    "Bindings",
    "BindingsError",
    "BindingsWatcher",
    "DeliveredBinding",
    "KubeReader",
    "ResolveError",
    "SessionResolver",
    "ack_path",
    "acknowledge",
    "bindings_path",
    "digest_of",
    "parse_bindings",
    "refuse",
    "resource_json",
    "session_api_client",
]
