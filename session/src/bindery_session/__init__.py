"""For code running in a Bindery agent session, in any agent runtime (only pydantic needed).

* :func:`load_bindings`: the bindings document the controller delivers, as typed objects
  (:class:`Bindings`), with its :attr:`~Bindings.digest` (its identity) and the ``work`` hold's
  :attr:`~Bindings.fence` (a :class:`Fence`: the token to hand to tools that can refuse a stale
  holder).
* :class:`BindingsWatcher`: notices a new document within milliseconds (a directory watch where
  the platform has one, polling elsewhere), so an agent picks up new bindings without a restart:
  blocking iterator, callback, or asyncio; ``acknowledge=True`` acknowledges for the runtime.
* :func:`announce`, :func:`acknowledge`, :func:`refuse`: tell the controller this runtime
  acknowledges documents, that it applied one, or that it refuses one (the file at
  :func:`ack_path`, which the session pod's delivery sidecar reports).
* Errors: :class:`SessionError`, branched into :class:`BindingsError` and
  :class:`AcknowledgeError`.

:mod:`bindery_session.wire` holds the shapes shared with the controller,
:mod:`bindery_session.testing` a fake bindings source for a runtime's tests. Resolving a deferred
``parameter`` slot needs the Kubernetes client: the ``bindery resolve`` command of the controller's
distribution does it. See docs/session.md.
"""

from bindery_session._acknowledge import ack_path, acknowledge, announce, refuse
from bindery_session._document import bindings_path, load_bindings, parse_bindings
from bindery_session._errors import AcknowledgeError, BindingsError, SessionError
from bindery_session._watch import BindingsWatcher
from bindery_session.wire import (
    APPLIED,
    DEFAULT_ACK_FILE,
    DEFAULT_BINDINGS_FILE,
    REFUSED,
    STARTED,
    Access,
    AckRecord,
    AgentRef,
    BindingMode,
    Bindings,
    BindingState,
    DeliveredBinding,
    DeliveredResource,
    DeliveredSlot,
    DeliveredTool,
    Fence,
    digest,
)

__all__ = [
    "APPLIED",
    "DEFAULT_ACK_FILE",
    "DEFAULT_BINDINGS_FILE",
    "REFUSED",
    "STARTED",
    "Access",
    "AckRecord",
    "AcknowledgeError",
    "AgentRef",
    "BindingMode",
    "BindingState",
    "Bindings",
    "BindingsError",
    "BindingsWatcher",
    "DeliveredBinding",
    "DeliveredResource",
    "DeliveredSlot",
    "DeliveredTool",
    "Fence",
    "SessionError",
    "ack_path",
    "acknowledge",
    "announce",
    "bindings_path",
    "digest",
    "load_bindings",
    "parse_bindings",
    "refuse",
]
