"""The compact form the controller's view keeps each object in (pure: no I/O, no Kubernetes).

A decoded body holds its own copy of every key and value, and thousands of agents repeat the
same keys, types, URIs, states and messages; an agent's status or a bindings document as a tree
of dicts and strings takes several times its JSON. :func:`compact` keeps one copy of each short
string across the view and one field of the body frozen (compressed JSON), read whole with
:func:`field_of` when a pass needs it. Only memory differs: every value read back is equal to
the one received, of the same types.
"""

from __future__ import annotations

import sys
import zlib
from typing import Any

import pydantic_core

Body = dict[str, Any]

FROZEN_SUFFIX = ".z"
"""A frozen field is stored under its name with this suffix (``status.z``, ``data.z``)."""
SHARED_LENGTH = 128
"""Strings up to this length are shared with equal ones across the view (``sys.intern``)."""


def shared(value: Any) -> Any:
    """``value`` with its keys and short strings replaced by the interpreter's shared copies.

    A decoded body holds its own copy of every key and value: thousands of agents repeat the
    same keys, types, URIs, states and messages. Sharing them keeps one of each (an interned
    string is freed with its last user). Values are equal to what they replace, of the same
    types: only memory changes.
    """
    if isinstance(value, dict):
        return {sys.intern(k) if type(k) is str else k: shared(v) for k, v in value.items()}
    if isinstance(value, list):
        return [shared(v) for v in value]
    if type(value) is str and len(value) <= SHARED_LENGTH:
        return sys.intern(value)
    return value


def freeze(value: Any) -> bytes:
    """``value`` as the store keeps a frozen field: compact JSON (key order kept), compressed.

    pydantic-core writes and reads it (each about twice and four times as fast as the standard
    library on a status): every observed version of an agent is frozen once, and every pass
    thaws the status it starts from."""
    return zlib.compress(pydantic_core.to_json(value), 1)


def thaw(frozen: bytes) -> Any:
    """The value :func:`freeze` froze (equal to it, of the same JSON types)."""
    return pydantic_core.from_json(zlib.decompress(frozen))


def compact(body: Body, *, frozen: str = "") -> Body:
    """The stored form of ``body``: without ``managedFields`` (never read), its keys and short
    strings shared across the view, and its field ``frozen`` (if any) kept by :func:`freeze`
    under that name plus :data:`FROZEN_SUFFIX` (read it with :func:`field_of`). Only memory
    differs: every other field is equal to the body's, and :func:`field_of` returns a value
    equal to the body's own."""
    out: Body = {}
    for key, value in body.items():
        if key == frozen:
            out[key + FROZEN_SUFFIX] = freeze(value)
        elif key == "metadata" and isinstance(value, dict):
            out["metadata"] = shared({k: v for k, v in value.items() if k != "managedFields"})
        else:
            out[sys.intern(key)] = shared(value)
    return out


def field_of(body: Body | None, name: str) -> Body:
    """A body's mapping ``name`` (``{}`` if it has none), whether stored frozen or received."""
    if not body:
        return {}
    frozen = body.get(name + FROZEN_SUFFIX)
    if frozen is not None:
        return thaw(frozen) or {}
    return body.get(name) or {}


def status_of(body: Body | None) -> Body:
    """A body's status (``{}`` if it has none), whether stored (:func:`compact`) or received."""
    return field_of(body, "status")


def data_of(body: Body | None) -> Body:
    """A ConfigMap's data (``{}`` if it has none), whether stored or received."""
    return field_of(body, "data")
