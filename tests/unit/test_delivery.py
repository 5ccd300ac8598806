"""The bindings document delivered to a session: the work URI appears only while it is held."""

from __future__ import annotations

import json
from typing import Any

import pytest
from bindery_session.wire import Access, BindingMode, Bindings, BindingState, digest
from hypothesis import given
from hypothesis import strategies as st

from controller.domain.delivery import (
    BINDINGS_FILE,
    bindings_document,
    current_stands,
    delivered_bindings,
    delivered_work_uris,
    nonce_of,
    render,
    stamp,
    without_work,
)
from controller.domain.models import (
    API_VERSION,
    AgentObject,
    AgentSpecSpec,
    ObjectMeta,
)
from controller.domain.results import (
    AgentResolution,
    BoundResource,
    DirectResult,
    SlotResult,
)
from controller.domain.status import binding_rows
from controller.domain.work import Hold

URI = "github-issue://example/project/123"
SRC = "file:///src/project"

AGENT = AgentObject(
    meta=ObjectMeta(name="alice", namespace="team", uid="uid-alice"), spec=AgentSpecSpec()
)


def direct(name: str, uri: str, tag: str = "github-issue") -> DirectResult:
    return DirectResult(
        name=name,
        tag=tag,
        uri=uri,
        state=BindingState.BOUND,
        resource=BoundResource(uri=uri, type=tag, alias=name),
    )


def slot(tool: str, name: str, resource: BoundResource | None, **kw: Any) -> SlotResult:
    return SlotResult(
        tool=tool,
        slot=name,
        mode=kw.pop("mode", BindingMode.CONTEXTUAL),
        access=kw.pop("access", Access.READ_WRITE),
        resource_type=kw.pop("resource_type", "github-issue"),
        state=kw.pop("state", BindingState.BOUND if resource else BindingState.DEFERRED),
        resource=resource,
        **kw,
    )


WORK_RES = BoundResource(uri=URI, type="github-issue", alias="work")
SRC_RES = BoundResource(uri=SRC, type="fs-directory", name="src", namespace="team", uid="u-src")


def resolution() -> AgentResolution:
    return AgentResolution(
        agent="team/alice",
        direct=[direct("work", URI), direct("source", SRC, "fs-directory")],
        slots=[
            slot("tracker", "issue", WORK_RES),
            slot("tracker", "target", None, mode=BindingMode.PARAMETER),
            slot("git", "repo", SRC_RES, resource_type="git-checkout", access=Access.READ_ONLY),
        ],
    )


def doc(deliver: bool, res: AgentResolution | None = None) -> dict[str, Any]:
    return bindings_document(AGENT, res or resolution(), deliver_work=deliver)


# ------------------------------------------------------------------------------- the document


def test_document_shape_when_work_is_delivered() -> None:
    d = doc(True)
    assert d["apiVersion"] == API_VERSION
    assert d["kind"] == "Bindings"
    assert d["agent"] == {"namespace": "team", "name": "alice"}
    assert d["resources"] == [
        {
            "name": "work",
            "tag": "github-issue",
            "uri": URI,
            "state": "Bound",
            "resource": {"uri": URI, "type": "github-issue", "alias": "work"},
        },
        {
            "name": "source",
            "tag": "fs-directory",
            "uri": SRC,
            "state": "Bound",
            "resource": {"uri": SRC, "type": "fs-directory", "alias": "source"},
        },
    ]
    assert d["tools"] == [
        {
            "name": "tracker",
            "slots": [
                {
                    "name": "issue",
                    "mode": "contextual",
                    "access": "read_write",
                    "resourceType": "github-issue",
                    "state": "Bound",
                    "resource": {"uri": URI, "type": "github-issue", "alias": "work"},
                },
                {
                    "name": "target",
                    "mode": "parameter",
                    "access": "read_write",
                    "resourceType": "github-issue",
                    "state": "Deferred",
                },
            ],
        },
        {
            "name": "git",
            "slots": [
                {
                    "name": "repo",
                    "mode": "contextual",
                    "access": "read_only",
                    "resourceType": "git-checkout",
                    "state": "Bound",
                    "resource": {
                        "uri": SRC,
                        "type": "fs-directory",
                        "name": "src",
                        "namespace": "team",
                        "uid": "u-src",
                    },
                },
            ],
        },
    ]


def test_document_carries_no_timestamps_or_generations() -> None:
    text = render(doc(True))
    for word in ("generation", "Time", "timestamp", "resourceVersion"):
        assert word not in text


def test_work_binding_present_only_when_delivered() -> None:
    assert [r["name"] for r in doc(True)["resources"]] == ["work", "source"]
    assert [r["name"] for r in doc(False)["resources"]] == ["source"]


def test_slot_resolved_to_work_uri_loses_its_resource_when_not_delivered() -> None:
    d = doc(False)
    issue = d["tools"][0]["slots"][0]
    assert issue["name"] == "issue"
    assert "resource" not in issue
    # other slots keep theirs
    assert d["tools"][1]["slots"][0]["resource"]["uri"] == SRC


def test_work_uri_does_not_occur_anywhere_when_not_delivered() -> None:
    assert URI not in render(doc(False))
    assert URI in render(doc(True))


def test_without_work_binding_nothing_is_hidden() -> None:
    res = AgentResolution(
        agent="team/alice",
        direct=[direct("source", SRC, "fs-directory")],
        slots=[slot("git", "repo", SRC_RES)],
    )
    assert doc(False, res) == doc(True, res)
    assert doc(False, res)["tools"][0]["slots"][0]["resource"]["uri"] == SRC


def test_work_binding_in_error_is_withheld_when_not_delivered() -> None:
    broken = DirectResult(
        name="work", tag="nope", uri=URI, state=BindingState.ERROR, message="bad tag"
    )
    res = AgentResolution(agent="team/alice", direct=[broken])
    assert doc(False, res)["resources"] == []
    assert doc(True, res)["resources"] == [
        {"name": "work", "tag": "nope", "uri": URI, "state": "Error"}
    ]


def test_work_uri_under_another_binding_name_is_delivered_there_only() -> None:
    """Exclusivity is about the work role: while another agent holds X, this agent receives X
    under its ``notes`` role but never as its ``work``."""
    res = AgentResolution(
        agent="team/alice",
        direct=[direct("work", URI), direct("notes", URI)],
    )
    rendered = render(doc(False, res))
    assert delivered_work_uris(rendered) == set()
    assert [r["name"] for r in json.loads(rendered)["resources"]] == ["notes"]


def test_empty_resolution() -> None:
    d = doc(False, AgentResolution(agent="team/alice"))
    assert d["resources"] == []
    assert d["tools"] == []


# ------------------------------------------------------------------------------- render


def test_render_is_canonical_and_key_order_independent() -> None:
    d = doc(True)
    shuffled = json.loads(json.dumps(d))
    shuffled = {k: shuffled[k] for k in reversed(list(shuffled))}
    shuffled["resources"] = [dict(reversed(list(r.items()))) for r in shuffled["resources"]]
    assert render(d) == render(shuffled)
    assert render(d) == render(doc(True))
    assert render(d).endswith("}\n")
    assert json.loads(render(d)) == d


def test_render_keeps_non_ascii_and_list_order() -> None:
    res = AgentResolution(agent="team/alice", direct=[direct("b", "x:ü"), direct("a", "x:a")])
    text = render(doc(True, res))
    assert "x:ü" in text
    assert text.index('"x:ü"') < text.index('"x:a"')


def test_render_changes_exactly_when_bindings_change() -> None:
    other = AgentResolution(agent="team/alice", direct=[direct("work", URI + "/")])
    assert render(doc(True)) != render(doc(True, other))
    assert render(doc(True)) != render(doc(False))


@given(
    st.dictionaries(
        st.text(max_size=5),
        st.one_of(st.integers(), st.text(max_size=5), st.lists(st.integers(), max_size=3)),
        max_size=6,
    )
)
def test_render_roundtrips_any_document(document: dict[str, Any]) -> None:
    text = render(document)
    assert json.loads(text) == document
    assert render(json.loads(text)) == text


# ------------------------------------------------------------------------------- checks


def test_delivered_work_uris() -> None:
    assert delivered_work_uris(render(doc(True))) == {URI}
    assert delivered_work_uris(render(doc(False))) == set()


@pytest.mark.parametrize("garbage", ["", "{", "not json", "{}", '{"resources": []}'])
def test_delivered_work_uris_of_garbage_is_empty(garbage: str) -> None:
    assert delivered_work_uris(garbage) == set()


@pytest.mark.parametrize("valid_json", ["null", "[]", '"text"', "3", '{"resources": [1]}'])
def test_delivered_work_uris_tolerates_json_that_is_not_a_document(valid_json: str) -> None:
    """The ConfigMap is user-editable; a finalizer that crashes on its content blocks deletion."""
    assert delivered_work_uris(valid_json) == set()


def test_without_work_removes_work_and_slot_references() -> None:
    delivered = render(stamp(doc(True), "0123456789abcdef"))
    stripped = without_work(delivered, "fedcba9876543210")
    assert URI not in stripped
    assert delivered_work_uris(stripped) == set()
    # exactly what the document would have been without the work delivered, under the new nonce
    assert stripped == render(stamp(doc(False), "fedcba9876543210"))


def test_without_work_leaves_a_document_without_work_unchanged() -> None:
    delivered = render(stamp(doc(False), "0123456789abcdef"))
    assert without_work(delivered, "fedcba9876543210") == delivered


def test_without_work_removes_the_uri_under_any_binding_name() -> None:
    res = AgentResolution(agent="team/alice", direct=[direct("work", URI), direct("notes", URI)])
    assert URI not in without_work(render(doc(True, res)), "fedcba9876543210")


# ------------------------------------------------------------------------------- the nonce


def test_a_stamped_document_carries_its_nonce_and_reads_as_the_wire_model() -> None:
    rendered = render(stamp(doc(True), "0123456789abcdef"))
    assert nonce_of(rendered) == "0123456789abcdef"
    assert Bindings.model_validate_json(rendered).nonce == "0123456789abcdef"
    assert Bindings.model_validate_json(rendered).render() == rendered


def test_an_empty_nonce_leaves_the_document_as_a_controller_before_the_nonce_wrote_it() -> None:
    assert stamp(doc(True), "") == doc(True)
    assert nonce_of(render(doc(True))) == ""


def test_nonce_of_reads_only_the_top_level_key() -> None:
    """An attribute named ``nonce`` (nested, indented deeper) is not the document's nonce."""
    attributed = SRC_RES.model_copy(update={"attributes": {"nonce": "attacker"}})
    res = AgentResolution(agent="team/dev", slots=[slot("fmt", "repo", attributed)])
    assert '"nonce": "attacker"' in render(doc(False, res))
    assert nonce_of(render(doc(False, res))) == ""
    assert nonce_of(render(stamp(doc(False, res), "00ff"))) == "00ff"


@pytest.mark.parametrize("garbage", ["", "{", "not json", '{"nonce": "x"}', "null"])
def test_nonce_of_garbage_is_empty_or_harmless(garbage: str) -> None:
    assert nonce_of(garbage) in ("", "x")
    assert not current_stands(garbage, doc(False), digest(garbage))


def test_the_document_in_place_stands_when_it_is_the_controllers_recorded_write() -> None:
    written = render(stamp(doc(True), "0123456789abcdef"))
    assert current_stands(written, doc(True), digest(written))


def test_a_document_from_before_the_nonce_stands_on_upgrade() -> None:
    """A controller from before the nonce wrote the document and recorded its digest: the same
    bindings are not written again (an upgrade rewrites no ConfigMap)."""
    written = render(doc(True))
    assert current_stands(written, doc(True), digest(written))


def test_changed_bindings_do_not_stand() -> None:
    written = render(stamp(doc(True), "0123456789abcdef"))
    assert not current_stands(written, doc(False), digest(written))


def test_an_earlier_document_put_back_does_not_stand() -> None:
    """The ABA: the session applied D0; the controller wrote D1 (work given), then bindings equal
    to D0's again. Written under a fresh nonce, that third document has a digest of its own, so
    the acknowledgement of D0 cannot confirm it; and D0 put back by hand in the ConfigMap (its
    old nonce, a digest the session acknowledged) is not the write the controller recorded."""
    d0 = render(stamp(doc(False), "00000000000000a0"))
    d1 = render(stamp(doc(True), "00000000000000a1"))
    d2 = render(stamp(doc(False), "00000000000000a2"))
    assert len({digest(d0), digest(d1), digest(d2)}) == 3
    assert not current_stands(d0, doc(False), digest(d2))
    assert current_stands(d2, doc(False), digest(d2))


def test_a_document_edited_by_hand_does_not_stand() -> None:
    written = render(stamp(doc(True), "0123456789abcdef"))
    edited = written.replace(URI, "github-issue://elsewhere/1")
    assert not current_stands(edited, doc(True), digest(written))
    assert not current_stands(edited, doc(True), digest(edited))


def test_a_lost_record_rewrites_once() -> None:
    """No digest recorded (a status lost or never written): the document is written anew."""
    written = render(stamp(doc(True), "0123456789abcdef"))
    assert not current_stands(written, doc(True), "")


def test_bindings_file_name() -> None:
    assert BINDINGS_FILE == "bindings.json"


def test_a_resources_attributes_are_delivered_to_the_session_but_not_shown_in_status() -> None:
    attributed = SRC_RES.model_copy(update={"attributes": {"branch": "main"}})
    res = AgentResolution(agent="team/dev", slots=[slot("fmt", "repo", attributed)])
    delivered = doc(False, res)["tools"][0]["slots"][0]["resource"]
    assert delivered["attributes"] == {"branch": "main"}
    shown = binding_rows(res)[0]["resource"]
    assert "attributes" not in shown
    assert shown["uri"] == SRC


FENCED = Hold(
    uri=URI, holder="team/alice", holder_uid="uid-alice", uid="lease", resource_version="9"
)
GRANTED = BoundResource(
    uri="s3://other/bucket",
    type="fs-directory",
    alias="data",
    name="bucket",
    namespace="other",
    uid="u-bucket",
    attributes={"region": "eu", "tier": "cold"},
    grant="other/share",
)


def _variants() -> list[AgentResolution]:
    """Resolutions that exercise every branch of the document: a withheld work URI bound under
    another role too, resources with every field empty or set, slots without a resource."""
    base = resolution()
    carried = AgentResolution(
        agent="team/alice",
        direct=[direct("work", URI), direct("reviewing", URI), direct("data", GRANTED.uri)],
        slots=[
            slot("tracker", "issue", WORK_RES),
            slot("store", "bucket", GRANTED, access=Access.WRITE_ONLY),
            slot("store", "spare", None, state=BindingState.UNBOUND),
        ],
    )
    errored = DirectResult(
        name="work", tag="github-issue", uri=URI, state=BindingState.ERROR, message="no such type"
    )
    return [
        base,
        carried,
        base.model_copy(update={"direct": [errored]}),
        AgentResolution(agent="team/alice"),
    ]


@pytest.mark.parametrize("deliver", [True, False])
@pytest.mark.parametrize("fence", [None, FENCED])
@pytest.mark.parametrize("variant", range(4))
def test_the_document_is_the_wire_models_dump(
    deliver: bool, fence: Hold | None, variant: int
) -> None:
    """bindings_document builds the JSON values directly: exactly what the wire models dump."""
    res = _variants()[variant]
    built = bindings_document(AGENT, res, deliver_work=deliver, fence=fence if deliver else None)
    model = delivered_bindings(AGENT, res, deliver_work=deliver, fence=fence if deliver else None)
    assert built == model.document()
    assert render(built) == model.render()  # the rendered text sorts the keys
