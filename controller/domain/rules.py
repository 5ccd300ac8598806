"""Syntax rules for what users write, shared by the wire models, the CRDs and the authoring tools.

Each rule here has a twin in ``crds/*.yaml`` (a CEL rule or a pattern) that the API server
enforces at admission; the pydantic models apply the same rules, so ``bindery render`` refuses
what the API server would refuse, and the controller never reads a spec it would have refused.
Every ``*_problem`` function returns why a value breaks its rule (what to do about it included),
or None.
"""

from __future__ import annotations

import json
import re
import unicodedata
from decimal import Decimal
from urllib.parse import quote

from bindery_session.wire import BINDINGS_MOUNT

from controller.domain import quantity

URI_MAX_BYTES = 2048
"""A URI, or a tool parameter, is at most this many bytes (ASCII only, so also characters)."""

_DNS_LABEL = r"[a-z0-9]([-a-z0-9]*[a-z0-9])?"
DNS_SUBDOMAIN = re.compile(rf"{_DNS_LABEL}(\.{_DNS_LABEL})*")
_QUALIFIED_NAME = re.compile(r"([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]")
URI_SCHEME = re.compile(r"[A-Za-z][A-Za-z0-9+.-]*:")
PRINTABLE_ASCII = "".join(chr(c) for c in range(0x21, 0x7F))
"""What a URI is made of (RFC 3986 section 2): visible ASCII; everything else percent-encoded."""

_SHOWN = 120  # characters of a long value quoted in a message


def shown(value: str) -> str:
    """``value`` quoted for a message, shortened when long, with invisible characters escaped."""
    text = value if len(value) <= _SHOWN else value[:_SHOWN] + "..."
    return json.dumps(text)  # ensure_ascii: invisible and lookalike characters show as \uXXXX


def percent_encoded(value: str) -> str:
    """``value`` with every character outside visible ASCII replaced by its UTF-8 %XX bytes.

    A ``%`` already in ``value`` is kept as is: an encoded URI encodes to itself.
    """
    return quote(value, safe=PRINTABLE_ASCII)


def _first_outside_ascii(value: str) -> tuple[int, str] | None:
    if value.isascii() and value.isprintable() and " " not in value:
        return None  # the common case, in C: printable ASCII without a space is exactly 0x21-0x7E
    # Some character is outside 0x21-0x7E, since the fast test above failed.
    return next((i, c) for i, c in enumerate(value) if c not in PRINTABLE_ASCII)


def _describe(c: str) -> str:
    name = unicodedata.name(c, "") or unicodedata.category(c)
    return f"U+{ord(c):04X} ({name})" if c != " " else "a space"


def ascii_problem(what: str, value: str) -> str | None:
    """Why ``value`` is not printable ASCII without spaces, with its percent-encoded form."""
    found = _first_outside_ascii(value)
    if found is None:
        return None
    index, c = found
    return (
        f"{what} {shown(value)} contains {_describe(c)} at character {index + 1}: expected "
        "printable ASCII without spaces or control characters (RFC 3986), with every other "
        f"character percent-encoded as its UTF-8 bytes, here {shown(percent_encoded(value))} "
        "(bindery uri-encode prints the encoded form)"
    )


def uri_problem(uri: str, what: str = "uri") -> str | None:
    """Why ``uri`` cannot be a resource identity, or None. URIs are never normalized."""
    if not uri:
        return f"expected a {what} such as github-issue://example/project/123, found ''"
    if why := ascii_problem(what, uri):
        return why
    if len(uri) > URI_MAX_BYTES:
        return f"{what} is {len(uri)} bytes long: expected at most {URI_MAX_BYTES}"
    if not URI_SCHEME.match(uri):
        return (
            f"{what} {shown(uri)} has no scheme: expected SCHEME:..., such as "
            "github-issue://example/project/123"
        )
    return None


def param_problem(value: str) -> str | None:
    """Why ``value`` cannot be a tool parameter (a Resource name, namespace/name, uid or URI)."""
    if not value:
        return "expected a Resource name, namespace/name, uid or URI, found ''"
    if why := ascii_problem("param", value):
        return why
    if len(value) > URI_MAX_BYTES:
        return f"param is {len(value)} bytes long: expected at most {URI_MAX_BYTES}"
    return None


def is_subdomain(value: str) -> bool:
    return len(value) <= 253 and DNS_SUBDOMAIN.fullmatch(value) is not None


SUBDOMAIN_RULE = (
    "a DNS-1123 subdomain: lowercase letters, digits, '-' and '.', "
    "starting and ending with a letter or digit, at most 253 characters"
)


def qualified_name_problem(key: str) -> str | None:
    """Why ``key`` is not a valid label or annotation key (``[prefix/]name``), or None."""
    prefix, _, name = key.rpartition("/")
    if "/" in key and not prefix:
        return "its prefix before '/' is empty"
    if prefix and not is_subdomain(prefix):
        return f"its prefix {shown(prefix)} is not {SUBDOMAIN_RULE}"
    if not name or len(name) > 63 or _QUALIFIED_NAME.fullmatch(name) is None:
        return (
            "its name must be 1 to 63 letters, digits, '-', '_' or '.', "
            "starting and ending with a letter or digit"
        )
    return None


def attribute_key_problem(key: str) -> str | None:
    """Why ``key`` cannot name a Resource attribute: keys follow the label-key rule."""
    if why := qualified_name_problem(key):
        return (
            f"attribute key {shown(key)} is not valid: {why}; attribute keys follow the "
            "label-key rule, e.g. branch or example.com/owner"
        )
    return None


ATTRIBUTES_MAX_BYTES = 16384
"""A Resource's attribute keys and values together, in UTF-8 bytes (the CRD's CEL rule)."""


def attributes_problem(attributes: dict[str, str]) -> str | None:
    """Why ``attributes`` carry too much for one Resource, or None."""
    total = sum(len(k.encode()) + len(v.encode()) for k, v in attributes.items())
    if total > ATTRIBUTES_MAX_BYTES:
        return (
            f"attributes carry {total} bytes: attribute keys and values together must be at most "
            f"{ATTRIBUTES_MAX_BYTES} bytes (UTF-8); keep large content elsewhere (a file or "
            "object the URI points to) and reference it from the attributes"
        )
    return None


# --------------------------------------------------------------------------------------------
# spec.runtime: what the pod would otherwise be refused for when the StatefulSet creates it


def quantity_problem(value: int | str) -> str | None:
    """Why ``value`` is not a quantity (see :mod:`controller.domain.quantity`), or None."""
    return quantity.problem(value)


def quantity_value(value: int | str) -> Decimal | None:
    """The number a quantity stands for (``2Gi`` is 2147483648), None when it is not one."""
    try:
        return quantity.parse(value)
    except quantity.QuantityError:
        return None


STORAGE_MAX = "1Pi"
"""The largest workspace a session may ask for (the CRD's bound on ``workspace.size``)."""


def storage_size_problem(value: int | str) -> str | None:
    """Why ``value`` cannot size a volume (a quantity above zero, at most 1Pi), or None."""
    try:
        amount = quantity.parse(value)
    except quantity.QuantityError as error:
        return f"size: {error}; a workspace size is a storage quantity above zero, at most 1Pi"
    if amount <= 0:
        return (
            f"size {shown(str(value))} is not valid: expected a storage quantity above zero, e.g. "
            "1Gi or 500Mi"
        )
    if amount > quantity.parse(STORAGE_MAX):
        return (
            f"size {shown(str(value))} is more than {STORAGE_MAX}, the largest workspace a "
            "session may ask for; ask for less, e.g. 100Gi"
        )
    return None


def resource_name_problem(key: str) -> str | None:
    if why := qualified_name_problem(key):
        return (
            f"resource name {shown(key)} is not valid: {why}; expected e.g. cpu, memory, "
            "ephemeral-storage or example.com/gpu"
        )
    return None


def node_selector_key_problem(key: str) -> str | None:
    if why := qualified_name_problem(key):
        return f"nodeSelector key {shown(key)} is not a label key: {why}"
    return None


def label_value_problem(value: str) -> str | None:
    if value == "" or (len(value) <= 63 and _QUALIFIED_NAME.fullmatch(value)):
        return None
    return (
        f"label value {shown(value)} is not valid: expected empty or 1 to 63 letters, digits, "
        "'-', '_' or '.', starting and ending with a letter or digit"
    )


def object_name_problem(value: str, what: str) -> str | None:
    """Why ``value`` cannot name a ServiceAccount or Secret (a DNS-1123 subdomain), or None."""
    if is_subdomain(value):
        return None
    return f"{what} name {shown(value)} is not valid: expected {SUBDOMAIN_RULE}"


# BINDINGS_MOUNT (the session library's): where the session reads its bindings; no user volume
# may be mounted there or below.
BINDINGS_VOLUME = "bindings"
RESERVED_VOLUME_PREFIX = "bindery-"
"""Volume names the session builder keeps for itself (the delivery sidecar's volumes)."""

_DNS_LABEL_RE = re.compile(_DNS_LABEL)


def volume_name_problem(name: str) -> str | None:
    if name == BINDINGS_VOLUME or name.startswith(RESERVED_VOLUME_PREFIX):
        return (
            f"volume name {shown(name)} is reserved for Bindery's own volumes (bindings, "
            "bindery-*): choose another"
        )
    if len(name) > 63 or not _DNS_LABEL_RE.fullmatch(name):
        return (
            f"volume name {shown(name)} is not valid: expected a DNS-1123 label (lowercase "
            "letters, digits and '-', starting and ending with a letter or digit, at most 63)"
        )
    return None


def mount_path_problem(path: str) -> str | None:
    if not path.startswith("/") or ":" in path:
        return f"mountPath {shown(path)} is not valid: expected an absolute path without ':'"
    if ".." in path.split("/"):
        return f"mountPath {shown(path)} is not valid: expected no '..' element"
    if path.rstrip("/") == BINDINGS_MOUNT or path.startswith(
        (BINDINGS_MOUNT + "/", BINDINGS_MOUNT + "-")
    ):
        return (
            f"mountPath {shown(path)} is where the session reads its bindings and acknowledges "
            f"them ({BINDINGS_MOUNT}, {BINDINGS_MOUNT}-*): choose another path"
        )
    return None


def sub_path_problem(path: str) -> str | None:
    if path.startswith("/") or ".." in path.split("/"):
        return f"subPath {shown(path)} is not valid: expected a relative path without '..'"
    return None
