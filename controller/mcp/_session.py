"""The session library as the adapter uses it: every import of it is here, in one place.

The adapter is a runtime like any other: it reads the delivered document, watches it, and writes
the acknowledgement file through the session library, so the controller's delivery contract is
the same whether a runtime acknowledges by itself or through the adapter.
"""

from __future__ import annotations

from bindery_session import (
    AcknowledgeError,
    Bindings,
    BindingsError,
    BindingsWatcher,
    DeliveredBinding,
    ack_path,
    acknowledge,
    bindings_path,
    parse_bindings,
    refuse,
)
from bindery_session import digest as digest_of

from controller.session.resolver import (
    KubeReader,
    ResolveError,
    SessionResolver,
    resource_json,
    session_api_client,
)

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
