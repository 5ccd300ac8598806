"""The kind vocabulary and object references the reconcile path names its work by."""

from __future__ import annotations

import pytest

from controller.domain.models import parse_object
from controller.domain.refs import Kind, Ref, Request


def test_each_kind_names_its_api_kind_plural_and_scope() -> None:
    assert [(k.kind_name, k.plural, k.namespaced) for k in Kind] == [
        ("ResourceType", "resourcetypes", False),
        ("Resource", "resources", True),
        ("Tool", "tools", True),
        ("AgentSpec", "agentspecs", True),
        ("ResourceGrant", "resourcegrants", True),
    ]


def test_references_and_requests_print_as_their_keys() -> None:
    assert str(Ref("team", "alice")) == "team/alice"
    assert str(Ref("", "git-checkout")) == "git-checkout"  # cluster-scoped: no namespace
    assert str(Request.agent("team/alice")) == "agent:team/alice"
    assert Request.agent("team/alice").ref == Ref.parse("team/alice")


def test_a_body_of_another_kind_is_not_parsed() -> None:
    body = {"metadata": {"name": "x", "namespace": "team"}, "spec": {}}
    with pytest.raises(ValueError, match=r"^'ConfigMap' is not one of Bindery's kinds$"):
        parse_object("ConfigMap", body)
