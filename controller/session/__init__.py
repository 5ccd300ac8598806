"""A library for code running in an agent's session (any agent runtime; no kopf).

* :func:`load_bindings`: the bindings document the controller delivers, as typed objects, with
  its :attr:`~Bindings.digest` (its identity) and the ``work`` hold's :attr:`~Bindings.fence`
  (a :class:`Fence`: the fencing token to hand to tools that can refuse a stale holder).
* :class:`BindingsWatcher`: notices a new document (the delivery sidecar's rename, or the
  kubelet's atomic ``..data`` swap) so an agent picks up new bindings without a restart:
  blocking iterator, callback, or asyncio; ``acknowledge=True`` acknowledges for the runtime.
* :func:`announce`, :func:`acknowledge`, :func:`refuse`: tell the controller this runtime
  acknowledges documents, that it applied one, or that it refuses one (the file at
  :func:`ack_path`, which the delivery sidecar reports; :class:`AcknowledgeError` if it cannot).
* :func:`resolve`: a value for a deferred ``parameter`` slot, resolved at invocation with the
  session's own credentials and the controller's own rules and messages.

The ``bindery ack`` and ``bindery resolve`` commands offer acknowledging and resolving to
runtimes in any language. See docs/session.md.
"""

from controller.session.acknowledge import (
    DEFAULT_ACK_FILE,
    AcknowledgeError,
    ack_path,
    acknowledge,
    announce,
    refuse,
)
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
    "DEFAULT_ACK_FILE",
    "DEFAULT_BINDINGS_FILE",
    "AcknowledgeError",
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
    "ack_path",
    "acknowledge",
    "announce",
    "bindings_path",
    "load_bindings",
    "parse_bindings",
    "refuse",
    "resolve",
    "resource_json",
    "session_api_client",
]
