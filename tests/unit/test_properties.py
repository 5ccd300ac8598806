"""Properties of resolution over generated registries (hypothesis).

The central one: a registry updated change by change agrees, after every change, with a registry
built from scratch from the same objects, and every agent, Tool, Resource and type whose result
changed was named in the change's :class:`Affected`. That is what lets the reconciler recompute
only what a change affects.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Mapping
from dataclasses import dataclass
from itertools import pairwise

from hypothesis import given, settings
from hypothesis import strategies as st

from controller.domain.models import (
    AgentObject,
    LabelSelector,
    LabelSelectorRequirement,
    ResourceObject,
    ResourceTypeObject,
    ToolObject,
)
from controller.domain.registry import Affected, Registry
from controller.domain.results import AgentResolution, Problem, ToolValidation, TypeClosure
from controller.domain.types import TypeGraph
from tests.unit.domain_objects import (
    Object,
    agent,
    registry_of,
    resource,
    rtype,
    slot,
    tool,
    upsert,
    use,
)

# Few names, so that generated objects often meet: select, name, bind or type each other.
TYPE_NAMES = ("t0", "t1", "t2")
REFERENCED_TYPES = (*TYPE_NAMES, *TYPE_NAMES, "ghost")
URIS = ("u://0", "u://1", "U://0")
SLOT_NAMES = ("repo", "r0")
KEYS: dict[type[Object], tuple[str, ...]] = {
    ResourceTypeObject: TYPE_NAMES,
    ResourceObject: ("a/r0", "a/r1", "b/r0"),
    ToolObject: ("a/t", "a/u", "b/t"),
    AgentObject: ("a/dev", "a/ops", "b/dev"),
}


def _requirement(key: str, operator: str, *values: str) -> LabelSelectorRequirement:
    return LabelSelectorRequirement.model_validate(
        {"key": key, "operator": operator, "values": list(values)}
    )


selectors = st.sampled_from(
    (
        None,
        None,
        LabelSelector(match_labels={"k": "x"}),
        LabelSelector(),
        LabelSelector(match_expressions=[_requirement("k", "In", "x", "y")]),
        LabelSelector(match_expressions=[_requirement("k", "NotIn", "x")]),
        LabelSelector(match_expressions=[_requirement("j", "Exists")]),
        LabelSelector(match_expressions=[_requirement("j", "DoesNotExist")]),
    )
)
labels = st.sampled_from(({}, {"k": "x"}, {"k": "y"}, {"k": "x", "j": "y"}))


def type_at(name: str) -> st.SearchStrategy[Object]:
    return st.builds(
        lambda parents, schemes: rtype(name, *parents, schemes=schemes),
        st.lists(st.sampled_from(REFERENCED_TYPES), max_size=2),
        st.sampled_from(((), ("u",), ("U",))),
    )


def resource_at(key: str) -> st.SearchStrategy[Object]:
    return st.builds(
        lambda type_name, uri, alias, labels, recreated: resource(
            key,
            type_name,
            uri,
            alias=alias,
            labels=labels,
            uid="uid-" + key.replace("/", "-") + ("-again" if recreated else ""),
        ),
        st.sampled_from(REFERENCED_TYPES),
        st.sampled_from(URIS),
        st.sampled_from((None, None, *SLOT_NAMES)),
        labels,
        st.booleans(),
    )


slots = st.builds(
    slot,
    st.sampled_from(SLOT_NAMES),
    st.sampled_from(REFERENCED_TYPES),
    st.sampled_from(("contextual", "contextual", "static", "parameter")),
    static=st.sampled_from((None, "r0", "r1", "b/r0", "a/nope")),
    required=st.booleans(),
)


def tool_at(key: str) -> st.SearchStrategy[Object]:
    return st.builds(lambda slots: tool(key, *slots), st.lists(slots, min_size=1, max_size=3))


param_values = st.sampled_from(("r0", "a/r1", "b/r0", "uid-a-r0", "uid-a-r1-again", *URIS))
uses = st.builds(
    lambda name, params: use(name, **params),
    st.sampled_from(("t", "t", "u", "missing")),
    st.dictionaries(st.sampled_from(SLOT_NAMES), param_values, max_size=1),
)
bindings = st.lists(
    st.tuples(st.sampled_from(REFERENCED_TYPES), st.sampled_from(URIS)), max_size=2
).map(lambda pairs: [(name, t, u) for name, (t, u) in zip(("work", "repo"), pairs, strict=False)])


def agent_at(key: str) -> st.SearchStrategy[Object]:
    return st.builds(
        lambda bindings, uses, selector: agent(
            key, bindings=bindings, tools=uses, selector=selector
        ),
        bindings,
        st.lists(uses, max_size=2),
        selectors,
    )


AT = {
    ResourceTypeObject: type_at,
    ResourceObject: resource_at,
    ToolObject: tool_at,
    AgentObject: agent_at,
}
kinds = st.sampled_from(tuple(KEYS))
objects = kinds.flatmap(lambda kind: st.sampled_from(KEYS[kind]).flatmap(AT[kind]))


@dataclass(frozen=True)
class Delete:
    """Delete whatever object has this kind and key."""

    kind: type[Object]
    key: str


deletes = kinds.flatmap(lambda kind: st.builds(Delete, st.just(kind), st.sampled_from(KEYS[kind])))


def key_of(obj: Object) -> tuple[type[Object], str]:
    return type(obj), obj.meta.key


def apply(registry: Registry, change: Object | Delete) -> Affected:
    if not isinstance(change, Delete):
        return upsert(registry, change)
    ns, _, name = change.key.rpartition("/")
    if change.kind is ResourceTypeObject:
        return registry.delete_type(change.key)
    if change.kind is ResourceObject:
        return registry.delete_resource(ns, name)
    if change.kind is ToolObject:
        return registry.delete_tool(ns, name)
    return registry.delete_agent(ns, name)


@dataclass(frozen=True)
class Results:
    """Everything a registry answers, keyed as :class:`Affected` keys it."""

    agents: dict[str, AgentResolution]
    tools: dict[str, ToolValidation]
    resources: dict[str, list[Problem]]
    types: dict[str, TypeClosure]


def results(registry: Registry, live: dict[tuple[type[Object], str], Object]) -> Results:
    keys = {kind: [key for k, key in live if k is kind] for kind in (AgentObject, ToolObject)}
    return Results(
        agents={key: registry.resolve(key) for key in keys[AgentObject]},
        tools={key: registry.validate_tool(key) for key in keys[ToolObject]},
        resources={key: registry.validate_resource(key) for k, key in live if k is ResourceObject},
        types={key: registry.closure(key) for k, key in live if k is ResourceTypeObject},
    )


def changed_keys(before: Mapping[str, object], after: Mapping[str, object]) -> set[str]:
    """Keys still present whose value changed or that are new."""
    return {key for key, value in after.items() if before.get(key) != value}


@settings(max_examples=150, deadline=None)
@given(
    st.lists(objects, min_size=6, max_size=16),
    st.lists(st.one_of(objects, objects, objects, deletes), min_size=1, max_size=8),
    st.lists(st.booleans(), min_size=8, max_size=8),
)
def test_incremental_updates_agree_with_a_rebuild_and_affected_covers_every_change(
    initial: list[Object], changes: list[Object | Delete], resolve_between: list[bool]
) -> None:
    registry = Registry()
    live: dict[tuple[type[Object], str], Object] = {}
    for obj in initial:
        apply(registry, obj)
        live[key_of(obj)] = obj
    before = results(registry_of(*live.values()), live)
    for change, resolve_now in zip(changes, resolve_between, strict=False):
        if resolve_now:  # what resolutions read is learnt only by resolving; sometimes not
            results(registry, live)
        affected = apply(registry, change)
        if isinstance(change, Delete):
            live.pop((change.kind, change.key), None)
        else:
            live[key_of(change)] = change
        after = results(registry_of(*live.values()), live)
        assert results(registry, live) == after
        assert changed_keys(before.agents, after.agents) <= affected.agents
        assert changed_keys(before.tools, after.tools) <= affected.tools
        assert changed_keys(before.resources, after.resources) <= affected.resources
        assert changed_keys(before.types, after.types) <= affected.types
        present = {key for _, key in live}
        assert affected.agents | affected.tools | affected.resources | affected.types <= present
        before = after


TYPED_WORLD: list[Object] = [
    # Every agent examines resources of several types; a/narrow asks for one type only, so a
    # change to another type's ancestors must reach it only where that type gains or loses it.
    resource("a/r0", "t0", "u://0", labels={"k": "x"}),
    resource("a/r1", "t1", "u://1", labels={"k": "x"}, alias="repo"),
    resource("a/r2", "t2", "U://0"),
    tool(
        "a/t",
        slot("repo", "t0"),
        slot("r0", "t2", required=False),
        slot("cfg", "t1", "static", static="r2"),
    ),
    tool("a/u", slot("repo", "t2", "parameter"), slot("r0", "t1")),
    tool("a/n", slot("repo", "t0")),
    agent(
        "a/dev", tools=["t", use("u", repo="r0")], selector=LabelSelector(match_labels={"k": "x"})
    ),
    agent("a/ops", bindings=[("work", "t2", "u://9"), ("repo", "t0", "U://0")], tools=["t", "u"]),
    agent("a/new", bindings=[("work", "t1", "u://1")], tools=["u"]),
    agent("a/narrow", bindings=[("work", "t1", "u://7")], tools=["n"]),
]


@settings(max_examples=100, deadline=None)
@given(
    st.lists(st.sampled_from(TYPE_NAMES).flatmap(type_at), min_size=3, max_size=6),
    st.lists(
        st.one_of(
            st.sampled_from(TYPE_NAMES).flatmap(type_at),
            st.builds(Delete, st.just(ResourceTypeObject), st.sampled_from(TYPE_NAMES)),
        ),
        min_size=1,
        max_size=6,
    ),
)
def test_type_changes_affect_every_agent_whose_result_changes(
    initial: list[Object], changes: list[Object | Delete]
) -> None:
    """Type edits only, over a fixed world where every agent reads and asks for types."""
    registry = registry_of(*initial, *TYPED_WORLD)
    live = {key_of(obj): obj for obj in [*initial, *TYPED_WORLD]}
    before = results(registry, live)
    for change in changes:
        affected = apply(registry, change)
        if isinstance(change, Delete):
            live.pop((change.kind, change.key), None)
        else:
            live[key_of(change)] = change
        after = results(registry, live)
        assert after == results(registry_of(*live.values()), live)
        assert changed_keys(before.agents, after.agents) <= affected.agents
        assert changed_keys(before.tools, after.tools) <= affected.tools
        before = after


@settings(max_examples=100, deadline=None)
@given(
    st.lists(objects, max_size=16, unique_by=key_of).flatmap(
        lambda objs: st.tuples(st.just(objs), st.permutations(objs))
    )
)
def test_results_do_not_depend_on_the_order_objects_arrive_in(
    orders: tuple[list[Object], list[Object]],
) -> None:
    first, second = orders
    live = {key_of(obj): obj for obj in first}
    assert results(registry_of(*first), live) == results(registry_of(*second), live)


@settings(max_examples=100, deadline=None)
@given(st.lists(objects, max_size=14), st.sampled_from(REFERENCED_TYPES), st.sampled_from(URIS))
def test_an_unrelated_resource_changes_no_result(
    objs: list[Object], type_name: str, uri: str
) -> None:
    registry = registry_of(*objs)
    live = {key_of(obj): obj for obj in objs}
    before = results(registry, live)
    unrelated = resource("elsewhere/new", type_name, uri, labels={"k": "x"}, uid="fresh")
    affected = registry.upsert_resource(unrelated)
    assert affected == Affected(resources=frozenset({"elsewhere/new"}))
    assert results(registry, live) == before


def reachable(graph: dict[str, list[str]], start: str) -> set[str]:
    """Everything reachable from ``start`` by one or more parent edges (a plain reference)."""
    seen: set[str] = set()
    queue = deque(graph.get(start, []))
    while queue:
        node = queue.popleft()
        if node not in seen:
            seen.add(node)
            queue.extend(graph.get(node, []))
    return seen


parent_graphs = st.dictionaries(
    st.sampled_from(TYPE_NAMES), st.lists(st.sampled_from(REFERENCED_TYPES), max_size=3)
)


@settings(max_examples=300, deadline=None)
@given(parent_graphs)
def test_closures_are_transitive_and_cycles_terminate(graph: dict[str, list[str]]) -> None:
    types = TypeGraph()
    for name, parents in graph.items():
        types.upsert(rtype(name, *parents))
    for name in graph:
        closure = types.closure(name)
        reached = reachable(graph, name)
        assert closure.ancestors == (reached & graph.keys()) - {name}
        assert set(closure.unknown_parents) == reached - graph.keys() - {name}
        for ancestor in closure.ancestors:
            assert types.closure(ancestor).ancestors <= closure.ancestors | {name}
            assert types.compatible(name, ancestor)
        if name in reached:
            cycle = closure.cycle
            assert cycle[0] == cycle[-1] == name
            assert all(b in graph[a] for a, b in pairwise(cycle))
        else:
            assert closure.cycle == ()
