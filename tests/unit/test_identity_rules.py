"""Rules about a resource's identity (its URI) and the contracts a binding must honour.

Each test here failed before the rule it names was built in.
"""

from __future__ import annotations

import pytest
from bindery_session.wire import BindingState
from pydantic import ValidationError

from controller.domain.models import AgentSpecSpec, LabelSelector
from controller.domain.registry import Affected
from controller.domain.results import BoundResource
from tests.unit.domain_objects import agent, registry_of, resource, rtype, slot, tool, use

ISSUE = "github-issue://example/project/7"
TYPES = (
    rtype("vcs"),
    rtype("git-checkout", "vcs"),
    rtype("github-issue", schemes=["github-issue"]),
)


# --------------------------------------------------------------------------------------------
# One URI is one resource


def test_a_uri_bound_under_two_roles_is_one_candidate() -> None:
    registry = registry_of(
        *TYPES,
        tool("a/tracker", slot("issue", "github-issue")),
        agent(
            "a/dev",
            bindings=[("work", "github-issue", ISSUE), ("review", "github-issue", ISSUE)],
            tools=["tracker"],
        ),
    )
    (result,) = registry.resolve("a/dev").slots
    assert result.state is BindingState.BOUND, result.message
    assert [(c.uri, c.reason) for c in result.candidates] == [
        (ISSUE, "selected: the only compatible linked resource")
    ]
    assert result.resource == BoundResource(uri=ISSUE, type="github-issue", alias="work")


def test_a_uri_under_two_roles_is_matched_by_either_name_and_bound_as_the_role_that_fits() -> None:
    registry = registry_of(
        *TYPES,
        rtype("worktree"),
        tool("a/t", slot("review", "github-issue"), slot("tree", "worktree")),
        agent(
            "a/dev",
            bindings=[
                ("work", "github-issue", ISSUE),
                ("review", "github-issue", ISSUE),
                ("other", "github-issue", "github-issue://example/project/8"),
                # The same URI under a tag of another type: the one resource can fill both.
                ("tree", "worktree", ISSUE),
            ],
            tools=["t"],
        ),
    )
    review, tree = registry.resolve("a/dev").slots
    assert review.state is BindingState.BOUND, review.message
    assert review.resource == BoundResource(uri=ISSUE, type="github-issue", alias="review")
    assert [c.reason for c in review.candidates] == [
        "selected: its binding name equals the slot name",
        "binding name 'other' != slot name 'review'",
    ]
    assert tree.state is BindingState.BOUND, tree.message
    assert tree.resource == BoundResource(uri=ISSUE, type="worktree", alias="tree")


def test_a_parameter_uri_bound_under_two_roles_names_one_resource() -> None:
    registry = registry_of(
        *TYPES,
        tool("a/tracker", slot("target", "github-issue", "parameter")),
        agent(
            "a/dev",
            bindings=[("work", "github-issue", ISSUE), ("review", "github-issue", ISSUE)],
            tools=[use("tracker", target=ISSUE)],
        ),
    )
    (result,) = registry.resolve("a/dev").slots
    assert result.state is BindingState.BOUND, result.message
    assert result.resource is not None
    assert result.resource.uri == ISSUE


# --------------------------------------------------------------------------------------------
# An alias survives a direct binding


def test_a_registered_resource_bound_directly_keeps_its_alias_as_a_name() -> None:
    registry = registry_of(
        *TYPES,
        tool("a/git", slot("repo", "git-checkout")),
        resource("a/main", "git-checkout", "git://main", alias="repo"),
        resource("a/fork", "git-checkout", "git://fork", labels={"team": "x"}),
        agent(
            "a/dev",
            bindings=[("src", "git-checkout", "git://main")],
            tools=["git"],
            selector=LabelSelector(match_labels={"team": "x"}),
        ),
    )
    (result,) = registry.resolve("a/dev").slots
    assert result.state is BindingState.BOUND, result.message
    assert result.resource is not None
    assert (result.resource.uri, result.resource.alias) == ("git://main", "src")
    assert [c.reason for c in result.candidates] == [
        "name 'fork' != slot name 'repo'",
        "selected: its alias equals the slot name",
    ]


def test_a_registered_resource_bound_directly_is_matched_by_its_name_too() -> None:
    registry = registry_of(
        *TYPES,
        tool("a/git", slot("main", "git-checkout")),
        resource("a/main", "git-checkout", "git://main"),
        agent(
            "a/dev",
            bindings=[("src", "git-checkout", "git://main"), ("dst", "git-checkout", "git://x")],
            tools=["git"],
        ),
    )
    (result,) = registry.resolve("a/dev").slots
    assert result.state is BindingState.BOUND, result.message
    assert result.resource is not None
    assert result.resource.uri == "git://main"


# --------------------------------------------------------------------------------------------
# A direct binding honours its type's contract


def test_a_direct_binding_with_a_scheme_its_tag_refuses_is_an_error() -> None:
    registry = registry_of(
        *TYPES, agent("a/dev", bindings=[("work", "github-issue", "worktree://dev/main")])
    )
    (direct,) = registry.resolve("a/dev").direct
    assert direct.state is BindingState.ERROR
    assert direct.resource is None
    assert direct.message == (
        "agent a/dev, direct binding 'work': its URI 'worktree://dev/main' has scheme "
        "'worktree', but its tag, ResourceType 'github-issue', accepts only 'github-issue'. "
        "Fix: use a URI with one of those schemes, or change the tag to a type that accepts it."
    )


def test_a_direct_binding_with_another_scheme_is_refused_by_a_tag_that_lists_schemes() -> None:
    # (A URI without any scheme is refused by the model itself, at admission and in KDL.)
    bindings = [("work", "github-issue", "gitlab-issue://x/1")]
    registry = registry_of(*TYPES, agent("a/dev", bindings=bindings))
    (direct,) = registry.resolve("a/dev").direct
    assert direct.state is BindingState.ERROR
    assert "'gitlab-issue'" in direct.message
    assert "github-issue" in direct.message


def test_a_direct_binding_with_an_accepted_scheme_or_an_open_tag_is_bound() -> None:
    registry = registry_of(
        *TYPES,
        agent("a/dev", bindings=[("work", "github-issue", ISSUE), ("src", "vcs", "any:thing")]),
    )
    assert [d.state for d in registry.resolve("a/dev").direct] == [BindingState.BOUND] * 2


def test_changing_a_tags_schemes_re_resolves_the_agents_tagging_it() -> None:
    registry = registry_of(*TYPES, agent("a/dev", bindings=[("work", "vcs", "worktree://x")]))
    assert registry.resolve("a/dev").ok
    affected = registry.upsert_type(rtype("vcs", schemes=["git"]))
    assert affected.agents == {"a/dev"}
    assert not registry.resolve("a/dev").ok


# --------------------------------------------------------------------------------------------
# The domain model refuses a second work binding


def test_the_model_refuses_a_second_work_binding() -> None:
    twice = {
        "resources": [
            {"name": "work", "tag": "github-issue", "uri": ISSUE},
            {"name": "work", "tag": "github-issue", "uri": "github-issue://example/project/8"},
        ]
    }
    with pytest.raises(ValidationError) as caught:
        AgentSpecSpec.model_validate(twice)
    assert (
        "spec.resources has a second binding named 'work': an agent has at most one work "
        "binding; remove or rename one of them"
    ) in str(caught.value)


def test_the_model_refuses_any_repeated_binding_name() -> None:
    twice = {"resources": [{"name": "src", "tag": "vcs", "uri": "a:1"}] * 2}
    with pytest.raises(ValidationError, match="binding names are unique"):
        AgentSpecSpec.model_validate(twice)


# --------------------------------------------------------------------------------------------
# Duplicate URI registrations are reported


def test_two_resources_with_one_uri_both_say_so_and_name_each_other() -> None:
    registry = registry_of(
        *TYPES,
        resource("a/one", "vcs", "git://same"),
        resource("a/two", "vcs", "git://same"),
        resource("b/far", "vcs", "git://same"),  # another namespace: another resource
    )
    fix = "Fix: delete all but one of the Resources with this URI (spec.uri cannot be changed)."
    assert registry.validate_resource("a/one") == [
        "Resource a/one: its URI 'git://same' is registered twice in namespace 'a': Resource "
        "a/two has it too, and a URI identifies one resource, so agents binding it cannot tell "
        f"which one it is. {fix}"
    ]
    assert registry.validate_resource("a/two") == [
        "Resource a/two: its URI 'git://same' is registered twice in namespace 'a': Resource "
        "a/one has it too, and a URI identifies one resource, so agents binding it cannot tell "
        f"which one it is. {fix}"
    ]
    assert registry.validate_resource("b/far") == []


def test_three_registrations_of_one_uri_name_the_two_others() -> None:
    registry = registry_of(*TYPES, *(resource(f"a/r{i}", "vcs", "git://same") for i in range(3)))
    (error,) = registry.validate_resource("a/r1")
    assert "is registered 3 times in namespace 'a': Resources a/r0, a/r2 have it too" in error


def test_a_duplicate_uri_is_reported_next_to_a_scheme_error() -> None:
    registry = registry_of(
        *TYPES,
        resource("a/one", "github-issue", "gh://1"),
        resource("a/two", "github-issue", "gh://1"),
    )
    scheme, duplicate = registry.validate_resource("a/one")
    assert "accepts only 'github-issue'" in scheme
    assert "registered twice" in duplicate


def test_registering_or_deleting_a_second_resource_with_a_uri_reaches_the_first() -> None:
    registry = registry_of(*TYPES, resource("a/one", "vcs", "git://same"))
    assert registry.upsert_resource(resource("a/two", "vcs", "git://same")) == Affected(
        resources=frozenset({"a/one", "a/two"})
    )
    assert registry.delete_resource("a", "two") == Affected(resources=frozenset({"a/one"}))
    assert registry.validate_resource("a/one") == []
    # A Resource re-created under the same name with another URI leaves its old peers.
    registry.upsert_resource(resource("a/two", "vcs", "git://same"))
    moved = registry.upsert_resource(resource("a/two", "vcs", "git://other", uid="new"))
    assert moved.resources == {"a/one", "a/two"}
    assert registry.validate_resource("a/one") == []
