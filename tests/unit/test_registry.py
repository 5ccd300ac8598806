"""The registry's bookkeeping: what each change affects, look-ups, and cache invalidation."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from bindery_session.wire import BindingState

from controller.domain.models import LabelSelector, LabelSelectorRequirement
from controller.domain.multiindex import MultiIndex
from controller.domain.registry import Affected, Registry
from controller.domain.results import ErrorCause
from tests.unit.domain_objects import agent, registry_of, resource, rtype, slot, tool, use

REPO = Path(__file__).resolve().parents[2]
TEAM = LabelSelector(match_labels={"team": "x"})


def world() -> Registry:
    """Two agents in ``a`` reading a few Resources in different ways, one agent in ``b``."""
    return registry_of(
        rtype("vcs"),
        rtype("git-checkout", "vcs"),
        rtype("fs-directory", "git-checkout"),
        rtype("issue"),
        resource("a/repo", "git-checkout", "git://repo", labels={"team": "x"}),
        resource("a/cfg", "fs-directory", "file:///cfg"),
        resource("a/tgt", "fs-directory", "file:///tgt"),
        resource("a/idle", "issue", "gh://idle"),
        resource("b/far", "vcs", "git://far"),
        tool("a/git", slot("repo", "vcs"), slot("cfg", "git-checkout", "static", static="cfg")),
        tool("a/run", slot("target", "vcs", "parameter")),
        agent(
            "a/dev",
            bindings=[("work", "issue", "gh://1")],
            tools=["git", use("run", target="tgt")],
            selector=TEAM,
        ),
        agent("a/ops", tools=[use("run", target="b/far")]),
        agent("b/dev", bindings=[("work", "vcs", "git://far")]),
    )


def resolved(registry: Registry) -> Registry:
    """The registry after every agent was resolved, as after a reconcile pass."""
    for key in ("a/dev", "a/ops", "b/dev", "a/triager", "a/lost", "a/fixer", "a/tagger"):
        if registry.agent(key) is not None:
            registry.resolve(key)
    return registry


def agents(*keys: str) -> Affected:
    return Affected(agents=frozenset(keys))


# --------------------------------------------------------------------------------------------
# Affected


def test_affected_combines_and_is_falsy_when_empty() -> None:
    left = Affected(agents=frozenset({"a/x"}), types=frozenset({"t"}))
    right = Affected(tools=frozenset({"a/t"}), resources=frozenset({"a/r"}))
    assert left | right == Affected(
        agents=frozenset({"a/x"}),
        tools=frozenset({"a/t"}),
        resources=frozenset({"a/r"}),
        types=frozenset({"t"}),
    )
    assert not Affected()
    assert right


# --------------------------------------------------------------------------------------------
# Unchanged objects cost nothing


def test_upserting_an_unchanged_object_affects_nothing_but_keeps_the_new_metadata() -> None:
    registry = world()
    newer = agent(
        "a/dev",
        bindings=[("work", "issue", "gh://1")],
        tools=["git", use("run", target="tgt")],
        selector=TEAM,
        generation=7,
    )
    assert registry.upsert_agent(newer) == Affected()
    agent_obj = registry.agent("a/dev")
    assert agent_obj is not None
    assert agent_obj.meta.generation == 7
    assert registry.upsert_type(rtype("issue")) == Affected()
    assert registry.upsert_tool(tool("a/run", slot("target", "vcs", "parameter"))) == Affected()
    same = resource("a/repo", "git-checkout", "git://repo", labels={"team": "x"})
    assert registry.upsert_resource(same) == Affected()


# --------------------------------------------------------------------------------------------
# Resources


def test_a_new_resource_affects_itself_and_the_agents_that_would_read_it() -> None:
    registry = world()
    affected = registry.upsert_resource(resource("a/work", "issue", "gh://1"))
    assert affected == Affected(agents=frozenset({"a/dev"}), resources=frozenset({"a/work"}))


def test_a_resource_change_reaches_readers_through_every_index() -> None:
    registry = world()
    changed = {
        "a/repo": ({"a/dev"}, set()),  # selected
        "a/cfg": ({"a/dev"}, {"a/git"}),  # static slot of a tool a/dev uses
        "a/tgt": ({"a/dev"}, set()),  # parameter by name
        "b/far": ({"a/ops", "b/dev"}, set()),  # parameter by namespace/name; direct URI
        "a/idle": (set(), set()),
    }
    for key, (readers, tools) in changed.items():
        old = registry.resource(key)
        assert old is not None
        new = old.model_copy(update={"spec": old.spec.model_copy(update={"alias": "new"})})
        assert registry.upsert_resource(new) == Affected(
            agents=frozenset(readers), tools=frozenset(tools), resources=frozenset({key})
        ), key


def test_a_parameter_reads_a_resource_by_uid_and_by_uri() -> None:
    registry = registry_of(
        rtype("vcs"),
        tool("a/run", slot("target", "vcs", "parameter")),
        agent("a/by-uid", tools=[use("run", target="u-1")]),
        agent("a/by-uri", tools=[use("run", target="git://x")]),
        agent("b/by-uri", tools=[use("run", target="git://x")]),
    )
    affected = registry.upsert_resource(resource("a/x", "vcs", "git://x", uid="u-1"))
    assert affected.agents == {"a/by-uid", "a/by-uri"}


def test_relabelling_a_resource_affects_the_agents_it_leaves_and_joins() -> None:
    registry = world()
    registry.upsert_agent(agent("a/other", selector=LabelSelector(match_labels={"team": "y"})))
    moved = resource("a/repo", "git-checkout", "git://repo", labels={"team": "y"})
    assert registry.upsert_resource(moved).agents == {"a/dev", "a/other"}
    assert [r.meta.name for r in registry.selected_resources("a/other")] == ["repo"]
    assert registry.selected_resources("a/dev") == []


def test_deleting_a_resource_affects_its_readers_but_not_itself() -> None:
    registry = world()
    assert registry.delete_resource("a", "cfg") == Affected(
        agents=frozenset({"a/dev"}), tools=frozenset({"a/git"})
    )
    assert registry.resource("a/cfg") is None
    assert registry.validate_tool("a/git").errors != []
    assert registry.delete_resource("a", "cfg") == Affected()


def test_a_recreated_resource_is_found_by_its_new_uid_only() -> None:
    registry = world()
    registry.upsert_resource(resource("a/tgt", "fs-directory", "file:///tgt", uid="new"))
    assert registry.resource_by_uid("uid-a-tgt") is None
    found = registry.resource_by_uid("new")
    assert found is not None
    assert found.meta.key == "a/tgt"


def test_a_resource_without_a_uid_is_not_found_by_an_empty_one() -> None:
    registry = registry_of(resource("a/r", "t", "u://1", uid=""))
    assert registry.resource_by_uid("") is None
    assert registry.delete_resource("a", "r") == Affected()


def test_resources_with_a_uri_are_listed_by_name_within_the_namespace() -> None:
    registry = registry_of(
        resource("a/z", "t", "u://1"), resource("a/b", "t", "u://1"), resource("c/a", "t", "u://1")
    )
    assert [r.meta.key for r in registry.resources_with_uri("a", "u://1")] == ["a/b", "a/z"]
    assert registry.resources_with_uri("a", "u://2") == []


# --------------------------------------------------------------------------------------------
# Selectors in both directions


def test_selectors_with_only_negative_terms_still_see_new_resources() -> None:
    registry = registry_of(
        agent(
            "a/dev",
            selector=LabelSelector(
                match_expressions=[LabelSelectorRequirement(key="tier", operator="DoesNotExist")]
            ),
        ),
        agent(
            "a/exists",
            selector=LabelSelector(
                match_expressions=[LabelSelectorRequirement(key="tier", operator="Exists")]
            ),
        ),
        agent(
            "a/in",
            selector=LabelSelector(
                match_expressions=[
                    LabelSelectorRequirement(key="tier", operator="In", values=["a", "b"])
                ]
            ),
        ),
    )
    assert registry.upsert_resource(resource("a/plain", "t", "u://1")).agents == {"a/dev"}
    tiered = resource("a/tiered", "t", "u://2", labels={"tier": "b"})
    assert registry.upsert_resource(tiered).agents == {"a/exists", "a/in"}


def test_an_agent_selecting_resources_uses_the_rarest_label_as_its_anchor() -> None:
    registry = registry_of(
        *[
            resource(f"a/r{i}", "t", f"u://{i}", labels={"env": "prod", "team": f"t{i % 3}"})
            for i in range(9)
        ],
        agent("a/dev", selector=LabelSelector(match_labels={"env": "prod", "team": "t1"})),
    )
    assert [r.meta.name for r in registry.selected_resources("a/dev")] == ["r1", "r4", "r7"]
    unrelated = resource("a/new", "t", "u://new", labels={"env": "prod", "team": "t2"})
    assert registry.upsert_resource(unrelated).agents == frozenset()


def test_changing_an_agents_selector_relinks_it() -> None:
    registry = world()
    registry.upsert_agent(agent("a/dev", selector=LabelSelector(match_labels={"team": "y"})))
    assert registry.selected_resources("a/dev") == []
    assert registry.upsert_resource(
        resource("a/y", "vcs", "git://y", labels={"team": "y"})
    ).agents == {"a/dev"}


# --------------------------------------------------------------------------------------------
# ResourceTypes


def test_a_description_change_affects_only_the_type_itself() -> None:
    registry = world()
    described = rtype("issue").model_copy(
        update={"spec": rtype("issue").spec.model_copy(update={"description": "An issue."})}
    )
    assert registry.upsert_type(described) == Affected(types=frozenset({"issue"}))


def test_a_uri_scheme_change_affects_the_types_resources_and_the_agents_tagging_it() -> None:
    registry = world()
    # a/dev's work binding is tagged "issue": its URI is checked against the type's schemes.
    assert registry.upsert_type(rtype("issue", schemes=["gh"])) == Affected(
        types=frozenset({"issue"}), resources=frozenset({"a/idle"}), agents=frozenset({"a/dev"})
    )


def test_a_parent_change_affects_descendants_and_the_agents_whose_checks_change() -> None:
    registry = world()
    registry.upsert_type(rtype("tracker"))
    registry.upsert_tool(tool("a/triage", slot("ticket", "tracker", required=False)))
    registry.upsert_agent(
        agent("a/triager", bindings=[("work", "issue", "gh://t")], tools=["triage"])
    )
    affected = resolved(registry).upsert_type(rtype("issue", "tracker"))
    assert affected.types == {"issue"}
    assert affected.agents == {"a/triager"}  # reads an issue and asks for a tracker
    assert registry.resolve("a/triager").slots[0].state is BindingState.BOUND


def test_a_parent_change_that_fits_no_slot_leaves_agents_rejecting_the_type_alone() -> None:
    registry = world()
    registry.upsert_type(rtype("tracker"))
    registry.upsert_tool(tool("a/git2", slot("repo", "git-checkout")))
    registry.upsert_agent(agent("a/lost", bindings=[("work", "issue", "gh://t")], tools=["git2"]))
    before = registry.resolve("a/lost")
    assert "type 'issue' is neither 'git-checkout' nor lists" in before.errors[0]
    affected = registry.upsert_type(rtype("issue", "tracker"))
    assert "a/lost" not in affected.agents  # it examines an issue, but asks for no tracker
    assert registry.resolve("a/lost") == before


def test_a_parent_change_reaches_only_agents_that_checked_the_type_against_a_gained_one() -> None:
    registry = world()
    registry.upsert_type(rtype("tracker"))
    registry.upsert_resource(resource("a/bug", "issue", "gh://bug"))
    registry.upsert_tool(tool("a/file", slot("ticket", "tracker", "parameter")))
    registry.upsert_tool(tool("a/triage", slot("ticket", "tracker", required=False)))
    issue = ("work", "issue", "gh://t")
    registry.upsert_agent(agent("a/later", bindings=[issue], tools=["file"]))
    registry.upsert_agent(agent("a/filer", bindings=[issue], tools=[use("file", ticket="bug")]))
    registry.upsert_agent(agent("a/triager", bindings=[issue], tools=["triage"]))
    for key in ("a/later", "a/filer", "a/triager"):
        registry.resolve(key)
    affected = resolved(registry).upsert_type(rtype("issue", "tracker"))
    # a/later examines an issue and asks for a tracker, but only in a slot left deferred.
    assert affected.agents == {"a/filer", "a/triager"}


def test_a_parent_change_reaches_tools_whose_static_slots_check_it_and_their_users() -> None:
    registry = world()
    registry.upsert_type(rtype("tracker"))
    registry.upsert_type(rtype("issue", "tracker"))
    registry.upsert_resource(resource("a/bug", "issue", "gh://bug"))
    registry.upsert_tool(tool("a/pin", slot("ticket", "tracker", "static", static="bug")))
    registry.upsert_tool(tool("a/keep", slot("ticket", "issue", "static", static="bug")))
    registry.upsert_agent(agent("a/pinner", tools=["pin"]))
    registry.upsert_agent(agent("a/keeper", tools=["keep"]))
    for key in ("a/pinner", "a/keeper"):
        assert registry.resolve(key).ok  # the Tool's own bound static slot, shared
    affected = resolved(registry).upsert_type(rtype("issue"))
    assert affected.tools == {"a/pin"}  # a/keep asks for an issue, which it still is
    assert affected.agents == {"a/pinner"}  # its result holds a/pin's static slot
    assert registry.validate_tool("a/pin").errors
    assert not registry.resolve("a/pinner").ok


def test_an_agent_not_resolved_since_it_was_affected_is_assumed_to_read_every_type() -> None:
    registry = world()
    registry.upsert_type(rtype("tracker"))
    assert registry.upsert_type(rtype("issue", "tracker")).agents == {"a/dev", "a/ops", "b/dev"}
    resolved(registry)
    assert registry.upsert_type(rtype("issue")).agents == frozenset()
    registry.upsert_agent(agent("a/ops"))
    assert registry.upsert_type(rtype("issue", "tracker")).agents == {"a/ops"}


def test_a_parent_change_reaches_types_below_it() -> None:
    registry = world()
    registry.upsert_type(rtype("root"))
    assert registry.upsert_type(rtype("vcs", "root")).types == {
        "vcs",
        "git-checkout",
        "fs-directory",
    }


def test_a_parent_change_that_keeps_the_ancestors_affects_no_agent() -> None:
    registry = resolved(world())
    affected = registry.upsert_type(rtype("fs-directory", "git-checkout", "vcs"))
    assert affected == Affected(types=frozenset({"fs-directory"}))


def test_creating_a_missing_type_affects_everything_asking_for_it() -> None:
    registry = world()
    registry.upsert_tool(
        tool("a/fix", slot("bug", "bug"), slot("cfg", "bug", "static", static="cfg"))
    )
    registry.upsert_agent(agent("a/fixer", tools=["fix"]))
    registry.upsert_agent(agent("a/tagger", bindings=[("work", "bug", "gh://b")]))
    registry.upsert_resource(resource("a/bug", "bug", "gh://bug"))
    affected = resolved(registry).upsert_type(rtype("bug", "issue"))
    assert affected.agents == {"a/fixer", "a/tagger"}
    assert affected.tools == {"a/fix"}
    assert affected.resources == {"a/bug"}
    assert affected.types == {"bug"}


def test_deleting_a_type_affects_its_readers_and_descendants_but_not_itself() -> None:
    registry = resolved(world())
    affected = registry.delete_type("git-checkout")
    assert affected.types == {"fs-directory"}
    assert affected.resources == {"a/repo"}
    assert affected.agents == {"a/dev"}  # a/ops reads only a vcs and asks only for one
    assert affected.tools == {"a/git"}
    assert registry.delete_type("git-checkout") == Affected()


# --------------------------------------------------------------------------------------------
# Tools and agents


def test_a_tool_change_affects_itself_and_its_users() -> None:
    registry = world()
    changed = tool("a/run", slot("target", "vcs", "parameter", required=False))
    assert registry.upsert_tool(changed) == Affected(
        agents=frozenset({"a/dev", "a/ops"}), tools=frozenset({"a/run"})
    )
    assert registry.upsert_tool(tool("a/new")) == Affected(tools=frozenset({"a/new"}))


def test_a_tool_named_before_it_exists_affects_its_waiting_users() -> None:
    registry = registry_of(agent("a/dev", tools=["later"]))
    assert registry.resolve("a/dev").missing_tools == ["later"]
    assert registry.upsert_tool(tool("a/later")).agents == {"a/dev"}
    assert registry.resolve("a/dev").missing_tools == []


def test_deleting_a_tool_affects_its_users_only() -> None:
    registry = world()
    assert registry.delete_tool("a", "run") == agents("a/dev", "a/ops")
    assert registry.resolve("a/ops").missing_tools == ["run"]
    assert registry.delete_tool("a", "run") == Affected()
    with pytest.raises(KeyError):
        registry.validate_tool("a/run")


def test_an_agent_change_affects_only_that_agent_and_a_deletion_nothing() -> None:
    registry = world()
    assert registry.upsert_agent(agent("a/dev")) == agents("a/dev")
    assert registry.delete_agent("a", "dev") == Affected()
    assert registry.agent("a/dev") is None
    assert registry.delete_agent("a", "dev") == Affected()
    assert registry.upsert_resource(resource("a/repo", "vcs", "git://repo")).agents == frozenset()


def test_unknown_keys_are_key_errors() -> None:
    registry = Registry()
    with pytest.raises(KeyError):
        registry.resolve("a/ghost")
    with pytest.raises(KeyError):
        registry.validate_tool("a/ghost")
    with pytest.raises(KeyError):
        registry.validate_resource("a/ghost")
    assert registry.tool("a/ghost") is None
    assert registry.resource_type("ghost") is None


# --------------------------------------------------------------------------------------------
# Cached pieces follow their sources


def test_cached_tool_validations_and_resources_are_refreshed_by_changes() -> None:
    registry = world()
    assert registry.validate_tool("a/git").errors == []
    registry.upsert_resource(resource("a/cfg", "issue", "file:///cfg"))
    assert registry.validate_tool("a/git").errors != []
    registry.upsert_resource(
        resource("a/repo", "vcs", "git://repo", alias="mine", labels={"team": "x"})
    )
    bound = registry.resolve("a/dev").slots[0].resource
    assert bound is not None
    assert bound.alias == "mine"


# --------------------------------------------------------------------------------------------
# MultiIndex


def test_a_multi_index_keeps_lone_values_bare_and_drops_empty_keys() -> None:
    index: MultiIndex[str, str] = MultiIndex()
    index.add("k", "a")
    index.add("k", "a")
    assert index.get("k") == {"a"}
    index.add("k", "b")
    assert index.get("k") == {"a", "b"}
    assert index.count("k") == 2
    index.discard("k", "zzz")
    index.discard("k", "a")
    assert index.get("k") == {"b"}
    index.discard("k", "zzz")
    assert index.get("k") == {"b"}
    index.discard("k", "b")
    index.discard("gone", "b")
    assert index.get("k") == frozenset()
    assert index.count("k") == 0


# --------------------------------------------------------------------------------------------
# The benchmark still runs


def test_the_benchmark_runs_at_a_tiny_scale_and_prints_its_figures() -> None:
    run = subprocess.run(
        [sys.executable, "-m", "bench.bench_resolve", "--scale", "0.001"],
        cwd=REPO,
        capture_output=True,
        text=True,
        check=True,
        timeout=120,
    )
    for figure in (
        "cold resolution of all agents",
        "incremental, one resource",
        "incremental, one type",
        "incremental, one tool",
        "type chain of 400 registered child-first",
        "peak memory",
    ):
        assert figure in run.stdout
    assert run.stdout.count("ratio ") == 6


def test_an_object_of_no_registered_kind_is_refused() -> None:
    with pytest.raises(TypeError, match=r"^not a registered kind: str$"):
        Registry().upsert("team/alice")  # type: ignore[arg-type]


def test_a_tool_whose_contextual_or_parameter_slot_asks_for_an_unregistered_type_is_missing() -> (
    None
):
    """Not only static slots: a slot of any binding asking for a type nobody registered can never
    be filled, so the Tool says so (a dependency the next apply brings), and it is checked again
    when the type appears."""
    registry = registry_of(
        rtype("vcs"),
        tool("a/lint", slot("repo", "ghost"), slot("target", "phantom", "parameter")),
    )
    validation = registry.validate_tool("a/lint")
    assert validation.static_valid
    assert [s.slot for s in validation.unregistered_slots] == ["repo", "target"]
    assert all(s.cause is ErrorCause.MISSING for s in validation.unregistered_slots)
    (repo, target) = validation.errors
    assert "tool a/lint, slot 'repo'" in repo
    assert "'ghost' is not a registered ResourceType" in repo
    assert "create a ResourceType named 'ghost'" in repo
    assert "'phantom'" in target

    assert "a/lint" in registry.upsert_type(rtype("ghost")).tools
    assert [s.slot for s in registry.validate_tool("a/lint").unregistered_slots] == ["target"]
    assert "a/lint" in registry.upsert_type(rtype("phantom")).tools
    assert registry.validate_tool("a/lint").errors == []
    assert "a/lint" in registry.delete_type("ghost").tools
    assert registry.validate_tool("a/lint").errors != []
