"""A library for code running in an agent's session (any agent runtime; no kopf).

* :func:`load_bindings`: the bindings document the controller delivers, as typed objects, with
  its :attr:`~Bindings.digest` (its identity) and the ``work`` hold's :attr:`~Bindings.fence`
  (a :class:`Fence`: the fencing token to hand to tools that can refuse a stale holder).
* :class:`BindingsWatcher`: notices a new document (the kubelet's atomic ``..data`` swap) so an
  agent picks up new bindings without a restart: blocking iterator, callback, or asyncio.
* :func:`resolve`: a value for a deferred ``parameter`` slot, resolved at invocation with the
  session's own credentials and the controller's own rules and messages.

The ``bindery resolve`` command offers the last one to runtimes in any language. See
docs/session.md.
"""

from controller.session.document import (
    DEFAULT_BINDINGS_FILE,
    AgentRef,
    Bindings,
    BindingsError,
    DeliveredBinding,
    DeliveredSlot,
    DeliveredTool,
    Fence,
    bindings_path,
    load_bindings,
    parse_bindings,
)
from controller.session.resolver import (
    KubeReader,
    ResolveError,
    ResourceReader,
    SessionResolver,
    resolve,
    resource_json,
    session_api_client,
)
from controller.session.watch import BindingsWatcher

__all__ = [
    "DEFAULT_BINDINGS_FILE",
    "AgentRef",
    "Bindings",
    "BindingsError",
    "BindingsWatcher",
    "DeliveredBinding",
    "DeliveredSlot",
    "DeliveredTool",
    "Fence",
    "KubeReader",
    "ResolveError",
    "ResourceReader",
    "SessionResolver",
    "bindings_path",
    "load_bindings",
    "parse_bindings",
    "resolve",
    "resource_json",
    "session_api_client",
]
