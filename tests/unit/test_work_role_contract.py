"""Exclusivity is about the ``work`` role (docs/design.md, "The work role and other roles").

While agent A holds URI X as its work, agent B may bind X under another role (a reviewer reading
the issue) and receives it there; B's own ``work`` binding to X waits, and is never delivered.
These tests run B's real resolution through the real bindings document.
"""

from __future__ import annotations

from typing import Any

from controller.domain.delivery import bindings_document, render
from controller.domain.registry import Registry
from tests.unit.domain_objects import agent, registry_of, rtype, slot, tool

X = "github-issue://example/project/42"
OTHER = "github-issue://example/project/43"


def reviewer(*bindings: tuple[str, str, str]) -> Registry:
    return registry_of(
        rtype("github-issue", schemes=["github-issue"]),
        tool("a/tracker", slot("review", "github-issue")),
        agent("a/b", bindings=bindings, tools=["tracker"]),
    )


def document(registry: Registry, *, holds_work: bool) -> dict[str, Any]:
    agent_b = registry.agent("a/b")
    assert agent_b is not None
    resolution = registry.resolve("a/b")
    assert resolution.ok, resolution.errors
    return bindings_document(agent_b, resolution, deliver_work=holds_work)


def roles_of(doc: dict[str, Any], uri: str) -> list[str]:
    return [r["name"] for r in doc["resources"] if r["uri"] == uri]


def test_a_waiting_agent_receives_the_uri_under_its_other_role() -> None:
    registry = reviewer(("review", "github-issue", X), ("work", "github-issue", X))
    waiting = document(registry, holds_work=False)
    assert roles_of(waiting, X) == ["review"]
    ((review_slot,),) = [t["slots"] for t in waiting["tools"]]
    assert review_slot["resource"]["uri"] == X
    assert review_slot["resource"]["alias"] == "review"


def test_a_waiting_agent_never_receives_the_uri_as_its_work() -> None:
    registry = reviewer(("review", "github-issue", X), ("work", "github-issue", X))
    waiting = document(registry, holds_work=False)
    assert "work" not in [r["name"] for r in waiting["resources"]]


def test_an_agent_holding_its_work_receives_the_uri_under_both_roles() -> None:
    registry = reviewer(("review", "github-issue", X), ("work", "github-issue", X))
    assert roles_of(document(registry, holds_work=True), X) == ["review", "work"]


def test_a_waiting_agent_with_the_uri_only_as_work_receives_it_nowhere() -> None:
    registry = reviewer(("review", "github-issue", OTHER), ("work", "github-issue", X))
    waiting = document(registry, holds_work=False)
    assert X not in render(waiting)
    assert roles_of(waiting, OTHER) == ["review"]
