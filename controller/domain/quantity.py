"""Kubernetes resource quantities (``500m``, ``2Gi``, ``1E``, ``1e3``), parsed as the API server
parses them, for every form it accepts, without ever raising anything but :class:`QuantityError`.

The grammar is the API server's (``k8s.io/apimachinery/pkg/api/resource``)::

    <quantity> ::= <sign><number><suffix>
    <suffix>   ::= Ki | Mi | Gi | Ti | Pi | Ei          (powers of 1024)
                 | n | u | m | "" | k | M | G | T | P | E (powers of 1000; E is exa, not an exponent)
                 | e<integer> | E<integer>            (a decimal exponent)

and so are the two adjustments it makes: a value is rounded up to a whole nano (``0.1n`` is
``1n``), and a value beyond 2^63-1 is not kept exactly. Where the API server silently caps such a
value, this parser refuses it with a :class:`QuantityError` saying so, since nothing Bindery sizes
is meant to be that large. Values are computed exactly (integers of nanos), never through floats,
a huge exponent (``1e999999999``) is refused before anything is computed, and a string longer
than :data:`MAX_LENGTH` is refused outright.
"""

from __future__ import annotations

import json
import re
from decimal import Decimal

from controller.domain.errors import InvalidInputError

MAX = 2**63 - 1
"""The largest quantity the API server keeps exactly (about 8Ei)."""

NANOS = 10**9
MAX_LENGTH = 128
"""A quantity string is at most this long here (the API server sets no length; nothing needs more)."""

PATTERN = (
    r"^(\+|-)?(([0-9]+(\.[0-9]*)?)|(\.[0-9]+))"
    r"(([KMGTPE]i)|[numkMGTPE]|([eE](\+|-)?(([0-9]+(\.[0-9]*)?)|(\.[0-9]+))))?$"
)
"""What the CRDs' ``pattern`` for a quantity accepts (a superset: ``1e1.5`` matches it, but the
API server's parser refuses a fractional exponent, and so does :func:`parse`)."""

_FORM = re.compile(
    r"(?P<sign>[+-]?)(?P<whole>[0-9]*)(?:\.(?P<fraction>[0-9]*))?"
    r"(?P<suffix>[KMGTPE]i|[numkMGTPE]|[eE][+-]?[0-9]+)?"
)

_BINARY = {"Ki": 10, "Mi": 20, "Gi": 30, "Ti": 40, "Pi": 50, "Ei": 60}
_DECIMAL = {"n": -9, "u": -6, "m": -3, "": 0, "k": 3, "M": 6, "G": 9, "T": 12, "P": 15, "E": 18}
_DIGITS_OF_MAX = len(str(MAX))
_SHOWN = 40
_EXAMPLES = "e.g. 250m, 1, 512Mi, 2Gi or 1e3"


def shown(value: str) -> str:
    """``value`` quoted for a message, shortened when long, invisible characters escaped."""
    return json.dumps(value if len(value) <= _SHOWN else value[:_SHOWN] + "...")


class QuantityError(InvalidInputError, ValueError):
    """Why a value is not a quantity, or not one that can be represented (the message says
    which, with the value and what to write instead)."""


def parse(value: object) -> Decimal:
    """The number ``value`` stands for (``2Gi`` is 2147483648, ``250m`` is 0.25), exact to the
    nano. An int is a plain number. Raises :class:`QuantityError` and nothing else."""
    if isinstance(value, bool) or not isinstance(value, int | str):
        raise QuantityError(
            f"quantity {shown(repr(value))} is not valid: expected a number or a string, "
            + _EXAMPLES
        )
    if isinstance(value, int):
        return _bounded(value * NANOS, str(value))
    if len(value) > MAX_LENGTH:
        raise QuantityError(
            f"quantity {shown(value)} is {len(value)} characters long: a quantity is at most "
            f"{MAX_LENGTH}, {_EXAMPLES}"
        )
    form = _FORM.fullmatch(value)
    if form is None or not (form["whole"] or form["fraction"]):
        raise QuantityError(
            f"quantity {shown(value)} is not valid: expected a number with an optional suffix "
            f"(Ki, Mi, Gi, Ti, Pi, Ei; n, u, m, k, M, G, T, P, E; or an exponent e<n>), {_EXAMPLES}"
        )
    digits = (form["whole"] + (form["fraction"] or "")).lstrip("0")
    if not digits:
        return Decimal(0)
    sign = -1 if form["sign"] == "-" else 1
    # value = int(digits) * 10**shift (for a binary suffix, also * 2**power)
    shift = -len(form["fraction"] or "")
    power = 0
    suffix = form["suffix"] or ""
    if suffix in _BINARY:
        power = _BINARY[suffix]
    elif suffix in _DECIMAL:
        shift += _DECIMAL[suffix]
    else:
        exponent = suffix[1:].lstrip("+-").lstrip("0")
        if len(exponent) > _DIGITS_OF_MAX:  # an exponent this long is far out of any bound
            if suffix[1:2] != "-":
                raise _too_large(value)
            return _bounded(sign, value)  # far below a nano: rounded up to 1n
        shift += int(exponent or "0") * (-1 if suffix[1:2] == "-" else 1)
    # How many digits the whole part has, roughly (a power of 2**10 adds about 3): out of
    # bounds is known before anything large is computed.
    magnitude = len(digits) + shift + (power * 3 + 9) // 10
    if magnitude > _DIGITS_OF_MAX + 1:
        raise _too_large(value)
    number = int(digits) << power
    if shift + 9 >= 0:
        return _bounded(sign * number * 10 ** (shift + 9), value)
    # Smaller than a nano in its last digits: rounded up (away from zero), as the API server does.
    if len(digits) + (power * 3 + 9) // 10 < -(shift + 9) - 1:
        return _bounded(sign, value)  # well below one nano: the smallest quantity, 1n
    divisor = 10 ** -(shift + 9)
    return _bounded(sign * -(-number // divisor), value)


def _bounded(nanos: int, text: str) -> Decimal:
    if abs(nanos) > MAX * NANOS:
        raise _too_large(text)
    return Decimal(nanos).scaleb(-9).normalize() if nanos % NANOS else Decimal(nanos // NANOS)


def _too_large(text: str) -> QuantityError:
    return QuantityError(
        f"quantity {shown(text)} cannot be represented: quantities are at most {MAX} "
        "(about 8Ei); write a smaller value"
    )


def problem(value: object) -> str | None:
    """Why ``value`` is not a quantity that can be represented, or None."""
    try:
        parse(value)
    except QuantityError as error:
        return str(error)
    return None
