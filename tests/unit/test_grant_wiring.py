"""ResourceGrants wired into resolution: a Tool's static slot, an agent's parameter value and an
agent's resource selector reach another namespace's Resource only by its owner's grant, the bound
resource names that grant, and a change to a grant (or to a referrer's Namespace labels)
re-resolves exactly the referrers that consulted it."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml
from bindery_session.wire import BindingState

from controller.domain.grants import ResourceGrantObject, ResourceGrantSpec, parse_grant
from controller.domain.models import ObjectMeta, ResourceSelector, parse_object
from controller.domain.registry import Affected, Registry
from controller.domain.results import ErrorCause, SlotResult
from tests.unit.domain_objects import agent, registry_of, resource, rtype, slot, tool, use

TYPES = (rtype("config"), rtype("vcs"))
SHARED = resource("local/shared-config", "config", "file:///etc/shared", labels={"share": "all"})
PRIVATE = resource("local/private", "config", "file:///etc/private")
TEAMS = ("team-a", "team-b", "team-c")


def grant(
    name: str, namespace: str = "local", from_: list[Any] | None = None, **spec: Any
) -> ResourceGrantObject:
    """A grant in ``namespace``: by default from the three teams, of local/shared-config."""
    admitted = from_ if from_ is not None else [{"namespace": t} for t in TEAMS]
    body = {"from": admitted, "to": [{"name": "shared-config"}]} | spec
    meta = ObjectMeta(name=name, namespace=namespace, generation=1)
    return ResourceGrantObject(meta=meta, spec=ResourceGrantSpec.model_validate(body))


def static_tool(namespace: str, ref: str = "local/shared-config") -> Any:
    return tool(f"{namespace}/reader", slot("config", "config", "static", static=ref))


def team_registry(*extra: Any) -> Registry:
    """Three teams, each with a Tool whose static slot names local/shared-config and an agent
    using it, plus ``extra``."""
    objects: list[Any] = [*TYPES, SHARED, PRIVATE]
    for team in TEAMS:
        objects += [static_tool(team), agent(f"{team}/dev", tools=["reader"])]
    return registry_of(*objects, *extra)


def resolve_all(registry: Registry, agents: list[str]) -> dict[str, SlotResult]:
    """Resolve every agent (as a reconcile pass does), and return each one's first slot."""
    return {key: registry.resolve(key).slots[0] for key in agents}


AGENTS = [f"{t}/dev" for t in TEAMS]


def test_a_static_slot_across_namespaces_is_refused_without_a_grant() -> None:
    registry = team_registry()
    for key, result in resolve_all(registry, AGENTS).items():
        team = key.partition("/")[0]
        assert result.state is BindingState.ERROR
        assert result.resource is None
        assert "its staticResource names another namespace's Resource" in result.message
        assert f"lets namespace {team!r} bind it by static" in result.message
        # The grant is missing, not wrong: the owner's next apply admits it (Reconciling).
        assert result.cause is ErrorCause.MISSING
        # Said once: no clause of the refusal repeats in its message.
        assert result.message.count("is in namespace") == 1
        assert f"spec.from: [{{namespace: {team}}}]" in result.message
        assert "spec.to: [{name: shared-config}]" in result.message


def test_the_refusal_says_the_same_whether_or_not_the_target_exists() -> None:
    registry = team_registry(static_tool("team-d", "local/absent"))
    (absent,) = registry.validate_tool("team-d/reader").static_slots
    present = registry.validate_tool("team-a/reader").static_slots[0]
    shown = present.message.replace("team-a", "team-d").replace("shared-config", "absent")
    assert absent.message == shown
    assert absent.cause == present.cause


def test_a_grant_binds_the_shared_resource_and_is_recorded() -> None:
    registry = team_registry()
    resolve_all(registry, AGENTS)
    affected = registry.upsert_grant(grant("share-config"))
    assert affected.agents == frozenset(AGENTS)
    assert affected.tools == frozenset(f"{t}/reader" for t in TEAMS)
    for result in resolve_all(registry, AGENTS).values():
        assert result.state is BindingState.BOUND
        assert result.resource is not None
        assert (result.resource.namespace, result.resource.name) == ("local", "shared-config")
        assert result.resource.grant == "local/share-config"


def test_a_resource_in_the_own_namespace_records_no_grant() -> None:
    registry = registry_of(
        *TYPES, resource("team-a/own", "config", "file:///own"), static_tool("team-a", "own")
    )
    (result,) = registry.validate_tool("team-a/reader").static_slots
    assert result.resource is not None
    assert result.resource.grant == ""
    dumped = result.resource.model_dump(by_alias=True, exclude_defaults=True)
    assert "grant" not in dumped


def test_revoking_a_grant_re_resolves_exactly_its_users() -> None:
    bystander = tool("team-z/reader", slot("config", "config", "static", static="elsewhere/x"))
    local_only = agent("local/ops", tools=["reader"])
    registry = team_registry(
        grant("share-config"),
        bystander,
        agent("team-z/dev", tools=["reader"]),
        static_tool("local", "shared-config"),
        local_only,
    )
    resolve_all(registry, [*AGENTS, "team-z/dev", "local/ops"])
    affected = registry.delete_grant("local", "share-config")
    assert affected.agents == frozenset(AGENTS)
    assert affected.tools == frozenset(f"{t}/reader" for t in TEAMS)
    for result in resolve_all(registry, AGENTS).values():
        assert result.state is BindingState.ERROR
        assert result.resource is None
    assert registry.delete_grant("local", "share-config") == Affected()


def test_an_unchanged_grant_affects_nothing() -> None:
    registry = team_registry(grant("share-config"))
    resolve_all(registry, AGENTS)
    assert registry.upsert_grant(grant("share-config")) == Affected()


def test_a_grant_elsewhere_affects_no_one() -> None:
    registry = team_registry()
    resolve_all(registry, AGENTS)
    assert registry.upsert_grant(grant("share", namespace="platform")) == Affected()


def test_a_grant_in_the_referrers_own_namespace_cannot_share_anothers_resources() -> None:
    forged = grant("steal", namespace="team-a")
    registry = team_registry(forged)
    (result,) = registry.validate_tool("team-a/reader").static_slots
    assert result.state is BindingState.ERROR
    assert "no ResourceGrant there lets namespace 'team-a' bind it" in result.message


def test_a_grant_limited_to_parameters_does_not_admit_static_slots() -> None:
    registry = team_registry(grant("params", uses=["parameter"]))
    (result,) = registry.validate_tool("team-a/reader").static_slots
    assert result.state is BindingState.ERROR
    assert "uses: [static]" in result.message


PARAM_TOOL = tool("team-a/run", slot("target", "config", "parameter"))


def param_registry(value: str, *extra: Any) -> Registry:
    return registry_of(
        *TYPES,
        SHARED,
        PRIVATE,
        PARAM_TOOL,
        agent("team-a/dev", tools=[use("run", target=value)]),
        *extra,
    )


def test_a_parameter_value_across_namespaces_needs_a_grant() -> None:
    registry = param_registry("local/shared-config")
    (refused,) = registry.resolve("team-a/dev").slots
    assert refused.state is BindingState.ERROR
    assert "bind it by parameter" in refused.message
    assert "uses: [parameter]" in refused.message
    assert registry.upsert_grant(grant("share-config")).agents == {"team-a/dev"}
    (bound,) = registry.resolve("team-a/dev").slots
    assert bound.resource is not None
    assert bound.resource.grant == "local/share-config"
    assert registry.delete_grant("local", "share-config").agents == {"team-a/dev"}
    assert registry.resolve("team-a/dev").slots[0].resource is None


def test_a_parameter_refusal_is_no_existence_oracle() -> None:
    present = param_registry("local/private").resolve("team-a/dev").slots[0]
    absent = param_registry("local/nothing").resolve("team-a/dev").slots[0]
    assert absent.message == present.message.replace("private", "nothing")


def test_a_parameter_uid_of_another_namespace_binds_only_by_a_grant() -> None:
    uid = SHARED.meta.uid
    registry = param_registry(uid)
    (hidden,) = registry.resolve("team-a/dev").slots
    assert "names no resource" in hidden.message  # as if it did not exist
    assert registry.upsert_grant(grant("share-config")).agents == {"team-a/dev"}
    (bound,) = registry.resolve("team-a/dev").slots
    assert bound.resource is not None
    assert (bound.resource.name, bound.resource.grant) == ("shared-config", "local/share-config")
    assert registry.delete_grant("local", "share-config").agents == {"team-a/dev"}


CTX_TOOL = tool("team-a/ctx", slot("config", "config"))


def selecting_agent(*namespaces: str) -> Any:
    selector = ResourceSelector(match_labels={"share": "all"}, namespaces=list(namespaces))
    obj = agent("team-a/dev", tools=["ctx"])
    spec = obj.spec.model_copy(update={"resource_selector": selector})
    return obj.model_copy(update={"spec": spec})


def test_a_selector_reaches_another_namespace_only_by_a_grant() -> None:
    registry = registry_of(*TYPES, SHARED, PRIVATE, CTX_TOOL, selecting_agent("local"))
    (unbound,) = registry.resolve("team-a/dev").slots
    assert unbound.state is BindingState.ERROR
    assert unbound.candidates == []  # an ungranted Resource is not even a candidate
    affected = registry.upsert_grant(
        grant("by-label", to=[{"selector": {"matchLabels": {"share": "all"}}}], uses=["selector"])
    )
    assert affected.agents == {"team-a/dev"}
    (bound,) = registry.resolve("team-a/dev").slots
    assert bound.resource is not None
    assert (bound.resource.name, bound.resource.grant) == ("shared-config", "local/by-label")
    assert registry.delete_grant("local", "by-label").agents == {"team-a/dev"}
    assert registry.resolve("team-a/dev").slots[0].resource is None


def test_a_selector_without_namespaces_stays_in_its_own() -> None:
    registry = registry_of(
        *TYPES, SHARED, CTX_TOOL, selecting_agent(), grant("all", uses=["selector"])
    )
    assert registry.selected_resources("team-a/dev") == []
    assert registry.resolve("team-a/dev").slots[0].resource is None


def test_a_static_grant_does_not_admit_a_selector() -> None:
    registry = registry_of(
        *TYPES, SHARED, CTX_TOOL, selecting_agent("local"), grant("static", uses=["static"])
    )
    assert registry.resolve("team-a/dev").slots[0].resource is None


def test_namespace_labels_admit_by_selector_and_re_resolve_their_referrers() -> None:
    by_label = grant("tiers", from_=[{"namespaceSelector": {"matchLabels": {"tier": "team"}}}])
    registry = team_registry(by_label)
    resolve_all(registry, AGENTS)
    affected = registry.upsert_namespace("team-b", {"tier": "team"})
    assert affected.agents == {"team-b/dev"}
    assert affected.tools == {"team-b/reader"}
    results = resolve_all(registry, AGENTS)
    assert results["team-b/dev"].state is BindingState.BOUND
    assert results["team-a/dev"].state is BindingState.ERROR
    assert registry.upsert_namespace("team-b", {"tier": "team"}) == Affected()
    assert registry.upsert_namespace("team-c", {"tier": "infra"}).agents == {"team-c/dev"}
    assert registry.delete_namespace("team-b").agents == {"team-b/dev"}
    assert resolve_all(registry, AGENTS)["team-b/dev"].state is BindingState.ERROR


def test_a_deleted_referrer_leaves_the_reverse_index() -> None:
    registry = team_registry()
    resolve_all(registry, AGENTS)
    registry.delete_agent("team-a", "dev")
    registry.delete_tool("team-a", "reader")
    affected = registry.upsert_grant(grant("share-config"))
    assert "team-a/dev" not in affected.agents
    assert "team-a/reader" not in affected.tools


REPO = Path(__file__).resolve().parents[2]


def _docs(path: str) -> list[dict[str, Any]]:
    return [d for d in yaml.safe_load_all((REPO / path).read_text()) if isinstance(d, dict)]


def test_the_shared_config_example_binds_from_three_teams_by_the_grant() -> None:
    """examples/grants/ resolves as its comments say: every team's Tool and agent bind
    local/shared-config by the grant, and lose it when the grant goes."""
    registry = Registry()
    for doc in _docs("examples/manifests/00-resourcetypes.yaml"):
        registry.upsert(parse_object(doc["kind"], doc))
    for doc in _docs("examples/grants/00-namespaces.yaml"):
        md = doc["metadata"]
        registry.upsert_namespace(md["name"], md.get("labels") or {})
    for doc in _docs("examples/grants/10-platform.yaml"):
        kind = doc["kind"]
        registry.upsert(parse_grant(doc) if kind == "ResourceGrant" else parse_object(kind, doc))
    team_docs = _docs("examples/grants/20-team.yaml")
    for team in TEAMS:
        for doc in team_docs:
            placed = {**doc, "metadata": {**doc["metadata"], "namespace": team}}
            registry.upsert(parse_object(doc["kind"], placed))
    agents = [f"{team}/configurer" for team in TEAMS]
    for result in resolve_all(registry, agents).values():
        assert result.state is BindingState.BOUND, result.message
        assert result.resource is not None
        assert result.resource.grant == "local/share-config"
    assert registry.delete_grant("local", "share-config").agents == frozenset(agents)
    for result in resolve_all(registry, agents).values():
        assert result.state is BindingState.ERROR


def test_a_grant_is_looked_up_by_its_key() -> None:
    share = grant("share-config")
    registry = team_registry(share)
    assert registry.grant("local/share-config") == share
    assert registry.grant("local/absent") is None
    assert registry.grant("team-a/share-config") is None


def test_revoking_one_of_two_grants_leaves_the_other_binding() -> None:
    registry = team_registry(grant("a-share"), grant("b-share"))
    for result in resolve_all(registry, AGENTS).values():
        assert result.resource is not None
        assert result.resource.grant == "local/a-share"  # the first grant by name
    assert registry.delete_grant("local", "a-share").agents == frozenset(AGENTS)
    assert registry.grant("local/a-share") is None
    assert registry.grant("local/b-share") is not None
    for result in resolve_all(registry, AGENTS).values():
        assert result.state is BindingState.BOUND
        assert result.resource is not None
        assert result.resource.grant == "local/b-share"


def test_a_granted_parameter_value_naming_no_resource_says_it_does_not_exist() -> None:
    registry = param_registry("local/gone", grant("gone", to=[{"name": "gone"}]))
    (missing,) = registry.resolve("team-a/dev").slots
    assert missing.state is BindingState.ERROR
    assert missing.resource is None
    assert missing.cause is ErrorCause.MISSING
    assert "names Resource local/gone, which does not exist" in missing.message


def test_deleting_a_namespace_whose_labels_were_never_seen_affects_no_one() -> None:
    registry = team_registry(grant("share-config"))
    resolve_all(registry, AGENTS)
    assert registry.delete_namespace("team-a") == Affected()
    assert registry.upsert_namespace("team-a", {}) == Affected()
    assert registry.delete_namespace("team-a") == Affected()  # labels, but none to lose
