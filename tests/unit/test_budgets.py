"""What one object may carry: slot messages among many candidates, statuses cut to fit, and a
Resource's attributes."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import ValidationError

from controller.domain import rules
from controller.domain.messages import MAX_LISTED, message
from controller.domain.models import LabelSelector, ResourceSpec
from controller.domain.results import Candidate
from controller.domain.status import binding_rows
from controller.domain.status import fit as fitting
from controller.domain.status.fit import STATUS_BUDGET, fit, size
from tests.unit.domain_objects import agent, registry_of, resource, rtype, slot, tool


def candidates(n: int, uri_length: int = 40) -> list[Candidate]:
    return [
        Candidate(
            uri=f"git://example/{i:05d}/" + "x" * max(0, uri_length - 20),
            type="git-checkout",
            reason="its alias does not match the slot",
        )
        for i in range(n)
    ]


# ------------------------------------------------------------------------------- messages


def test_a_slot_among_a_thousand_candidates_has_a_short_message() -> None:
    said = message("agent a, tool t, slot s", "3 fit", "set an alias", candidates(1000))
    assert len(said) < 2000
    assert said.count("git://example/") == MAX_LISTED
    assert f"and {1000 - MAX_LISTED} more" in said
    assert "git://example/00000/" in said
    assert said.endswith("Fix: set an alias.")


def test_long_uris_are_shortened_in_messages() -> None:
    said = message("s", "p", "f", candidates(MAX_LISTED, uri_length=2048))
    assert len(said) < MAX_LISTED * 400


def test_a_few_candidates_are_all_named() -> None:
    said = message("s", "p", "f", candidates(3))
    assert said.count("git://example/") == 3
    assert "more" not in said
    assert message("s", "p", "f", []) == "s: p. Candidates: none. Fix: f."


def test_a_thousand_resources_and_twelve_optional_slots_make_a_status_that_fits() -> None:
    """1,000 ordinary Resources selected by an agent whose Tool has 12 optional contextual slots:
    every slot is ambiguous among all of them, and its binding row stays short."""
    registry = registry_of(
        rtype("git-checkout"),
        *(
            resource(f"a/r{i:04d}", "git-checkout", f"git://example.com/team/repo-{i:04d}")
            for i in range(1000)
        ),
        tool("a/t", *(slot(f"s{k:02d}", "git-checkout", required=False) for k in range(12))),
        agent("a/dev", tools=["t"], selector=LabelSelector()),
    )
    resolution = registry.resolve("a/dev")
    assert len(resolution.slots) == 12
    assert all(len(s.candidates) == 1000 for s in resolution.slots)
    rows = binding_rows(resolution)
    assert size({"bindings": rows}) < 64 * 1024
    assert all("and 990 more" in r["message"] for r in rows)


# ------------------------------------------------------------------------------- statuses


def status_of(rows: int, candidates_per_row: int, message_length: int) -> dict[str, Any]:
    return {
        "observedGeneration": 3,
        "state": "Error",
        "conditions": [
            {"type": "Ready", "status": "False", "reason": "Ambiguous", "message": "see slots"},
            {"type": "Stalled", "status": "True", "reason": "Ambiguous", "message": "m"},
        ],
        "bindings": [
            {
                "name": f"t.s{i}",
                "state": "Error",
                "message": "m" * message_length,
                "candidates": [
                    {"uri": f"git://example/{j}", "type": "git-checkout", "reason": "no alias"}
                    for j in range(candidates_per_row)
                ],
            }
            for i in range(rows)
        ],
        "missingTools": ["a", "b"],
    }


def test_a_status_that_fits_is_returned_unchanged() -> None:
    status = status_of(12, 20, 500)
    assert fit(status) is status


def test_a_status_too_large_is_cut_to_the_budget_and_says_so() -> None:
    status = status_of(12, 20_000, 50_000)
    assert size(status) > 4 * STATUS_BUDGET
    before = json.dumps(status)
    out = fit(status)
    assert json.dumps(status) == before  # the input is left as it was
    assert size(out) <= STATUS_BUDGET
    assert len(out["bindings"]) == 12  # candidates and long messages go before rows
    assert all("candidates" not in r for r in out["bindings"])
    ready = next(c for c in out["conditions"] if c["type"] == "Ready")
    assert "status cut to fit 262144 bytes" in ready["message"]
    assert "240000 listed candidates dropped" in ready["message"]
    assert ready["message"].startswith("see slots")
    assert out["observedGeneration"] == 3
    assert fit(status) == out  # the same status is cut the same way (no needless writes)


def test_rows_go_last_and_the_first_rows_are_kept() -> None:
    status = status_of(5000, 0, 100)
    out = fit(status, budget=64 * 1024)
    assert size(out) <= 64 * 1024
    kept = out["bindings"]
    assert 0 < len(kept) < 5000
    assert [r["name"] for r in kept] == [f"t.s{i}" for i in range(len(kept))]
    ready = next(c for c in out["conditions"] if c["type"] == "Ready")
    assert f"{5000 - len(kept)} of 5000 binding rows left out" in ready["message"]


@settings(max_examples=25, deadline=None)
@given(
    rows=st.integers(0, 300),
    per_row=st.integers(0, 200),
    length=st.integers(0, 20_000),
    budget=st.integers(4096, 512 * 1024),
)
def test_whatever_it_holds_a_status_fits_its_budget(
    rows: int, per_row: int, length: int, budget: int
) -> None:
    out = fit(status_of(rows, per_row, length), budget=budget)
    assert size(out) <= budget
    assert out["conditions"][0]["type"] == "Ready"


def test_clip_says_how_long_the_text_was() -> None:
    assert fitting.clip("short", 10) == "short"
    cut = fitting.clip("x" * 5000, 100)
    assert len(cut) <= 100
    assert cut.endswith("... (5000 characters, cut)")


# ----------------------------------------------------------------------------- attributes


def test_attributes_beyond_their_total_are_refused_with_what_to_do() -> None:
    spec = {"type": "git-checkout", "uri": "git://example/r"}
    at_limit = {f"k{i:02d}": "v" * (256 - 3) for i in range(64)}  # 64 * 256 = 16384
    assert sum(len(k) + len(v) for k, v in at_limit.items()) == rules.ATTRIBUTES_MAX_BYTES
    ResourceSpec.model_validate({**spec, "attributes": at_limit})
    over = {**at_limit, "k00": at_limit["k00"] + "v"}
    with pytest.raises(ValidationError, match="at most 16384 bytes") as error:
        ResourceSpec.model_validate({**spec, "attributes": over})
    assert error.value.errors()[0]["loc"] == ("attributes",)
    assert "keep large content elsewhere" in str(error.value)
    # Bytes, not characters: four-byte characters count four times.
    wide = {"k": "\N{GRINNING FACE}" * 4096}
    assert rules.attributes_problem(wide) is not None
