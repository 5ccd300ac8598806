"""The owner's grant decides cross-namespace use of a Resource (pure decision, no server)."""

from __future__ import annotations

from typing import Any

import pytest
from pydantic import ValidationError

from controller.domain.grants import (
    GrantUse,
    Referrer,
    ResourceGrantObject,
    ResourceGrantSpec,
    Target,
    granting,
    refusal,
)
from controller.domain.models import ObjectMeta

CONFIG = Target("local", "shared-config", {"share": "all"})


def grant(name: str, spec: dict[str, Any], namespace: str = "local") -> ResourceGrantObject:
    return ResourceGrantObject(
        meta=ObjectMeta(name=name, namespace=namespace),
        spec=ResourceGrantSpec.model_validate(spec),
    )


def team(name: str, **labels: str) -> Referrer:
    return Referrer(name, labels)


BY_NAME = grant("teams", {"from": [{"namespace": "team-a"}], "to": [{"name": "shared-config"}]})


def test_a_grant_admits_the_named_namespace_for_the_named_resource() -> None:
    for use in GrantUse:
        assert granting([BY_NAME], team("team-a"), CONFIG, use) is BY_NAME
    assert granting([BY_NAME], team("team-b"), CONFIG, GrantUse.STATIC) is None
    other = Target("local", "secrets", {})
    assert granting([BY_NAME], team("team-a"), other, GrantUse.STATIC) is None


def test_only_a_grant_in_the_targets_namespace_counts() -> None:
    """A grant made by the referrer's own namespace cannot open another's Resource."""
    forged = grant(
        "mine", {"from": [{"namespace": "team-a"}], "to": [{"name": "shared-config"}]}, "team-a"
    )
    assert granting([forged], team("team-a"), CONFIG, GrantUse.STATIC) is None


def test_selectors_on_both_sides() -> None:
    labelled = grant(
        "labelled",
        {
            "from": [{"namespaceSelector": {"matchLabels": {"tier": "team"}}}],
            "to": [{"selector": {"matchExpressions": [{"key": "share", "operator": "Exists"}]}}],
        },
    )
    assert granting([labelled], team("team-c", tier="team"), CONFIG, GrantUse.SELECTOR)
    assert granting([labelled], team("team-c", tier="infra"), CONFIG, GrantUse.SELECTOR) is None
    unshared = Target("local", "private", {})
    assert granting([labelled], team("team-c", tier="team"), unshared, GrantUse.STATIC) is None


def test_a_grant_limited_to_some_uses() -> None:
    static_only = grant(
        "static",
        {"from": [{"namespace": "team-a"}], "to": [{"name": "shared-config"}], "uses": ["static"]},
    )
    assert granting([static_only], team("team-a"), CONFIG, GrantUse.STATIC) is static_only
    assert granting([static_only], team("team-a"), CONFIG, GrantUse.PARAMETER) is None


def test_the_first_grant_by_name_is_the_one_reported() -> None:
    z = grant("z", {"from": [{"namespace": "team-a"}], "to": [{"name": "shared-config"}]})
    a = grant("a", {"from": [{"namespace": "team-a"}], "to": [{"name": "shared-config"}]})
    assert granting([z, a], team("team-a"), CONFIG, GrantUse.STATIC) is a


def test_an_empty_entry_admits_nothing() -> None:
    empty = grant("empty", {"from": [{}], "to": [{}]})
    assert granting([empty], team("team-a"), CONFIG, GrantUse.STATIC) is None


def test_a_misspelt_field_is_refused() -> None:
    with pytest.raises(ValidationError, match="namespaces"):
        ResourceGrantSpec.model_validate({"from": [{"namespaces": "x"}], "to": []})
    with pytest.raises(ValidationError, match="uses"):
        ResourceGrantSpec.model_validate({"from": [], "to": [], "uses": ["everything"]})


def test_the_refusal_names_the_grant_that_would_allow_it() -> None:
    why, fix = refusal(team("team-b"), CONFIG, GrantUse.PARAMETER)
    assert "'local/shared-config'" in why
    assert "'team-b'" in why
    assert "parameter" in why
    assert "namespace: team-b" in fix
    assert "name: shared-config" in fix
    assert "uses: [parameter]" in fix
