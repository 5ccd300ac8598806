"""An MCP server in the session pod: a runtime's bindings over the Model Context Protocol.

Opt-in (``spec.runtime.mcp``) and installed with the ``bindery[mcp]`` extra (the official ``mcp``
SDK). A native sidecar runs ``python -m controller.mcp serve`` on the pod's loopback and the
runtime finds it in ``$BINDERY_MCP_URL``. It serves, over Streamable HTTP, in both protocol
generations (2025-11-25 and 2026-07-28):

* resources: ``bindery://bindings`` (the delivered document, byte for byte: its sha256 is the
  digest) and one resource per bound URI, notified within a second of a new document;
* tools: ``bindery_bindings``, ``bindery_acknowledge``, ``bindery_refuse`` and, where the pod's
  credentials allow, ``bindery_resolve``.

It reads the delivered file and writes the acknowledgement file through the session library,
so the controller's delivery contract is unchanged. See docs/session.md.

* :class:`BindingsAdapter` (:mod:`controller.mcp.adapter`): the server over one document;
* :mod:`controller.mcp.content`: what it serves, computed from a document;
* :mod:`controller.mcp.access`: loopback only, never under ``hostNetwork``, resolving if allowed;
* :mod:`controller.mcp.http`: Streamable HTTP; :mod:`controller.mcp.cli`: the command line.
"""

from controller.mcp.adapter import BinderyServer, BindingsAdapter
from controller.mcp.content import BINDINGS_URI, META, Snapshot

__all__ = ["BINDINGS_URI", "META", "BinderyServer", "BindingsAdapter", "Snapshot"]
