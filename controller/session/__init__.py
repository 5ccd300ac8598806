"""The session side that needs the controller: resolving a deferred ``parameter`` slot at
invocation (``bindery resolve``), with the session's own credentials and the controller's own
rules and messages (the Kubernetes client and the registry).

Everything else a runtime uses (reading the bindings document, watching it, acknowledging) is
the session library, :mod:`bindery_session`, a distribution of its own that needs neither kopf
nor the Kubernetes client. See docs/session.md.
"""

from controller.session.resolver import (
    KubeReader,
    ResolveError,
    ResourceReader,
    SessionResolver,
    resolve,
    resource_json,
    session_api_client,
)

__all__ = [
    "KubeReader",
    "ResolveError",
    "ResourceReader",
    "SessionResolver",
    "resolve",
    "resource_json",
    "session_api_client",
]
