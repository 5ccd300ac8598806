"""Kubernetes resource quantities (``500m``, ``2Gi``, ``1E``, ``1e3``), parsed as the API server
parses them, for every form it accepts, without ever raising anything but :class:`QuantityError`.

The grammar is the API server's (``k8s.io/apimachinery/pkg/api/resource``)::

    <quantity> ::= <sign><number><suffix>
    <suffix>   ::= Ki | Mi | Gi | Ti | Pi | Ei          (powers of 1024)
                 | n | u | m | "" | k | M | G | T | P | E (powers of 1000; E is exa)
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
"""A quantity string is at most this long here (the API server sets no length; none needs more)."""

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
    scale = _scale(form["suffix"] or "", value)
    if scale is None:  # an exponent so far below zero that the value is below a nano
        return _bounded(sign, value)  # rounded up to the smallest quantity, 1n
    return _bounded(sign * _nanos(digits, scale[0] - len(form["fraction"] or ""), scale[1]), value)


def _scale(suffix: str, text: str) -> tuple[int, int] | None:
    """(power of ten, power of two) that ``suffix`` multiplies by; None: far below a nano."""
    if suffix in _BINARY:
        return 0, _BINARY[suffix]
    if suffix in _DECIMAL:
        return _DECIMAL[suffix], 0
    negative = suffix[1:2] == "-"
    exponent = suffix[1:].lstrip("+-").lstrip("0")
    if len(exponent) > _DIGITS_OF_MAX:  # an exponent this long is far out of any bound
        if negative:
            return None
        raise _too_large(text)
    return int(exponent or "0") * (-1 if negative else 1), 0


def _nanos(digits: str, shift: int, power: int) -> int:
    """``int(digits) * 10**shift * 2**power`` in whole nanos, rounded up; a value far out of
    bounds is known from its number of digits before anything large is computed."""
    binary_digits = (power * 3 + 9) // 10  # 2**10 adds about 3 digits
    if len(digits) + shift + binary_digits > _DIGITS_OF_MAX + 1:
        return MAX * NANOS + 1  # out of bounds: refused by the caller
    number = int(digits) << power
    places = shift + 9  # of the value in nanos
    if places >= 0:
        return number * int(10**places)
    if len(digits) + binary_digits < -places - 1:
        return 1  # well below one nano: the smallest quantity, 1n
    return -(-number // int(10**-places))  # rounded up, as the API server does


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
