"""What the MCP adapter serves for a document: resources, their contents and ``_meta``, the
tools (pure: no server)."""

from __future__ import annotations

import hashlib
import json

import pytest

from controller.mcp._session import BindingsError
from controller.mcp.content import (
    BINDINGS_URI,
    INSTRUCTIONS,
    META,
    RESOLVE_TOOL,
    Snapshot,
    changed_uris,
    read,
    resources,
    tool_list,
)
from tests.mcp.support import FENCE, WORK_URI, document, sha


def snapshot(text: str) -> Snapshot:
    return Snapshot.of(text.encode())


def test_the_whole_document_is_served_byte_for_byte_and_its_sha256_is_the_digest() -> None:
    text = document(1)
    got = read(snapshot(text), BINDINGS_URI)
    assert got is not None
    assert got.text == text
    assert "sha256:" + hashlib.sha256(got.text.encode()).hexdigest() == sha(text)
    assert got.meta is not None
    assert got.meta[f"{META}digest"] == sha(text)
    assert got.mime_type == "application/json"


def test_a_document_that_is_not_utf8_json_bindings_is_refused() -> None:
    with pytest.raises(BindingsError, match="not JSON"):
        Snapshot.of(b"{half")
    with pytest.raises(BindingsError, match="kind 'Bindings'"):
        Snapshot.of(b'{"kind": "Other"}')


def test_one_resource_per_bound_uri_named_by_its_role_after_the_document() -> None:
    listed = resources(snapshot(document(1)))
    assert [(r.uri, r.name) for r in listed] == [
        (BINDINGS_URI, "bindings"),
        ("git://acme/app/r1", "src"),
        ("worktree://acme/app", "notes"),
        (WORK_URI, "work"),
    ]


def test_a_binding_carries_tag_type_alias_digest_and_the_work_fence_in_meta() -> None:
    text = document(1)
    work = next(r for r in resources(snapshot(text)) if r.uri == WORK_URI)
    assert work.meta == {
        f"{META}roles": ["work"],
        f"{META}tag": "issue",
        f"{META}type": "github-issue",
        f"{META}alias": "login-bug",
        f"{META}state": "Bound",
        f"{META}digest": sha(text),
        f"{META}agent": "a/dev",
        f"{META}fence": FENCE,
    }
    assert work.title == "login-bug"
    assert work.annotations is not None
    assert work.annotations.priority == 1.0
    notes = next(r for r in resources(snapshot(text)) if r.name == "notes")
    assert notes.title == "app-tree"  # no alias: the Resource's name
    assert notes.annotations is not None
    assert notes.annotations.priority == 0.5


def test_without_work_no_fence_is_given() -> None:
    listed = resources(snapshot(document(1, work=False)))
    assert all(f"{META}fence" not in (r.meta or {}) for r in listed)
    assert WORK_URI not in [r.uri for r in listed]


def test_a_bound_uri_reads_as_its_binding_as_delivered() -> None:
    text = document(1)
    got = read(snapshot(text), WORK_URI)
    assert got is not None
    delivered = next(r for r in json.loads(text)["resources"] if r["name"] == "work")
    assert json.loads(got.text) == delivered
    assert got.meta is not None
    assert got.meta[f"{META}digest"] == sha(text)


def test_a_uri_bound_in_two_roles_is_one_resource_with_both() -> None:
    doc = json.loads(document(1))
    doc["resources"].append({"name": "also", "tag": "issue", "uri": WORK_URI, "state": "Bound"})
    text = json.dumps(doc)
    listed = [r for r in resources(snapshot(text)) if r.uri == WORK_URI]
    assert len(listed) == 1
    assert listed[0].name == "work,also"
    assert listed[0].meta is not None
    assert listed[0].meta[f"{META}roles"] == ["work", "also"]
    got = read(snapshot(text), WORK_URI)
    assert got is not None
    assert [b["name"] for b in json.loads(got.text)] == ["work", "also"]


def test_uris_are_served_exactly_as_bound() -> None:
    doc = json.loads(document(1))
    odd = "custom+scheme://Host/Path/?q=a%2Fb#Frag/"
    doc["resources"][0]["uri"] = odd
    text = json.dumps(doc)
    assert odd in [r.uri for r in resources(snapshot(text))]
    assert read(snapshot(text), odd) is not None
    assert read(snapshot(text), odd.rstrip("/")) is None
    assert read(snapshot(text), "custom+scheme://host/Path/?q=a%2Fb#Frag/") is None


def test_an_unknown_uri_or_no_document_reads_as_nothing() -> None:
    assert read(snapshot(document(1)), "git://elsewhere") is None
    assert read(None, BINDINGS_URI) is None
    assert [r.uri for r in resources(None)] == [BINDINGS_URI]


def test_changed_uris_are_the_document_and_the_bindings_that_moved() -> None:
    one, two = snapshot(document(1)), snapshot(document(2))
    assert changed_uris(None, one) == [
        BINDINGS_URI,
        "git://acme/app/r1",
        "worktree://acme/app",
        WORK_URI,
    ]
    assert changed_uris(one, two) == [BINDINGS_URI, "git://acme/app/r2", "git://acme/app/r1"]
    assert changed_uris(one, snapshot(document(1))) == []
    handed_off = snapshot(document(1, work=False))
    assert changed_uris(one, handed_off) == [BINDINGS_URI, WORK_URI]


def test_resolve_is_listed_only_where_allowed() -> None:
    assert RESOLVE_TOOL in [t.name for t in tool_list(resolve=True)]
    assert [t.name for t in tool_list(resolve=False)] == [
        "bindery_bindings",
        "bindery_acknowledge",
        "bindery_refuse",
    ]


def test_the_instructions_say_read_at_start_and_after_notifications_and_acknowledge() -> None:
    assert "start of every task" in INSTRUCTIONS
    assert "after every notification" in INSTRUCTIONS
    assert "bindery_acknowledge" in INSTRUCTIONS
    assert "not acknowledging" in INSTRUCTIONS
