"""Quantities: every form the API server accepts, exactly; nothing but QuantityError escapes."""

from __future__ import annotations

import contextlib
import re
from decimal import ROUND_CEILING, Decimal

import pytest
from hypothesis import given
from hypothesis import strategies as st
from pydantic import ValidationError

from controller.domain import quantity, rules
from controller.domain.models import Runtime

BINARY = {
    s: Decimal(2) ** (10 * (i + 1)) for i, s in enumerate(("Ki", "Mi", "Gi", "Ti", "Pi", "Ei"))
}
DECIMAL: dict[str, Decimal] = {
    "n": Decimal("1e-9"),
    "u": Decimal("1e-6"),
    "m": Decimal("1e-3"),
    "": Decimal(1),
    "k": Decimal(10**3),
    "M": Decimal(10**6),
    "G": Decimal(10**9),
    "T": Decimal(10**12),
    "P": Decimal(10**15),
    "E": Decimal(10**18),
}
SUFFIXES = {**BINARY, **DECIMAL}


@pytest.mark.parametrize(
    ("text", "value"),
    [
        ("1Ei", 2**60),
        ("1E", 10**18),
        ("7Ei", 7 * 2**60),
        ("1e3", 1000),
        ("1E3", 1000),
        ("1e+3", 1000),
        ("1e-3", Decimal("0.001")),
        ("2.5e2", 250),
        ("500m", Decimal("0.5")),
        ("1.5Gi", 3 * 2**29),
        (".5", Decimal("0.5")),
        ("5.", 5),
        ("+1k", 1000),
        ("-1.5", Decimal("-1.5")),
        ("0", 0),
        ("0Ei", 0),
        ("0.000Ki", 0),
        ("1n", Decimal("1e-9")),
        ("0.1n", Decimal("1e-9")),  # rounded up to a whole nano, as the API server does
        ("-0.1n", Decimal("-1e-9")),
        ("1.0000000001", Decimal("1.000000001")),
        ("1e-99999999999999999999999", Decimal("1e-9")),
        ("0.0000001Ki", Decimal("0.0001024")),
        ("9223372036854775807", 2**63 - 1),
        (2**63 - 1, 2**63 - 1),
        (0, 0),
        (-5, -5),
    ],
)
def test_every_form_the_api_server_accepts_is_read_exactly(
    text: str | int, value: Decimal | int
) -> None:
    assert quantity.parse(text) == value


@pytest.mark.parametrize(
    ("text", "why"),
    [
        ("8Ei", "cannot be represented"),
        ("9223372036854775808", "cannot be represented"),
        ("9223372036854775807.5", "cannot be represented"),
        (2**63, "cannot be represented"),
        ("1e19", "cannot be represented"),
        ("1e999999999", "cannot be represented"),
        ("1e9999999999999999999999999", "cannot be represented"),
        ("99999999999999999999999999999Ki", "cannot be represented"),
        ("1e1.5", "is not valid"),  # the CRD's pattern lets it by; the API server's parser does not
        ("1Ki3", "is not valid"),
        ("1ki", "is not valid"),
        ("1 Gi", "is not valid"),
        ("Gi", "is not valid"),
        (".", "is not valid"),
        ("", "is not valid"),
        ("1" * 200, "characters long"),
        (True, "expected a number or a string"),
        (1.5, "expected a number or a string"),
        (None, "expected a number or a string"),
    ],
)
def test_what_cannot_be_represented_is_a_clear_quantity_error(text: object, why: str) -> None:
    with pytest.raises(quantity.QuantityError, match=why) as error:
        quantity.parse(text)
    shown = str(text)
    assert shown[:20] in str(error.value)
    assert quantity.problem(text) == str(error.value)
    assert rules.quantity_value(text) is None  # type: ignore[arg-type]


@given(
    st.integers(min_value=0, max_value=10**20),
    st.sampled_from(sorted(SUFFIXES)),
    st.sampled_from(["", "+", "-"]),
)
def test_a_whole_number_with_any_suffix_is_its_exact_multiple_or_too_large(
    number: int, suffix: str, sign: str
) -> None:
    exact = Decimal(number) * SUFFIXES[suffix] * (-1 if sign == "-" else 1)
    text = f"{sign}{number}{suffix}"
    if abs(exact) > quantity.MAX:
        with pytest.raises(quantity.QuantityError, match="cannot be represented"):
            quantity.parse(text)
    else:
        assert quantity.parse(text) == exact


@given(st.integers(min_value=1, max_value=10**6), st.integers(min_value=-40, max_value=40))
def test_an_exponent_is_a_power_of_ten(number: int, exponent: int) -> None:
    exact = Decimal(number).scaleb(exponent)
    text = f"{number}e{exponent}"
    if exact > quantity.MAX:
        with pytest.raises(quantity.QuantityError):
            quantity.parse(text)
        return
    # Below a nano, rounded up to the next whole nano.
    nanos = exact.scaleb(9).to_integral_value(rounding=ROUND_CEILING)
    assert quantity.parse(text) == nanos.scaleb(-9)


@given(st.from_regex(re.compile(quantity.PATTERN), fullmatch=True))
def test_whatever_the_crd_pattern_admits_parses_or_is_a_quantity_error(text: str) -> None:
    problem = quantity.problem(text)
    if problem is None:
        assert abs(quantity.parse(text)) <= quantity.MAX
    else:
        assert text[:20] in problem or "characters long" in problem


@given(st.text(max_size=60) | st.integers() | st.floats() | st.none() | st.booleans())
def test_nothing_but_a_quantity_error_escapes(value: object) -> None:
    with contextlib.suppress(quantity.QuantityError):
        quantity.parse(value)


@pytest.mark.parametrize("size", ["1Ei", "1E", "2Pi", 2**60, "1e18"])
def test_an_absurd_workspace_size_is_refused_naming_the_field(size: str | int) -> None:
    with pytest.raises(ValidationError, match="more than 1Pi") as error:
        Runtime.model_validate({"image": "x", "workspace": {"size": size}})
    assert error.value.errors()[0]["loc"] == ("workspace", "size")


@pytest.mark.parametrize("size", ["8Ei", "1e99", "1e1.5"])
def test_an_unrepresentable_workspace_size_is_refused_naming_the_field(size: str) -> None:
    with pytest.raises(ValidationError, match="size: quantity") as error:
        Runtime.model_validate({"image": "x", "workspace": {"size": size}})
    assert error.value.errors()[0]["loc"] == ("workspace", "size")


def test_the_largest_workspace_is_accepted() -> None:
    runtime = Runtime.model_validate({"image": "x", "workspace": {"size": "1Pi"}})
    assert runtime.workspace is not None
    assert rules.quantity_value(runtime.workspace.size) == 2**50
