"""The bindings document delivered to an agent's session (a JSON file in a ConfigMap).

The document's shape is the session library's wire model (:class:`bindery_session.wire.
Bindings`), defined once for both sides: the controller builds it here from an agent's
resolution and renders it; the session validates the same model. It holds what the session needs
to work (the resolved direct bindings and tool slots) and a ``nonce``, drawn afresh for each write
(:func:`stamp`): a runtime acknowledges a document by its digest, and without the nonce a document
equal to one the session applied earlier (a ``work`` binding given, then withdrawn again) would
be confirmed by that earlier acknowledgement while the session may still be applying the one in
between. A pass keeps the document in place when the bindings are unchanged and it is the one the
controller recorded writing (:func:`current_stands`): an unchanged pass writes nothing.
"""

from __future__ import annotations

import re
from typing import Any

from bindery_session.wire import (
    API_VERSION,
    BINDINGS_FILE,
    KIND,
    AgentRef,
    Bindings,
    BindingState,
    DeliveredBinding,
    DeliveredResource,
    DeliveredSlot,
    DeliveredTool,
    Fence,
    digest,
    render,
)

from controller.domain.models import WORK_ROLE, AgentObject
from controller.domain.results import AgentResolution, BoundResource
from controller.domain.work import Hold

__all__ = [
    "BINDINGS_FILE",
    "bindings_document",
    "current_stands",
    "delivered_bindings",
    "delivered_work_uris",
    "digest",
    "nonce_of",
    "render",
    "stamp",
    "without_work",
]

NONCE = "nonce"
_NONCE_LINE = re.compile(r'^  "nonce": "([^"\\\n]*)",?$', re.MULTILINE)
"""The nonce's line in a rendered document: a top-level key is the only one indented by exactly
two spaces (no string value holds a raw newline)."""


def _resource(resource: BoundResource) -> DeliveredResource:
    return DeliveredResource(
        uri=resource.uri,
        type=resource.type,
        alias=resource.alias,
        name=resource.name,
        namespace=resource.namespace,
        uid=resource.uid,
        attributes=resource.attributes,
        grant=resource.grant,
    )


def _withheld(resolution: AgentResolution, deliver_work: bool) -> tuple[str | None, bool]:
    """The work URI withheld from the document (None when none is), and whether another role
    binds it too (slots filled from it then keep it)."""
    work = next((d for d in resolution.direct if d.name == WORK_ROLE), None)
    hidden = work.uri if work is not None and not deliver_work else None
    carried = hidden is not None and any(
        d.name != WORK_ROLE and d.uri == hidden and d.state is BindingState.BOUND
        for d in resolution.direct
    )
    return hidden, carried


def delivered_bindings(
    agent: AgentObject,
    resolution: AgentResolution,
    *,
    deliver_work: bool,
    fence: Hold | None = None,
) -> Bindings:
    """The document for ``agent``.

    The ``work`` binding appears only while the agent holds its URI: ``deliver_work`` says whether
    it does. It carries the hold's identity (``fence``: the Lease's uid and resourceVersion) as a
    fencing token, so a tool that can check it refuses a holder whose hold has gone.
    Exclusivity is about the work role: a URI the agent also binds under another role (a reviewer
    reading the issue) stays delivered there, and in the slots filled from it.
    """
    hidden, carried = _withheld(resolution, deliver_work)
    token = (
        Fence(uid=fence.uid, resource_version=fence.resource_version) if fence is not None else None
    )
    resources = [
        DeliveredBinding(
            name=d.name,
            tag=d.tag,
            uri=d.uri,
            state=d.state.value,
            resource=_resource(d.resource) if d.resource else None,
            hold=token if d.name == WORK_ROLE else None,
        )
        for d in resolution.direct
        if hidden is None or d.name != WORK_ROLE
    ]
    tools: dict[str, list[DeliveredSlot]] = {}
    for s in resolution.slots:
        shown = s.resource is not None and (s.resource.uri != hidden or carried)
        tools.setdefault(s.tool, []).append(
            DeliveredSlot(
                name=s.slot,
                mode=s.mode.value,
                access=s.access.value,
                resource_type=s.resource_type,
                state=s.state.value,
                resource=_resource(s.resource) if shown and s.resource is not None else None,
            )
        )
    return Bindings(
        agent=AgentRef(namespace=agent.meta.namespace, name=agent.meta.name),
        resources=resources,
        tools=[DeliveredTool(name=name, slots=slots) for name, slots in tools.items()],
    )


def bindings_document(
    agent: AgentObject,
    resolution: AgentResolution,
    *,
    deliver_work: bool,
    fence: Hold | None = None,
) -> dict[str, Any]:
    """:func:`delivered_bindings` as JSON values (what :func:`render` turns into the file).

    Built directly, equal to ``delivered_bindings(...).document()`` and rendered to the same text
    (tests/unit/test_delivery.py checks it): every pass of every agent builds one, and
    validating a score of wire models only to dump them again took most of its cost.
    """
    hidden, carried = _withheld(resolution, deliver_work)
    token = (
        {"uid": fence.uid, "resourceVersion": fence.resource_version} if fence is not None else None
    )
    resources: list[dict[str, Any]] = []
    for d in resolution.direct:
        if hidden is not None and d.name == WORK_ROLE:
            continue
        binding: dict[str, Any] = {
            "name": d.name,
            "tag": d.tag,
            "uri": d.uri,
            "state": d.state.value,
        }
        if d.resource is not None:
            binding["resource"] = d.resource.fields(attributes=True)
        if token is not None and d.name == WORK_ROLE:
            binding["hold"] = dict(token)
        resources.append(binding)
    tools: dict[str, list[dict[str, Any]]] = {}
    for s in resolution.slots:
        slot: dict[str, Any] = {
            "name": s.slot,
            "mode": s.mode.value,
            "access": s.access.value,
            "resourceType": s.resource_type,
            "state": s.state.value,
        }
        if s.resource is not None and (s.resource.uri != hidden or carried):
            slot["resource"] = s.resource.fields(attributes=True)
        tools.setdefault(s.tool, []).append(slot)
    return {
        "apiVersion": API_VERSION,
        "kind": KIND,
        "agent": {"namespace": agent.meta.namespace, "name": agent.meta.name},
        "resources": resources,
        "tools": [{"name": name, "slots": slots} for name, slots in tools.items()],
    }


def stamp(document: dict[str, Any], nonce: str) -> dict[str, Any]:
    """``document`` carrying ``nonce`` (unchanged when ``nonce`` is empty: a document written
    by a controller from before the nonce)."""
    return {**document, NONCE: nonce} if nonce else document


def nonce_of(rendered: str) -> str:
    """The nonce of a rendered document ("" when it has none, or is not one)."""
    found = _NONCE_LINE.search(rendered)
    return found.group(1) if found else ""


def current_stands(current: str, document: dict[str, Any], recorded_digest: str) -> bool:
    """Whether the document in place (``current``, the ConfigMap's text) is ``document``
    (built without a nonce) as the controller last wrote it: the same bindings rendered the
    same way, and the digest the controller recorded for its write (``status.delivery.digest``).

    Anything else is written anew with a fresh nonce: bindings that changed, a text edited by
    hand, and an earlier document put back (equal bindings and a nonce the session may have
    acknowledged already, which must not confirm this write).
    """
    return (
        bool(current)
        and digest(current) == recorded_digest
        and render(stamp(document, nonce_of(current))) == current
    )


def delivered_work_uris(rendered: str) -> set[str]:
    """The ``work`` URIs a delivered document contains (none in text that is not a bindings
    document: the ConfigMap can be edited by hand)."""
    document = Bindings.tolerant(rendered)
    return document.work_uris if document is not None else set()


def without_work(rendered: str, nonce: str) -> str:
    """A delivered document with its ``work`` URI withdrawn under every role and slot, under a
    new ``nonce`` (see :func:`stamp`)."""
    document = Bindings.tolerant(rendered)
    if document is None or not document.work_uris:
        return rendered
    return document.without_work().model_copy(update={"nonce": nonce or None}).render()
