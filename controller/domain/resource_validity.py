"""One Resource's validity on its own, and the URI scheme contract of a ResourceType.

A Resource is invalid when its type is unknown, when its URI has a scheme its type refuses, or
when other Resources in its namespace register the same URI. The scheme check is the one direct
bindings are held to as well (against the type their tag names).
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from controller.domain.messages import message
from controller.domain.models import ResourceObject
from controller.domain.results import ErrorCause, Problem
from controller.domain.types import TypeGraph

_SCHEME = re.compile(r"[A-Za-z][A-Za-z0-9+.\-]*(?=:)")
"""An RFC 3986 scheme at the start of a URI; matched as written (schemes are not case-folded)."""


def scheme_problem(uri: str, allowed: Sequence[str], owner: str) -> str:
    """Why ``uri`` breaks ``owner``'s ``uriSchemes`` contract ("" if it does not): ``owner``
    is what names the allowed schemes, e.g. "ResourceType 'issue'"."""
    scheme = _SCHEME.match(uri)
    if not allowed or (scheme is not None and scheme.group() in allowed):
        return ""
    has = f"scheme {scheme.group()!r}" if scheme else "no scheme"
    return f"its URI {uri!r} has {has}, but {owner} accepts only " + ", ".join(
        repr(s) for s in allowed
    )


def resource_errors(
    resource: ResourceObject, types: TypeGraph, same_uri: Sequence[ResourceObject] = ()
) -> list[Problem]:
    """What is wrong with a Resource on its own: an unknown type, a URI scheme its type refuses,
    or a URI that other Resources in its namespace (``same_uri``, itself excluded) register too."""
    subject, spec = f"Resource {resource.meta.key}", resource.spec
    errors: list[Problem] = []
    rtype = types.get(spec.type)
    if rtype is None:
        fix = f"create a ResourceType named {spec.type!r}, or change spec.type"
        problem = f"its type {spec.type!r} is not a registered ResourceType"
        errors.append(Problem(message(subject, problem, fix), ErrorCause.MISSING))
    else:
        problem = scheme_problem(spec.uri, rtype.spec.uri_schemes, f"ResourceType {spec.type!r}")
        if problem:
            fix = "use a URI with one of those schemes, or change spec.type"
            errors.append(Problem(message(subject, problem, fix), ErrorCause.CONFLICT))
    others = sorted(r.meta.key for r in same_uri if r.meta.key != resource.meta.key)
    if others:
        times = "twice" if len(others) == 1 else f"{len(others) + 1} times"
        kind = "Resource" if len(others) == 1 else "Resources"
        errors.append(
            Problem(
                message(
                    subject,
                    f"its URI {spec.uri!r} is registered {times} in namespace "
                    f"{resource.meta.namespace!r}: {kind} {', '.join(others)} "
                    f"{'has' if len(others) == 1 else 'have'} it too, and a URI identifies one "
                    "resource, so agents binding it cannot tell which one it is",
                    "delete all but one of the Resources with this URI "
                    "(spec.uri cannot be changed)",
                ),
                ErrorCause.CONFLICT,
            )
        )
    return errors
