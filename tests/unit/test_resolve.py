"""Resolution rules, one by one, and the messages each failure produces."""

from __future__ import annotations

from collections.abc import Callable

import pytest
from bindery_session.wire import BindingMode, BindingState

from controller.domain.label_selectors import matches
from controller.domain.models import LabelSelector, LabelSelectorRequirement
from controller.domain.registry import Registry
from controller.domain.results import (
    BoundResource,
    DirectResult,
    ErrorCause,
    ResultModel,
    SlotResult,
)
from tests.unit.domain_objects import (
    Object,
    agent,
    registry_of,
    resource,
    rtype,
    slot,
    tool,
    use,
)

TYPES = (
    rtype("vcs"),
    rtype("git-checkout", "vcs"),
    rtype("fs-directory", "git-checkout"),
    rtype("issue", schemes=["gh"]),
)
GROUP = LabelSelector(match_labels={"team": "x"})


def only_slot(registry: Registry, key: str = "a/dev") -> SlotResult:
    (result,) = registry.resolve(key).slots
    return result


def contextual(*objects: Object, required: bool = True, name: str = "repo") -> SlotResult:
    """The one slot of tool ``git`` (asking for git-checkout), as agent a/dev resolves it."""
    registry = registry_of(
        *TYPES,
        tool("a/git", slot(name, "git-checkout", required=required)),
        *objects,
    )
    return only_slot(registry)


def selecting(*bindings: tuple[str, str, str]) -> Object:
    return agent("a/dev", bindings=bindings, tools=["git"], selector=GROUP)


def labelled(name: str, type_name: str, uri: str, alias: str | None = None) -> Object:
    return resource(f"a/{name}", type_name, uri, alias=alias, labels={"team": "x"})


# --------------------------------------------------------------------------------------------
# Contextual slots


def test_one_compatible_linked_resource_is_bound() -> None:
    result = contextual(selecting(), labelled("src", "git-checkout", "git://x"))
    assert result.state is BindingState.BOUND
    assert result.mode is BindingMode.CONTEXTUAL
    assert result.resource == BoundResource(
        uri="git://x", type="git-checkout", name="src", namespace="a", uid="uid-a-src"
    )
    assert [c.reason for c in result.candidates] == [
        "selected: the only compatible linked resource"
    ]
    assert result.message == ""


def test_a_subtype_fills_a_slot_through_parent_types_transitively() -> None:
    registry = registry_of(
        *TYPES,
        tool("a/t", slot("a", "git-checkout"), slot("b", "vcs")),
        agent("a/dev", tools=["t"], selector=GROUP),
        labelled("dir", "fs-directory", "file:///d"),
    )
    assert [s.state for s in registry.resolve("a/dev").slots] == [BindingState.BOUND] * 2


def test_a_supertype_does_not_fill_a_slot_asking_for_a_subtype() -> None:
    registry = registry_of(
        *TYPES,
        tool("a/git", slot("dir", "fs-directory")),
        agent("a/dev", tools=["git"], selector=GROUP),
        labelled("src", "git-checkout", "git://x"),
    )
    result = only_slot(registry)
    assert result.state is BindingState.ERROR
    assert (
        "'git://x': type 'git-checkout' is neither 'fs-directory' nor lists 'fs-directory' in its "
        "parentTypes, directly or through its parents." in result.message
    )


def test_no_compatible_resource_for_a_required_slot_is_an_error_naming_everything() -> None:
    result = contextual(
        selecting(("work", "issue", "gh://1")), labelled("notes", "ghost", "file:///n")
    )
    assert result.state is BindingState.ERROR
    assert result.message == (
        "agent a/dev, tool 'git', slot 'repo': no linked resource is compatible with "
        "'git-checkout'. Candidates: 'file:///n': type 'ghost' is not a registered ResourceType; "
        "'gh://1': type 'issue' is neither 'git-checkout' nor lists 'git-checkout' in its "
        "parentTypes, directly or through its parents. "
        "Fix: create a ResourceType named 'ghost', or link a Resource of type 'git-checkout' "
        "(or a subtype) through spec.resources or spec.resourceSelector, or make the slot "
        "optional (required: false)."
    )
    assert [(c.uri, c.type, c.alias) for c in result.candidates] == [
        ("file:///n", "ghost", ""),
        ("gh://1", "issue", "work"),
    ]


def test_candidates_of_unregistered_types_suggest_creating_those_types() -> None:
    result = contextual(
        selecting(("work", "issue", "gh://1")),
        labelled("a", "ghost", "file:///a"),
        labelled("b", "phantom", "file:///b"),
    )
    assert "Fix: create ResourceTypes named 'ghost' and 'phantom', or link a Resource" in (
        result.message
    )


def test_no_linked_resource_at_all_says_none_were_considered() -> None:
    result = contextual(agent("a/dev", tools=["git"]))
    assert result.state is BindingState.ERROR
    assert "no linked resource is compatible with 'git-checkout'. Candidates: none." in (
        result.message
    )
    assert result.candidates == []


def test_no_compatible_resource_for_an_optional_slot_is_unbound() -> None:
    result = contextual(selecting(("work", "issue", "gh://1")), required=False)
    assert result.state is BindingState.UNBOUND
    assert result.required is False
    assert result.message.startswith(
        "agent a/dev, tool 'git', slot 'repo': optional, and no linked resource is compatible "
        "with 'git-checkout'. Candidates: 'gh://1': type 'issue' is neither 'git-checkout'"
    )
    assert "make the slot optional" not in result.message


def test_several_compatible_resources_pick_the_one_whose_alias_is_the_slot_name() -> None:
    result = contextual(
        selecting(),
        labelled("one", "git-checkout", "git://1", alias="repo"),
        labelled("two", "fs-directory", "git://2", alias="docs"),
    )
    assert result.state is BindingState.BOUND
    assert result.resource is not None
    assert result.resource.name == "one"
    assert [c.reason for c in result.candidates] == [
        "selected: its alias equals the slot name",
        "alias 'docs' and name 'two' != slot name 'repo'",
    ]


def test_several_compatible_resources_pick_by_short_name_when_no_alias_matches() -> None:
    result = contextual(
        selecting(),
        labelled("repo", "git-checkout", "git://1"),
        labelled("other", "git-checkout", "git://2"),
    )
    assert result.resource is not None
    assert result.resource.name == "repo"
    assert result.candidates[0].reason == "selected: its name equals the slot name"
    assert result.candidates[1].reason == "name 'other' != slot name 'repo'"


def test_a_direct_binding_is_matched_by_its_binding_name() -> None:
    result = contextual(
        selecting(("repo", "git-checkout", "git://d")),
        labelled("other", "git-checkout", "git://2"),
    )
    assert result.resource == BoundResource(uri="git://d", type="git-checkout", alias="repo")
    assert [c.reason for c in result.candidates] == [
        "name 'other' != slot name 'repo'",
        "selected: its binding name equals the slot name",
    ]


def test_several_compatible_resources_and_none_named_like_the_slot_is_an_error() -> None:
    result = contextual(
        selecting(("src", "git-checkout", "git://d")),
        labelled("other", "fs-directory", "git://2", alias="o"),
    )
    assert result.state is BindingState.ERROR
    assert result.message == (
        "agent a/dev, tool 'git', slot 'repo': 2 linked resources are compatible and none is "
        "named 'repo'. Candidates: 'git://2': alias 'o' and name 'other' != slot name 'repo'; "
        "'git://d': binding name 'src' != slot name 'repo'. Fix: give the one to use the alias "
        "'repo' (or name its direct binding 'repo'), or select fewer resources."
    )


def test_several_compatible_resources_named_like_the_slot_is_an_error() -> None:
    result = contextual(
        selecting(("repo", "git-checkout", "git://d")),
        labelled("other", "git-checkout", "git://2", alias="repo"),
        labelled("third", "git-checkout", "git://3"),
    )
    assert result.state is BindingState.ERROR
    assert "2 compatible linked resources are named 'repo'" in result.message
    assert "keep the alias or name 'repo' on only one of them" in result.message
    assert [c.reason for c in result.candidates] == [
        "alias 'repo' and name 'other' also matches the slot name",
        "name 'third' != slot name 'repo'",
        "binding name 'repo' also matches the slot name",
    ]


def test_a_slot_asking_for_an_unregistered_type_is_an_error_saying_to_create_it() -> None:
    registry = registry_of(
        *TYPES,
        tool("a/git", slot("repo", "ghost")),
        selecting(),
        labelled("src", "git-checkout", "git://x"),
    )
    assert only_slot(registry).message == (
        "agent a/dev, tool 'git', slot 'repo': its resourceType 'ghost' is not a registered "
        "ResourceType. Candidates: none. Fix: create a ResourceType named 'ghost', or change "
        "the slot's resourceType."
    )


def test_candidates_are_sorted_by_uri_whatever_the_spec_order() -> None:
    uris = ["git://c", "git://a", "git://b"]
    result = contextual(selecting(*[(f"b{i}", "git-checkout", u) for i, u in enumerate(uris)]))
    assert [c.uri for c in result.candidates] == sorted(uris)


# --------------------------------------------------------------------------------------------
# Linked resources: selectors


@pytest.mark.parametrize(
    ("requirement", "labels", "selected"),
    [
        (("k", "In", ["x", "y"]), {"k": "y"}, True),
        (("k", "In", ["x"]), {"k": "z"}, False),
        (("k", "In", ["x"]), {}, False),
        (("k", "NotIn", ["x"]), {"k": "z"}, True),
        (("k", "NotIn", ["x"]), {}, True),
        (("k", "NotIn", ["x"]), {"k": "x"}, False),
        (("k", "Exists", []), {"k": ""}, True),
        (("k", "Exists", []), {"j": "x"}, False),
        (("k", "DoesNotExist", []), {"j": "x"}, True),
        (("k", "DoesNotExist", []), {"k": "x"}, False),
    ],
)
def test_match_expressions_follow_kubernetes_semantics(
    requirement: tuple[str, str, list[str]], labels: dict[str, str], selected: bool
) -> None:
    key, operator, values = requirement
    selector = LabelSelector.model_validate(
        {"matchExpressions": [{"key": key, "operator": operator, "values": values}]}
    )
    assert matches(selector, labels) is selected
    registry = registry_of(
        *TYPES,
        tool("a/git", slot("repo", "git-checkout")),
        agent("a/dev", tools=["git"], selector=selector),
        resource("a/src", "git-checkout", "git://x", labels=labels),
    )
    assert (only_slot(registry).state is BindingState.BOUND) is selected


def test_match_labels_and_expressions_must_all_hold() -> None:
    selector = LabelSelector(
        match_labels={"team": "x", "env": "prod"},
        match_expressions=[LabelSelectorRequirement(key="tier", operator="NotIn", values=["c"])],
    )
    assert matches(selector, {"team": "x", "env": "prod", "tier": "a"})
    assert not matches(selector, {"team": "x", "env": "dev"})
    assert not matches(selector, {"team": "x", "env": "prod", "tier": "c"})


def test_a_selector_selects_only_in_the_agents_namespace() -> None:
    registry = registry_of(
        *TYPES,
        tool("a/git", slot("repo", "git-checkout")),
        selecting(),
        resource("b/src", "git-checkout", "git://x", labels={"team": "x"}),
    )
    assert registry.selected_resources("a/dev") == []
    assert only_slot(registry).state is BindingState.ERROR


def test_no_selector_links_nothing_and_an_empty_one_links_the_whole_namespace() -> None:
    objects = (
        *TYPES,
        tool("a/git", slot("repo", "git-checkout")),
        resource("a/src", "git-checkout", "git://x"),
    )
    unset = registry_of(*objects, agent("a/dev", tools=["git"]))
    assert unset.selected_resources("a/dev") == []
    everything = registry_of(*objects, agent("a/dev", tools=["git"], selector=LabelSelector()))
    assert [r.meta.name for r in everything.selected_resources("a/dev")] == ["src"]


# --------------------------------------------------------------------------------------------
# Linked resources: direct bindings and URI identity


def test_a_registered_resource_with_a_direct_bindings_uri_is_the_same_resource() -> None:
    registry = registry_of(
        *TYPES,
        tool("a/git", slot("repo", "vcs")),
        selecting(("work", "git-checkout", "file:///w")),
        labelled("w", "fs-directory", "file:///w", alias="mine"),
    )
    resolution = registry.resolve("a/dev")
    (direct,) = resolution.direct
    assert direct.state is BindingState.BOUND
    merged = BoundResource(
        uri="file:///w", type="fs-directory", alias="work", name="w", namespace="a", uid="uid-a-w"
    )
    assert direct.resource == merged
    result = only_slot(registry)
    assert result.resource == merged
    assert len(result.candidates) == 1


def test_a_registered_resource_of_an_incompatible_type_makes_the_direct_binding_an_error() -> None:
    registry = registry_of(
        *TYPES,
        tool("a/git", slot("repo", "git-checkout")),
        agent("a/dev", bindings=[("work", "git-checkout", "gh://1")], tools=["git"]),
        resource("a/issue-1", "issue", "gh://1"),
    )
    (direct,) = registry.resolve("a/dev").direct
    assert direct.state is BindingState.ERROR
    assert direct.resource is None
    assert direct.message == (
        "agent a/dev, direct binding 'work': its URI 'gh://1' is Resource a/issue-1, and its "
        "type 'issue' is neither 'git-checkout' nor lists 'git-checkout' in its parentTypes, "
        "directly or through its parents. Fix: change the tag or the Resource's type."
    )
    result = only_slot(registry)
    assert result.state is BindingState.ERROR
    assert "'gh://1': its direct binding 'work' is in error" in result.message


def test_a_registered_resource_of_an_unknown_type_says_to_create_the_type() -> None:
    registry = registry_of(
        *TYPES,
        agent("a/dev", bindings=[("work", "issue", "gh://1")]),
        resource("a/issue-1", "bug", "gh://1"),
    )
    (direct,) = registry.resolve("a/dev").direct
    assert "its type 'bug' is not a registered ResourceType" in direct.message
    assert direct.message.endswith(
        "Fix: create a ResourceType named 'bug', or change the tag or the Resource's type."
    )


def test_a_direct_binding_tagged_with_an_unknown_type_is_an_error() -> None:
    registry = registry_of(*TYPES, agent("a/dev", bindings=[("work", "ticket", "gh://1")]))
    (direct,) = registry.resolve("a/dev").direct
    assert direct.state is BindingState.ERROR
    assert direct.message == (
        "agent a/dev, direct binding 'work': its tag 'ticket' is not a registered ResourceType. "
        "Fix: create a ResourceType named 'ticket', or change the tag."
    )
    assert registry.resolve("a/dev").errors == [direct.message]


def test_a_uri_registered_twice_makes_a_direct_binding_ambiguous() -> None:
    registry = registry_of(
        *TYPES,
        agent("a/dev", bindings=[("work", "issue", "gh://1")]),
        resource("a/one", "issue", "gh://1"),
        resource("a/two", "issue", "gh://1"),
    )
    (direct,) = registry.resolve("a/dev").direct
    assert direct.message == (
        "agent a/dev, direct binding 'work': its URI 'gh://1' is registered by 2 Resources "
        "(a/one, a/two), so which one it is is ambiguous. Fix: delete all but one of those "
        "Resources."
    )


@pytest.mark.parametrize(
    "registered",
    ["git://x/Repo", "git://x/repo/", "git://x/%72epo", "GIT://x/repo", "git://x/repo%20"],
)
def test_uris_are_compared_byte_for_byte(registered: str) -> None:
    registry = registry_of(
        *TYPES,
        tool("a/git", slot("repo", "git-checkout", required=False)),
        selecting(("work", "git-checkout", "git://x/repo")),
        labelled("other", "git-checkout", registered),
    )
    (direct,) = registry.resolve("a/dev").direct
    assert direct.resource == BoundResource(uri="git://x/repo", type="git-checkout", alias="work")
    assert len(only_slot(registry).candidates) == 2


def test_a_resource_in_another_namespace_with_the_same_uri_is_not_merged() -> None:
    registry = registry_of(
        *TYPES,
        agent("a/dev", bindings=[("work", "issue", "gh://1")]),
        resource("b/issue-1", "issue", "gh://1"),
    )
    (direct,) = registry.resolve("a/dev").direct
    assert direct.resource == BoundResource(uri="gh://1", type="issue", alias="work")


# --------------------------------------------------------------------------------------------
# Static slots


STATIC = tool("a/cfg", slot("config", "git-checkout", "static", static="shared"))


def test_a_static_slot_binds_the_named_resource_in_the_tools_namespace() -> None:
    registry = registry_of(
        *TYPES,
        STATIC,
        resource("a/shared", "fs-directory", "file:///s"),
        agent("a/dev", tools=["cfg"]),
    )
    validation = registry.validate_tool("a/cfg")
    assert validation.tool == "a/cfg"
    assert validation.errors == []
    (checked,) = validation.static_slots
    assert checked.state is BindingState.BOUND
    assert checked.mode is BindingMode.STATIC
    assert checked.candidates[0].reason == "selected: named by its staticResource 'shared'"
    assert only_slot(registry) == checked


def test_a_static_slot_may_not_name_a_resource_in_another_namespace() -> None:
    registry = registry_of(
        *TYPES,
        tool("a/cfg", slot("config", "vcs", "static", static="b/shared")),
        resource("b/shared", "git-checkout", "git://s"),
    )
    (checked,) = registry.validate_tool("a/cfg").static_slots
    assert checked.resource is None
    assert checked.message.startswith(
        "tool a/cfg, slot 'config': its staticResource names another namespace's Resource: "
        "Resource 'b/shared' is in namespace 'b', and no ResourceGrant there lets namespace 'a' "
        "bind it by static. Candidates: none. Fix: ask the owners of namespace 'b'"
    )
    assert checked.cause is ErrorCause.MISSING
    # The same words whether or not the other namespace has it: no existence oracle.
    hidden = registry_of(*TYPES, tool("a/cfg", slot("config", "vcs", "static", static="b/none")))
    (other,) = hidden.validate_tool("a/cfg").static_slots
    named = checked.message.replace("b/shared", "b/none").replace("name: shared}", "name: none}")
    assert other.message == named


def test_a_static_slot_naming_a_missing_resource_is_an_error_for_the_tool_and_the_agent() -> None:
    registry = registry_of(*TYPES, STATIC, agent("a/dev", tools=["cfg"]))
    assert registry.validate_tool("a/cfg").errors == [
        "tool a/cfg, slot 'config': its staticResource 'shared' names Resource a/shared, which "
        "does not exist. Candidates: none. Fix: create that Resource, or point staticResource "
        "at an existing one."
    ]
    assert only_slot(registry).message.startswith(
        "agent a/dev, tool 'cfg', slot 'config': its staticResource 'shared' names Resource "
        "a/shared, which does not exist."
    )


def test_a_static_slot_naming_an_incompatible_resource_is_an_error() -> None:
    registry = registry_of(*TYPES, STATIC, resource("a/shared", "issue", "gh://1"))
    assert registry.validate_tool("a/cfg").errors == [
        "tool a/cfg, slot 'config': its staticResource 'shared' names a resource that cannot "
        "fill it. Candidates: 'gh://1': type 'issue' is neither 'git-checkout' nor lists "
        "'git-checkout' in its parentTypes, directly or through its parents. Fix: point "
        "staticResource at a Resource of type 'git-checkout' "
        "(or a subtype), or change the slot's resourceType."
    ]


def test_a_static_resource_of_an_unknown_type_says_to_create_the_type() -> None:
    registry = registry_of(*TYPES, STATIC, resource("a/shared", "bug", "gh://1"))
    (error,) = registry.validate_tool("a/cfg").errors
    assert "type 'bug' is not a registered ResourceType" in error
    assert "Fix: create a ResourceType named 'bug', or point staticResource" in error


def test_a_static_slot_without_a_static_resource_is_an_error() -> None:
    registry = registry_of(*TYPES, tool("a/cfg", slot("config", "vcs", "static")))
    assert registry.validate_tool("a/cfg").errors == [
        "tool a/cfg, slot 'config': it is static but has no staticResource. Candidates: none. "
        "Fix: set staticResource to a Resource's name or namespace/name."
    ]


def test_a_static_slot_asking_for_an_unknown_type_is_an_error() -> None:
    registry = registry_of(
        *TYPES,
        tool("a/cfg", slot("config", "ghost", "static", static="shared")),
        resource("a/shared", "vcs", "git://s"),
    )
    (error,) = registry.validate_tool("a/cfg").errors
    assert "its resourceType 'ghost' is not a registered ResourceType" in error


def test_validation_lists_only_static_slots() -> None:
    registry = registry_of(*TYPES, tool("a/t", slot("a", "vcs"), slot("b", "vcs", "parameter")))
    assert registry.validate_tool("a/t").static_slots == []


# --------------------------------------------------------------------------------------------
# Parameter slots


PARAM = tool("a/run", slot("target", "git-checkout", "parameter"))
TARGET = resource("a/tgt", "fs-directory", "file:///t", uid="u-1")


def parameter(value: str | None, *objects: Object) -> SlotResult:
    params = {} if value is None else {"target": value}
    uses = [use("run", **params)]
    registry = registry_of(*TYPES, PARAM, *objects, agent("a/dev", tools=uses))
    return only_slot(registry)


def test_a_parameter_slot_without_a_value_is_deferred() -> None:
    result = parameter(None, TARGET)
    assert result.state is BindingState.DEFERRED
    assert result.mode is BindingMode.PARAMETER
    assert result.message == (
        "no value in spec.tools[].params, so it is resolved when the tool is invoked"
    )


@pytest.mark.parametrize(
    ("value", "how"),
    [("tgt", "name"), ("a/tgt", "namespace/name"), ("u-1", "uid"), ("file:///t", "URI")],
)
def test_a_parameter_value_names_a_resource_by_name_key_uid_or_uri(value: str, how: str) -> None:
    result = parameter(value, TARGET)
    assert result.state is BindingState.BOUND
    assert result.resource is not None
    assert result.resource.name == "tgt"
    assert result.candidates[0].reason == (
        f"selected: named by its parameter value {value!r} (by {how})"
    )


def test_a_parameter_value_is_tried_as_a_name_before_a_uid() -> None:
    by_uid = resource("a/other", "vcs", "git://o", uid="tgt")
    result = parameter("tgt", TARGET, by_uid)
    assert result.resource is not None
    assert result.resource.name == "tgt"


def test_a_parameter_value_may_not_name_a_resource_in_another_namespace() -> None:
    by_name = parameter("b/far", resource("b/far", "git-checkout", "git://far"))
    assert by_name.resource is None
    assert "its parameter value names another namespace's Resource: Resource 'b/far' is in " in (
        by_name.message
    )
    assert by_name.cause is ErrorCause.MISSING
    far = resource("b/far", "git-checkout", "git://far")
    by_uid = parameter(far.meta.uid, far)
    assert by_uid.resource is None
    assert "names no resource" in by_uid.message  # another namespace's uid is not found


def test_a_parameter_uri_falls_back_to_the_agents_direct_bindings() -> None:
    registry = registry_of(
        *TYPES,
        PARAM,
        agent(
            "a/dev",
            bindings=[("src", "git-checkout", "git://d")],
            tools=[use("run", target="git://d")],
        ),
    )
    result = only_slot(registry)
    assert result.resource == BoundResource(uri="git://d", type="git-checkout", alias="src")


def test_a_parameter_naming_a_direct_binding_in_error_is_an_error() -> None:
    registry = registry_of(
        *TYPES,
        PARAM,
        agent(
            "a/dev", bindings=[("src", "ghost", "git://d")], tools=[use("run", target="git://d")]
        ),
    )
    message = only_slot(registry).message
    assert "'git://d': its direct binding 'src' is in error" in message
    assert "Fix: create a ResourceType named 'ghost', or set the parameter" in message


def test_a_parameter_value_naming_nothing_is_an_error() -> None:
    result = parameter("nope", TARGET)
    assert result.message == (
        "agent a/dev, tool 'run', slot 'target': its parameter value 'nope' names no resource: "
        "it is not the name of a Resource in namespace 'a', a namespace/name, a uid, or the URI "
        "of a Resource in the namespace or of a direct binding. Candidates: none. Fix: set the "
        "parameter to one of those."
    )


def test_a_parameter_uri_shared_by_two_resources_is_ambiguous() -> None:
    twin = resource("a/twin", "fs-directory", "file:///t")
    result = parameter("file:///t", TARGET, twin)
    assert result.state is BindingState.ERROR
    assert "its parameter value 'file:///t' is the URI of 2 resources" in result.message
    assert [c.reason for c in result.candidates] == [
        "another resource also has URI 'file:///t'"
    ] * 2


def test_a_parameter_naming_an_incompatible_resource_is_an_error() -> None:
    result = parameter("bug", resource("a/bug", "issue", "gh://1"))
    assert result.message == (
        "agent a/dev, tool 'run', slot 'target': its parameter value 'bug' (by name) names a "
        "resource that cannot fill it. Candidates: 'gh://1': type 'issue' is neither "
        "'git-checkout' nor lists 'git-checkout' in its parentTypes, directly or through its "
        "parents. Fix: set the parameter to a resource of type "
        "'git-checkout' (or a subtype), or change the slot's resourceType."
    )


def test_a_deferred_slot_asking_for_an_unknown_type_is_still_an_error() -> None:
    registry = registry_of(
        *TYPES, tool("a/run", slot("target", "ghost", "parameter")), agent("a/dev", tools=["run"])
    )
    assert only_slot(registry).state is BindingState.ERROR


# --------------------------------------------------------------------------------------------
# The agent as a whole


def test_tools_that_are_not_registered_are_listed_once_and_reported() -> None:
    registry = registry_of(*TYPES, STATIC, agent("a/dev", tools=["nope", "cfg", "nope"]))
    resolution = registry.resolve("a/dev")
    assert resolution.missing_tools == ["nope"]
    assert not resolution.ok
    assert (
        "agent a/dev: tool 'nope' is not registered in namespace 'a'; create the Tool or "
        "remove it from spec.tools"
    ) in resolution.errors


def test_slots_come_in_spec_order_tool_by_tool() -> None:
    registry = registry_of(
        *TYPES,
        tool("a/t1", slot("z", "vcs", required=False), slot("a", "vcs", required=False)),
        tool("a/t2", slot("m", "vcs", "parameter")),
        agent("a/dev", tools=["t2", "t1"]),
    )
    assert [(s.tool, s.slot) for s in registry.resolve("a/dev").slots] == [
        ("t2", "m"),
        ("t1", "z"),
        ("t1", "a"),
    ]


def test_a_healthy_agent_has_no_errors() -> None:
    registry = registry_of(
        *TYPES,
        tool("a/git", slot("repo", "git-checkout"), slot("target", "vcs", "parameter")),
        agent("a/dev", bindings=[("repo", "fs-directory", "file:///r")], tools=["git"]),
    )
    resolution = registry.resolve("a/dev")
    assert resolution.ok
    assert resolution.agent == "a/dev"


# --------------------------------------------------------------------------------------------
# Resources on their own


def test_a_resource_of_an_unregistered_type_is_invalid() -> None:
    registry = registry_of(resource("a/r", "ghost", "x://1"))
    assert registry.validate_resource("a/r") == [
        "Resource a/r: its type 'ghost' is not a registered ResourceType. Fix: create a "
        "ResourceType named 'ghost', or change spec.type."
    ]


@pytest.mark.parametrize(
    ("uri", "has"),
    # A URI with no scheme at all never gets here: the CRD and the model refuse it.
    [("https://x", "scheme 'https'"), ("GH://1", "scheme 'GH'")],
)
def test_a_uri_scheme_the_type_does_not_list_is_invalid(uri: str, has: str) -> None:
    registry = registry_of(rtype("issue", schemes=["gh", "jira"]), resource("a/r", "issue", uri))
    assert registry.validate_resource("a/r") == [
        f"Resource a/r: its URI {uri!r} has {has}, but ResourceType 'issue' accepts only 'gh', "
        "'jira'. Fix: use a URI with one of those schemes, or change spec.type."
    ]


@pytest.mark.parametrize(("schemes", "uri"), [(["gh"], "gh://1"), ([], "anything:at/all")])
def test_a_uri_scheme_the_type_allows_is_valid(schemes: list[str], uri: str) -> None:
    registry = registry_of(rtype("issue", schemes=schemes), resource("a/r", "issue", uri))
    assert registry.validate_resource("a/r") == []


# --------------------------------------------------------------------------------------------
# Results are built without validation


def test_results_are_what_validating_their_values_gives_and_dump_in_field_order() -> None:
    """Resolution builds its results with ``ResultModel.trusted``: each must equal the model
    validated from its own values, and dump with the same keys in the same order."""
    registry = registry_of(
        *TYPES,
        rtype("doc"),
        labelled("src", "fs-directory", "file:///s", alias="repo"),
        labelled("cfg", "git-checkout", "git://c"),
        resource("a/shared", "vcs", "git://v", attributes={"branch": "main"}),
        tool(
            "a/git",
            slot("repo", "git-checkout"),
            slot("doc", "doc", required=False),
            slot("ghost", "ghost"),
            slot("base", "vcs", "static", static="shared"),
            slot("target", "vcs", "parameter"),
            slot("later", "vcs", "parameter"),
        ),
        agent(
            "a/dev",
            bindings=[("work", "issue", "gh://1"), ("notes", "ghost", "x://n")],
            tools=[use("git", target="cfg"), "missing"],
            selector=GROUP,
        ),
    )
    resolution = registry.resolve("a/dev")
    bindings: list[DirectResult | SlotResult] = [*resolution.direct, *resolution.slots]
    assert {b.state for b in bindings} == set(BindingState)
    results: list[ResultModel] = [
        resolution,
        registry.validate_tool("a/git"),
        *bindings,
        *(c for s in resolution.slots for c in s.candidates),
        *(b.resource for b in bindings if b.resource),
    ]
    for result in results:
        validated = type(result).model_validate(result.model_dump())
        assert validated == result
        dumped = result.model_dump(mode="json", by_alias=True)
        assert list(dumped.items()) == list(
            validated.model_dump(mode="json", by_alias=True).items()
        )
        assert result.model_fields_set == set(type(result).model_fields)


# --------------------------------------------------------------------------------------------
# What clears an error: an object created later (Missing) or a person's change (Conflict)

MISSING, CONFLICT = ErrorCause.MISSING, ErrorCause.CONFLICT


def _direct(*objects: Object) -> DirectResult:
    (result,) = registry_of(*TYPES, *objects).resolve("a/dev").direct
    return result


def _static(*objects: Object) -> SlotResult:
    (result,) = registry_of(*TYPES, *objects).validate_tool("a/cfg").static_slots
    return result


@pytest.mark.parametrize(
    ("result", "cause"),
    [
        pytest.param(
            lambda: contextual(selecting(("work", "issue", "gh://1"))),
            MISSING,
            id="contextual: nothing compatible linked",
        ),
        pytest.param(
            lambda: contextual(
                selecting(("src", "git-checkout", "git://d")),
                labelled("other", "fs-directory", "git://2", alias="o"),
            ),
            CONFLICT,
            id="contextual: several compatible, none named like the slot",
        ),
        pytest.param(
            lambda: only_slot(
                registry_of(*TYPES, tool("a/git", slot("repo", "ghost")), selecting())
            ),
            MISSING,
            id="slot: resourceType not registered",
        ),
        pytest.param(
            lambda: _direct(agent("a/dev", bindings=[("work", "ticket", "gh://1")])),
            MISSING,
            id="direct: tag not registered",
        ),
        pytest.param(
            lambda: _direct(
                agent("a/dev", bindings=[("work", "git-checkout", "gh://1")]),
                resource("a/issue-1", "issue", "gh://1"),
            ),
            CONFLICT,
            id="direct: registered Resource of an incompatible type",
        ),
        pytest.param(
            lambda: _direct(
                agent("a/dev", bindings=[("work", "issue", "gh://1")]),
                resource("a/issue-1", "bug", "gh://1"),
            ),
            MISSING,
            id="direct: registered Resource of an unregistered type",
        ),
        pytest.param(
            lambda: _direct(
                agent("a/dev", bindings=[("work", "issue", "gh://1")]),
                resource("a/one", "issue", "gh://1"),
                resource("a/two", "issue", "gh://1"),
            ),
            CONFLICT,
            id="direct: URI registered twice",
        ),
        pytest.param(lambda: _static(STATIC), MISSING, id="static: Resource missing"),
        pytest.param(
            lambda: _static(STATIC, resource("a/shared", "issue", "gh://1")),
            CONFLICT,
            id="static: Resource of an incompatible type",
        ),
        pytest.param(
            lambda: _static(STATIC, resource("a/shared", "bug", "gh://1")),
            MISSING,
            id="static: Resource of an unregistered type",
        ),
        pytest.param(
            lambda: _static(tool("a/cfg", slot("config", "vcs", "static"))),
            CONFLICT,
            id="static: no staticResource",
        ),
        pytest.param(lambda: parameter("nope", TARGET), MISSING, id="parameter: names nothing"),
        pytest.param(
            lambda: parameter("file:///t", TARGET, resource("a/twin", "fs-directory", "file:///t")),
            CONFLICT,
            id="parameter: URI of two resources",
        ),
        pytest.param(
            lambda: parameter("bug", resource("a/bug", "issue", "gh://1")),
            CONFLICT,
            id="parameter: incompatible resource",
        ),
    ],
)
def test_each_error_says_what_clears_it(
    result: Callable[[], SlotResult | DirectResult], cause: ErrorCause
) -> None:
    got = result()
    assert got.state is BindingState.ERROR
    assert got.cause is cause


def test_results_that_are_not_errors_have_no_cause() -> None:
    assert contextual(selecting(("repo", "git-checkout", "git://d"))).cause is None
    assert parameter(None).cause is None
    assert _direct(agent("a/dev", bindings=[("work", "issue", "gh://1")])).cause is None


def test_an_agent_lists_as_conflicts_only_what_a_person_must_fix() -> None:
    registry = registry_of(
        *TYPES,
        STATIC,
        resource("a/shared", "issue", "gh://1"),
        agent("a/dev", bindings=[("doc", "ticket", "x://1")], tools=["cfg", "nope"]),
    )
    resolution = registry.resolve("a/dev")
    assert len(resolution.errors) == 3  # the tag, the static slot, the missing tool
    assert resolution.conflicts == [resolution.slots[0].message]
    assert registry.validate_tool("a/cfg").conflicts == registry.validate_tool("a/cfg").errors


def test_a_resources_own_errors_say_what_clears_them() -> None:
    registry = registry_of(
        rtype("issue", schemes=["gh"]),
        resource("a/untyped", "ghost", "x://1"),
        resource("a/bad", "issue", "https://x"),
    )
    (untyped,) = registry.validate_resource("a/untyped")
    (bad,) = registry.validate_resource("a/bad")
    assert (untyped.cause, bad.cause) == (MISSING, CONFLICT)
