"""ResourceType closures, cycles, unknown parents, and type compatibility."""

from __future__ import annotations

import pytest

from controller.domain.models import LabelSelector, ResourceTypeObject
from controller.domain.registry import Registry
from controller.domain.types import TypeGraph
from tests.unit.domain_objects import agent, registry_of, resource, rtype, slot, tool


def graph(*types: tuple[str, ...]) -> TypeGraph:
    """A graph from ``(name, *parents)`` tuples."""
    g = TypeGraph()
    for name, *parents in types:
        g.upsert(rtype(name, *parents))
    return g


def test_ancestors_follow_parents_transitively_and_exclude_the_type_itself() -> None:
    g = graph(("fs-directory", "git-checkout"), ("git-checkout", "vcs"), ("vcs",))
    closure = g.closure("fs-directory")
    assert closure.ancestors == {"git-checkout", "vcs"}
    assert closure.cycle == ()
    assert closure.unknown_parents == ()


def test_a_diamond_counts_each_ancestor_once() -> None:
    g = graph(("leaf", "left", "right"), ("left", "root"), ("right", "root"), ("root",))
    assert g.closure("leaf").ancestors == {"left", "right", "root"}


def test_a_root_has_no_ancestors() -> None:
    closure = graph(("root",)).closure("root")
    assert closure.ancestors == frozenset()


def test_a_self_loop_is_a_cycle_of_one() -> None:
    closure = graph(("a", "a")).closure("a")
    assert closure.cycle == ("a", "a")
    assert closure.ancestors == frozenset()


def test_a_cycle_is_reported_as_the_shortest_path_back() -> None:
    g = graph(("a", "b", "x"), ("b", "c"), ("c", "a"), ("x", "a"))
    assert g.closure("a").cycle == ("a", "x", "a")
    assert g.closure("b").cycle == ("b", "c", "a", "b")
    assert g.closure("a").ancestors == {"b", "c", "x"}


def test_a_type_on_a_cycle_keeps_a_finite_usable_ancestor_set() -> None:
    g = graph(("a", "b"), ("b", "a", "top"), ("top",))
    assert g.closure("a").ancestors == {"b", "top"}
    assert g.compatible("a", "top")
    assert g.compatible("b", "a")


def test_a_type_reaching_a_cycle_is_not_on_it() -> None:
    closure = graph(("leaf", "a"), ("a", "b"), ("b", "a")).closure("leaf")
    assert closure.cycle == ()
    assert closure.ancestors == {"a", "b"}


def test_unknown_parents_are_reported_also_when_reached_through_ancestors() -> None:
    g = graph(("leaf", "mid", "ghost"), ("mid", "phantom"))
    closure = g.closure("leaf")
    assert closure.ancestors == {"mid"}
    assert closure.unknown_parents == ("ghost", "phantom")


def test_descendants_are_the_types_that_reach_a_type() -> None:
    g = graph(("leaf", "mid"), ("mid", "root"), ("other", "root"), ("root",), ("alone",))
    assert g.descendants("root") == {"leaf", "mid", "other"}
    assert g.descendants("leaf") == set()
    assert g.descendants("ghost") == set()


def test_a_parent_change_invalidates_the_closures_of_the_type_and_its_descendants() -> None:
    g = graph(("leaf", "mid"), ("mid",), ("root",))
    assert g.closure("leaf").ancestors == {"mid"}
    g.upsert(rtype("mid", "root"))
    assert g.closure("leaf").ancestors == {"mid", "root"}
    g.delete("mid")
    assert g.closure("leaf").ancestors == frozenset()
    assert g.closure("leaf").unknown_parents == ("mid",)


def test_registering_a_missing_parent_completes_its_childrens_closures() -> None:
    g = graph(("leaf", "late"))
    assert g.closure("leaf").unknown_parents == ("late",)
    g.upsert(rtype("late"))
    assert g.closure("leaf").ancestors == {"late"}
    assert g.closure("leaf").unknown_parents == ()


def test_deleting_an_unknown_type_is_a_no_op() -> None:
    g = graph(("a",))
    g.delete("ghost")
    assert list(g) == ["a"]


def test_compatible_means_the_same_type_or_an_ancestor() -> None:
    g = graph(("fs-directory", "git-checkout"), ("git-checkout",), ("issue",))
    assert g.compatible("fs-directory", "fs-directory")
    assert g.compatible("fs-directory", "git-checkout")
    assert not g.compatible("git-checkout", "fs-directory")
    assert not g.compatible("issue", "git-checkout")


def test_an_unregistered_type_is_compatible_with_nothing_not_even_itself() -> None:
    g = graph(("known",))
    assert g.stands_for("ghost") == frozenset()
    assert not g.compatible("ghost", "ghost")
    assert g.stands_for("known") == {"known"}


def test_incompatibility_names_both_types_and_the_rule_not_the_ancestors() -> None:
    g = graph(("fs-directory", "vcs"), ("vcs",), ("git-checkout",))
    reason = (
        "type 'fs-directory' is neither 'git-checkout' nor lists 'git-checkout' in its "
        "parentTypes, directly or through its parents"
    )
    assert g.incompatibility("fs-directory", "git-checkout") == reason
    g.upsert(rtype("vcs", "tracker"))
    assert g.incompatibility("fs-directory", "git-checkout") == reason
    assert g.incompatibility("fs-directory", "vcs") == ""
    assert g.incompatibility("ghost", "vcs") == "type 'ghost' is not a registered ResourceType"


def test_the_registry_reports_closures_sorted() -> None:
    registry = registry_of(rtype("c", "b", "zz", "aa"), rtype("b", "a"), rtype("a", "c"))
    closure = registry.closure("c")
    assert closure.name == "c"
    assert closure.ancestors == ["a", "b"]
    assert closure.cycle == ["c", "b", "a", "c"]
    assert closure.unknown_parents == ["aa", "zz"]
    assert registry.resource_type("a") == rtype("a", "c")


def test_the_closure_of_an_unknown_type_is_a_key_error() -> None:
    with pytest.raises(KeyError):
        Registry().closure("ghost")


# --------------------------------------------------------------------------------------------
# Cost: closures are built from the parents' closures


def chain(depth: int) -> list[ResourceTypeObject]:
    """``t0000`` <- ``t0001`` <- ... : each type lists the previous one as its parent."""
    return [rtype(f"t{i:04}", *([f"t{i - 1:04}"] if i else [])) for i in range(depth)]


def test_a_long_chain_registered_child_first_costs_steps_linear_in_what_each_change_reaches() -> (
    None
):
    """Registering a chain leaf first used to re-walk the whole chain above every descendant on
    every registration (depth**3 / 6 steps: ten million for 400 levels, some 17 s)."""
    depth = 200
    types = chain(depth)
    registry = resolved_over(types)
    per_registration = []
    for obj in reversed(types):  # child first: each registration reaches every type below it
        before = registry.types.steps
        affected = registry.upsert_type(obj)
        per_registration.append((registry.types.steps - before, len(affected.types)))
        assert "a/dev" in affected.agents  # it examined the types whose ancestors changed
        registry.resolve("a/dev")  # as the reconciler does: it reads every type again
    assert all(steps <= 4 * reached for steps, reached in per_registration), per_registration
    assert sum(steps for steps, _ in per_registration) <= 2 * depth * depth

    closure = registry.closure("t0199")
    assert len(closure.ancestors) == depth - 1
    assert closure.unknown_parents == []
    assert registry.closure("t0000").ancestors == []
    closed = registry.types.steps
    for obj in types:
        registry.closure(obj.meta.name)
    assert registry.types.steps == closed, "every closure is cached"


def resolved_over(types: list[ResourceTypeObject]) -> Registry:
    """A registry where an agent examined a resource of every type of ``types`` (so a change of
    any type's ancestors must be compared), before those types are registered."""
    registry = registry_of(
        tool("a/t", slot("s", "t0000")),
        *(
            resource(f"a/r{i}", obj.meta.name, f"u://{i}", labels={"x": "y"})
            for i, obj in enumerate(types)
        ),
        agent("a/dev", tools=["t"], selector=LabelSelector(match_labels={"x": "y"})),
    )
    registry.resolve("a/dev")
    return registry


def test_without_readers_a_child_first_chain_costs_a_few_steps_per_registration() -> None:
    registry = Registry()
    for obj in reversed(chain(400)):
        before = registry.types.steps
        registry.upsert_type(obj)
        assert registry.types.steps - before <= 4
    # Closing every type afterwards costs one step per parent link.
    before = registry.types.steps
    assert len(registry.closure("t0399").ancestors) == 399
    assert registry.types.steps - before == 399


def test_closures_are_the_same_whatever_the_registration_order() -> None:
    types = [*chain(31), rtype("side", "t0010", "ghost"), rtype("t0031", "t0030", "side")]
    forward, backward = Registry(), Registry()
    for obj in types:
        forward.upsert_type(obj)
    for obj in reversed(types):
        backward.upsert_type(obj)
    for obj in types:
        assert forward.closure(obj.meta.name) == backward.closure(obj.meta.name)
    assert backward.closure("t0031").unknown_parents == ["ghost"]
    # A cycle closed late is still found, with its shortest path.
    backward.upsert_type(rtype("t0000", "t0031"))
    assert backward.closure("t0005").cycle[:2] == ["t0005", "t0004"]
    assert len(backward.closure("t0005").ancestors) == 32
