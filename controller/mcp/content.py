"""What the adapter serves, computed from one delivered document (no I/O, no server).

* :class:`Snapshot`: one document as delivered: its exact text, its digest and its parsed form.
* :func:`resources`: the MCP resources of a snapshot: ``bindery://bindings`` (the whole document)
  and one resource per bound URI (its URI byte for byte).
* :func:`read`: the contents of one of them.
* :data:`TOOLS`: the tools the adapter offers, and :func:`tool_list` the ones it lists.

Every ``_meta`` key the adapter writes has the reverse-DNS prefix :data:`META`.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

import mcp_types as types

from controller.domain.models import WORK_ROLE
from controller.mcp._session import Bindings, parse_bindings

BINDINGS_URI = "bindery://bindings"
"""The resource holding the whole document, byte for byte."""
META = "dev.bindery/"
"""The prefix of every ``_meta`` key the adapter writes."""
JSON = "application/json"

BINDINGS_TOOL = "bindery_bindings"
ACKNOWLEDGE_TOOL = "bindery_acknowledge"
REFUSE_TOOL = "bindery_refuse"
RESOLVE_TOOL = "bindery_resolve"

INSTRUCTIONS = """\
This server gives you your Bindery bindings: the resources and tools your platform bound you to \
(among them, in the role "work", the one item you are to work on, while you hold it).

- At the start of every task, and again after every notification from this server (a resource \
or tool list changed, a resource updated), read your bindings: call bindery_bindings (or read \
bindery://bindings). They can change while you work: a binding can be withdrawn from you and \
given to another agent.
- When you have applied a document (you use what it binds and stopped using whatever it no \
longer carries, above all a withdrawn "work" item), call bindery_acknowledge with its digest. \
Reading the bindings is not acknowledging them: the platform waits for your acknowledgement \
before it hands what you gave up to another agent.
- If you cannot apply a document, call bindery_refuse with its digest and the reason.
- A tool slot in state Deferred takes its resource when you call the tool: resolve the value \
with bindery_resolve (when listed) before you use it.
"""


@dataclass(frozen=True)
class Snapshot:
    """One delivered document: the exact text, so the sha256 of ``text`` is ``digest``."""

    text: str
    bindings: Bindings

    @property
    def digest(self) -> str:
        return self.bindings.digest

    @classmethod
    def of(cls, raw: bytes, source: str = "the bindings document") -> Snapshot:
        """Parse ``raw`` (raises ``BindingsError``); the digest is that of ``raw``."""
        bindings = parse_bindings(raw, source)
        return cls(raw.decode("utf-8"), bindings)

    @property
    def fence(self) -> dict[str, str] | None:
        fence = self.bindings.fence
        return None if fence is None else fence.model_dump(mode="json", by_alias=True)

    def entries(self) -> dict[str, list[dict[str, Any]]]:
        """The document's direct bindings as delivered (every field, known or not), grouped by
        URI in document order."""
        data = json.loads(self.text)
        grouped: dict[str, list[dict[str, Any]]] = {}
        for entry in data.get("resources") or []:
            if isinstance(entry, dict) and isinstance(entry.get("uri"), str):
                grouped.setdefault(entry["uri"], []).append(entry)
        return grouped


def _document_meta(snapshot: Snapshot) -> dict[str, Any]:
    meta: dict[str, Any] = {
        f"{META}digest": snapshot.digest,
        f"{META}agent": snapshot.bindings.agent.key,
    }
    if (fence := snapshot.fence) is not None:
        meta[f"{META}fence"] = fence
    return meta


def _primary(entries: list[dict[str, Any]]) -> dict[str, Any]:
    """The entry that describes a URI bound in several roles: ``work`` first, else the first."""
    return next((e for e in entries if e.get("name") == WORK_ROLE), entries[0])


def _binding_meta(snapshot: Snapshot, entries: list[dict[str, Any]]) -> dict[str, Any]:
    primary = _primary(entries)
    resource = primary.get("resource") or {}
    return {
        f"{META}roles": [str(e.get("name", "")) for e in entries],
        f"{META}tag": primary.get("tag", ""),
        f"{META}type": resource.get("type", ""),
        f"{META}alias": resource.get("alias", ""),
        f"{META}state": primary.get("state", ""),
    } | _document_meta(snapshot)


def _binding_resource(
    snapshot: Snapshot, uri: str, entries: list[dict[str, Any]]
) -> types.Resource:
    roles = [str(e.get("name", "")) for e in entries]
    primary = _primary(entries)
    resource = primary.get("resource") or {}
    title = resource.get("alias") or resource.get("name") or None
    return types.Resource(
        uri=uri,
        name=",".join(roles),
        title=title,
        description=(
            f"Bound to you in the role{'s' if len(roles) > 1 else ''} {', '.join(roles)} "
            f"(tag {primary.get('tag', '')}, state {primary.get('state', '')}): the binding as "
            "delivered, in JSON."
        ),
        mime_type=JSON,
        annotations=types.Annotations(
            audience=["assistant"], priority=1.0 if WORK_ROLE in roles else 0.5
        ),
        meta=_binding_meta(snapshot, entries),
    )


def bindings_resource(snapshot: Snapshot | None) -> types.Resource:
    return types.Resource(
        uri=BINDINGS_URI,
        name="bindings",
        title="Bindery bindings",
        description=(
            "Your whole bindings document, byte for byte as delivered (its sha256 is the digest "
            "to acknowledge). Read it at the start of a task and after every notification."
        ),
        mime_type=JSON,
        annotations=types.Annotations(audience=["assistant"], priority=1.0),
        meta=None if snapshot is None else _document_meta(snapshot),
    )


def resources(snapshot: Snapshot | None) -> list[types.Resource]:
    """``bindery://bindings``, then one resource per bound URI in document order."""
    out = [bindings_resource(snapshot)]
    if snapshot is not None:
        out += [_binding_resource(snapshot, u, e) for u, e in snapshot.entries().items()]
    return out


def binding_text(entries: list[dict[str, Any]]) -> str:
    """A bound URI's contents: its binding as delivered (a JSON array when it is bound in more
    than one role)."""
    value: Any = entries[0] if len(entries) == 1 else entries
    return json.dumps(value, indent=2, sort_keys=True, ensure_ascii=False) + "\n"


def read(snapshot: Snapshot | None, uri: str) -> types.TextResourceContents | None:
    """The contents of ``uri``; None when the snapshot serves no such resource."""
    if uri == BINDINGS_URI:
        if snapshot is None:
            return None
        return types.TextResourceContents(
            uri=uri, mime_type=JSON, text=snapshot.text, meta=_document_meta(snapshot)
        )
    if snapshot is None:
        return None
    entries = snapshot.entries().get(uri)
    if entries is None:
        return None
    return types.TextResourceContents(
        uri=uri, mime_type=JSON, text=binding_text(entries), meta=_binding_meta(snapshot, entries)
    )


def changed_uris(old: Snapshot | None, new: Snapshot) -> list[str]:
    """The resources whose contents differ between two snapshots (``bindery://bindings``
    whenever the digest moved; a bound URI when its delivered binding changed, appeared or
    went away)."""
    if old is not None and old.digest == new.digest:
        return []
    before = old.entries() if old is not None else {}
    after = new.entries()
    changed = [BINDINGS_URI]
    for uri in [*after, *(u for u in before if u not in after)]:
        if before.get(uri) != after.get(uri):
            changed.append(uri)
    return changed


def _schema(**properties: str) -> dict[str, Any]:
    return {
        "type": "object",
        "properties": {n: {"type": "string", "description": d} for n, d in properties.items()},
        "required": list(properties),
        "additionalProperties": False,
    }


DIGEST = "The digest of the document (sha256:<hex>), as bindery_bindings returns it."

TOOLS: dict[str, types.Tool] = {
    BINDINGS_TOOL: types.Tool(
        name=BINDINGS_TOOL,
        title="Read my bindings",
        description=(
            "Returns your current bindings document (the resources and tools bound to you, the "
            "'work' item among them while you hold it) and its digest. Call it at the start of "
            "a task and after every notification from this server. Reading is not "
            "acknowledging: call bindery_acknowledge once you applied it."
        ),
        input_schema={"type": "object", "properties": {}, "additionalProperties": False},
        output_schema={
            "type": "object",
            "properties": {
                "digest": {"type": "string"},
                "bindings": {"type": "object"},
            },
            "required": ["digest", "bindings"],
        },
        annotations=types.ToolAnnotations(read_only_hint=True, idempotent_hint=True),
    ),
    ACKNOWLEDGE_TOOL: types.Tool(
        name=ACKNOWLEDGE_TOOL,
        title="Acknowledge my bindings",
        description=(
            "Tells the platform you applied the bindings document with this digest: you use "
            "what it binds and stopped using everything it no longer carries (above all a "
            "withdrawn 'work' item, which another agent then receives). Refused when the "
            "digest is not the current document's: read your bindings again and apply them."
        ),
        input_schema=_schema(digest=DIGEST),
        annotations=types.ToolAnnotations(read_only_hint=False, idempotent_hint=True),
    ),
    REFUSE_TOOL: types.Tool(
        name=REFUSE_TOOL,
        title="Refuse my bindings",
        description=(
            "Tells the platform you will not apply the bindings document with this digest, and "
            "why (shown in the agent's status). Refused when the digest is not the current "
            "document's."
        ),
        input_schema=_schema(digest=DIGEST, reason="Why you cannot apply it, for a person."),
        annotations=types.ToolAnnotations(read_only_hint=False, idempotent_hint=True),
    ),
    RESOLVE_TOOL: types.Tool(
        name=RESOLVE_TOOL,
        title="Resolve a deferred tool slot",
        description=(
            "Resolves a value for a tool's parameter slot whose state is Deferred in your "
            "bindings (chosen when you call the tool): the platform checks it against the "
            "slot's type and grants, and returns the resource, or says why it does not fit."
        ),
        input_schema=_schema(
            tool="The tool's name in your bindings.",
            slot="The slot's name (its state is Deferred).",
            value="A Resource's name, namespace/name (your namespace), uid or URI.",
        ),
        annotations=types.ToolAnnotations(read_only_hint=True, idempotent_hint=True),
    ),
}


def tool_list(*, resolve: bool) -> list[types.Tool]:
    """The tools listed: ``bindery_resolve`` only where resolving is allowed."""
    return [t for name, t in TOOLS.items() if resolve or name != RESOLVE_TOOL]


def text_result(text: str, structured: dict[str, Any] | None = None) -> types.CallToolResult:
    return types.CallToolResult(
        content=[types.TextContent(text=text)], structured_content=structured
    )


def error_result(text: str) -> types.CallToolResult:
    return types.CallToolResult(content=[types.TextContent(text=text)], is_error=True)


def bindings_result(snapshot: Snapshot) -> types.CallToolResult:
    """``bindery_bindings``: the digest, then the document's exact text."""
    return types.CallToolResult(
        content=[
            types.TextContent(text=f"digest: {snapshot.digest}"),
            types.TextContent(text=snapshot.text),
        ],
        structured_content={"digest": snapshot.digest, "bindings": json.loads(snapshot.text)},
    )


__all__ = [
    "ACKNOWLEDGE_TOOL",
    "BINDINGS_TOOL",
    "BINDINGS_URI",
    "INSTRUCTIONS",
    "META",
    "REFUSE_TOOL",
    "RESOLVE_TOOL",
    "TOOLS",
    "Snapshot",
    "binding_text",
    "bindings_result",
    "changed_uris",
    "error_result",
    "read",
    "resources",
    "text_result",
    "tool_list",
]
