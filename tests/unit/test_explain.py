"""`bindery why`'s explanation: computed by the controller's engine, pinned by golden files.

Regenerate the golden files after an intended change with:

    BINDERY_UPDATE_GOLDEN=1 .venv/bin/pytest tests/unit/test_explain.py
"""

from __future__ import annotations

import json
import os
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from controller.cli import why_text
from controller.domain import acknowledgement as ack
from controller.domain import explain as ex
from controller.domain.launch import launched_from_annotations, trajectory_hash
from controller.domain.models import Runtime
from controller.domain.work import Hold
from controller.k8s import builders

GOLDEN = Path(__file__).parent / "golden"
UPDATE = os.environ.get("BINDERY_UPDATE_GOLDEN") == "1"
NS = "demo"
RUNTIME = {"image": "ghcr.io/example/agent:1.0"}
ISSUE = "github-issue://example/p/1"


def obj(kind: str, name: str, spec: dict[str, Any], **meta: Any) -> dict[str, Any]:
    md: dict[str, Any] = {"name": name, "uid": f"uid-{name}", "generation": 1, **meta}
    if kind != "ResourceType":
        md.setdefault("namespace", NS)
    return {"apiVersion": "bindery.dev/v1alpha1", "kind": kind, "metadata": md, "spec": spec}


TYPES = [
    obj("ResourceType", "git-checkout", {}),
    obj("ResourceType", "fs-directory", {"parentTypes": ["git-checkout"]}),
    obj("ResourceType", "github-issue", {"uriSchemes": ["github-issue"]}),
    obj("ResourceType", "broken", {"parentTypes": "not-a-list"}),
]
RESOURCES = [
    obj("Resource", "repo-a", {"type": "git-checkout", "uri": "git://a"}, labels={"team": "x"}),
    obj("Resource", "repo-b", {"type": "fs-directory", "uri": "file:///b"}, labels={"team": "x"}),
    obj("Resource", "config", {"type": "git-checkout", "uri": "git://config"}),
]
TOOLS = [
    obj(
        "Tool",
        "git",
        {
            "resourceSlots": [
                {"name": "repo", "resourceType": "git-checkout", "access": "read_write"},
                {
                    "name": "config",
                    "resourceType": "git-checkout",
                    "access": "read_only",
                    "binding": "static",
                    "staticResource": "config",
                },
                {
                    "name": "target",
                    "resourceType": "git-checkout",
                    "access": "read_only",
                    "binding": "parameter",
                },
            ]
        },
    ),
    obj("Tool", "issues", {"resourceSlots": [{"name": "issue", "resourceType": "github-issue"}]}),
]


def agent(
    name: str, *, relaunch: int = 0, status: dict[str, Any] | None = None, **spec: Any
) -> dict[str, Any]:
    body = obj(
        "AgentSpec",
        name,
        {
            "resources": [{"name": "work", "tag": "github-issue", "uri": ISSUE}],
            "tools": [{"name": "git"}, {"name": "issues"}, {"name": "absent"}],
            "resourceSelector": {"matchLabels": {"team": "x"}},
            "runtime": RUNTIME,
            "relaunchGeneration": relaunch,
            **spec,
        },
    )
    if status is not None:
        body["status"] = status
    return body


def session(generation: int, runtime: dict[str, Any]) -> dict[str, Any]:
    annotations = {
        builders.LAUNCH_GENERATION_ANNOTATION: str(generation),
        builders.TRAJECTORY_HASH_ANNOTATION: trajectory_hash(Runtime.model_validate(runtime)),
        builders.LAUNCHED_AT_ANNOTATION: "2026-11-30T12:00:00Z",
    }
    return {
        "metadata": {"name": "dev-session", "namespace": NS},
        "spec": {"template": {"metadata": {"annotations": annotations}}},
        "status": {"readyReplicas": 1},
    }


def pod(generation: int) -> dict[str, Any]:
    return {
        "metadata": {
            "name": "dev-session-0",
            "annotations": {builders.LAUNCH_GENERATION_ANNOTATION: str(generation)},
        },
        "status": {"phase": "Running"},
    }


HOLD = Hold(
    uri=ISSUE, holder=f"{NS}/dev", holder_uid="uid-dev", name="bindery-work-x", namespace=NS
)
RIVALS = [
    agent("late", status={"work": {"uri": ISSUE, "held": False, "since": "2026-11-30T12:05:00Z"}}),
    agent("early", status={"work": {"uri": ISSUE, "held": False, "since": "2026-11-30T12:01:00Z"}}),
]
EVENTS = [
    {
        "type": "Normal",
        "reason": "Launched",
        "note": "session launched at generation 2",
        "eventTime": "2026-11-30T12:00:00.000000Z",
    },
    {
        "type": "Warning",
        "reason": "BindingError",
        "message": "core-shaped event",
        "lastTimestamp": "2026-11-30T12:00:05Z",
    },
]


def observed(**changes: Any) -> ex.Observed:
    fields: dict[str, Any] = {
        "agent": agent("dev", relaunch=2, runtime={"image": "ghcr.io/example/agent:2.0"}),
        "types": TYPES,
        "resources": RESOURCES,
        "tools": TOOLS,
        "agents": RIVALS,
        "holds": [HOLD],
        "session": session(2, RUNTIME),
        "pod": pod(2),
        "events": EVENTS,
        **changes,
    }
    return ex.Observed(**fields)


def test_why_reads_the_annotations_the_builders_write() -> None:
    read = launched_from_annotations(session_annotations_of(builders))
    assert read is not None
    assert read.generation == 4


def session_annotations_of(module: Any) -> dict[str, str]:
    return {
        module.LAUNCH_GENERATION_ANNOTATION: "4",
        module.TRAJECTORY_HASH_ANNOTATION: "sha256:x",
        module.LAUNCHED_AT_ANNOTATION: "t",
    }


def test_an_ambiguous_slot_lists_each_candidate_and_why() -> None:
    doc = ex.explain(observed())
    assert doc["state"] == "Error"
    repo = next(b for b in doc["bindings"] if b["name"] == "git.repo")
    assert repo["state"] == "Error"
    assert {c["uri"] for c in repo["candidates"]} >= {"git://a", "file:///b"}
    assert all(c["reason"] for c in repo["candidates"])
    assert doc["missingTools"] == ["absent"]
    ready = next(c for c in doc["conditions"] if c["type"] == "Ready")
    assert ready["reason"] == "BindingError"
    assert ready["message"] == "; ".join(doc["errors"])
    broken = "spec.parentTypes: Input should be a valid list"
    assert doc["ignored"] == {"ResourceType broken": broken}


def test_work_hold_and_the_queue_in_order() -> None:
    work = ex.explain(observed())["work"]
    assert work["holder"] == f"{NS}/dev"
    assert work["state"] == "Working"
    assert [c["agent"] for c in work["queue"]] == [f"{NS}/early", f"{NS}/late"]
    rival = ex.explain(observed(agent=RIVALS[0], agents=[RIVALS[1], agent("dev")]))["work"]
    assert rival["state"] == "Waiting"
    assert rival["waitingFor"] == f"{NS}/dev"
    assert [c["agent"] for c in rival["queue"]] == [f"{NS}/early", f"{NS}/late"]


def test_session_drift_and_pending_relaunch() -> None:
    kept = ex.explain(observed(agent=agent("dev", relaunch=2, runtime={"image": "other:1"})))
    assert kept["session"]["action"] == "Keep"
    assert kept["session"]["drift"] is True
    relaunch = next(c for c in kept["conditions"] if c["type"] == "RelaunchRequired")
    assert relaunch["status"] == "True"
    lowered = ex.explain(observed(agent=agent("dev", relaunch=1)))
    assert lowered["session"]["action"] == "Relaunch"
    assert lowered["session"]["launchedGeneration"] == 2


def test_an_agent_whose_spec_does_not_parse() -> None:
    bad = agent("dev")
    bad["spec"]["relaunchGeneration"] = -1
    doc = ex.explain(observed(agent=bad))
    assert doc["state"] == "Error"
    assert "relaunchGeneration" in doc["specError"]
    assert "spec rejected" in why_text.render_text(doc)


def test_the_last_events_newest_last() -> None:
    many = [
        {"type": "Normal", "reason": f"R{i}", "eventTime": f"2026-11-30T12:00:{i:02d}Z"}
        for i in range(9, -1, -1)
    ]
    events = ex.explain(observed(events=many))["events"]
    assert [e["reason"] for e in events] == ["R5", "R6", "R7", "R8", "R9"]


@pytest.mark.parametrize("case", ["error", "waiting", "idle"])
def test_golden(case: str) -> None:
    if case == "error":
        doc = ex.explain(observed())
    elif case == "waiting":
        fine = agent(
            "late",
            tools=[{"name": "issues"}],
            status={"work": {"uri": ISSUE, "held": False, "since": "2026-11-30T12:05:00Z"}},
        )
        doc = ex.explain(
            observed(agent=fine, agents=[agent("dev"), RIVALS[1]], session=None, pod=None)
        )
    else:
        doc = ex.explain(
            observed(agent=agent("dev", resources=[], tools=[], runtime=None), events=[])
        )
    for suffix, text in (("json", why_text.to_json(doc)), ("txt", why_text.render_text(doc))):
        path = GOLDEN / f"why_{case}.{suffix}"
        if UPDATE:
            path.write_text(text)
        assert text == path.read_text(), f"{path.name} differs; see the module docstring"
    json.loads(why_text.to_json(doc))


def test_the_text_says_what_the_controller_wrote_and_what_needs_attention() -> None:
    doc: dict[str, Any] = {
        "agent": f"{NS}/dev",
        "generation": 3,
        "state": "Working",
        "conditions": [{"type": "Ready", "status": "True", "reason": "BindingsDelivered"}],
        "controller": {
            "observedGeneration": 2,
            "state": "Idle",
            "conditions": [{"type": "Ready", "status": "False", "reason": "WaitingForWork"}],
        },
        "bindings": [
            {
                "name": "work",
                "tag": "github-issue",
                "state": "Bound",
                "uri": ISSUE,
                "mode": "direct",
                "resource": {"namespace": NS, "name": "issue-1"},
            },
            {
                "name": "notes",
                "tag": "notes",
                "state": "Error",
                "uri": "notes://x",
                "mode": "direct",
                "message": "its tag 'notes' is not a registered ResourceType",
            },
        ],
        "work": {"uri": ISSUE, "state": "Working", "holder": f"{NS}/gone", "acquireNext": True},
        "session": {
            "statefulSet": "dev-session",
            "launchedGeneration": 2,
            "desiredGeneration": 2,
            "action": "Keep",
            "drift": False,
            "notice": "LaunchUnknown",
        },
    }
    text = why_text.render_text(doc)
    assert (
        "  controller: state Idle, Ready=False WaitingForWork at generation 2 "
        "(behind: generation 3)"
    ) in text
    assert f"      = Resource {NS}/issue-1\n" in text
    assert "      its tag 'notes' is not a registered ResourceType\n" in text
    assert "  the holder is gone: the hold is reclaimed on the next pass\n" in text
    assert "  free: the controller acquires it for this agent on its next pass\n" in text
    assert "  launch record: LaunchUnknown (the workload's launch annotations" in text
    assert "Ignored" not in text


SHARED = obj(
    "Resource", "shared-config", {"type": "git-checkout", "uri": "git://shared"}, namespace="local"
)
SHARED_TOOL = obj(
    "Tool",
    "reader",
    {
        "resourceSlots": [
            {
                "name": "config",
                "resourceType": "git-checkout",
                "binding": "static",
                "staticResource": "local/shared-config",
            }
        ]
    },
)
SHARE = obj(
    "ResourceGrant",
    "share-config",
    {
        "from": [{"namespaceSelector": {"matchLabels": {"tier": "team"}}}],
        "to": [{"name": "shared-config"}],
    },
    namespace="local",
)


def test_why_shows_the_grant_that_shares_a_resource_of_another_namespace() -> None:
    reader = agent("dev", tools=[{"name": "reader"}], resources=[], resourceSelector=None)
    shared = observed(
        agent=reader,
        resources=[SHARED],
        tools=[SHARED_TOOL],
        agents=[],
        holds=[],
        grants=[SHARE],
        namespace_labels={"tier": "team"},
    )
    doc = ex.explain(shared)
    (row,) = doc["bindings"]
    assert row["state"] == "Bound"
    assert row["resource"]["grant"] == "local/share-config"
    assert "shared by ResourceGrant local/share-config" in why_text.render_text(doc)

    unlabelled = ex.explain(observed(**{**shared.__dict__, "namespace_labels": {}}))
    (refused,) = unlabelled["bindings"]
    assert refused["state"] == "Error"
    assert "no ResourceGrant there lets namespace 'demo' bind it by static" in refused["message"]


def test_a_grant_that_does_not_parse_is_ignored_with_its_reason() -> None:
    broken = obj("ResourceGrant", "broken", {"from": "everyone", "to": []}, namespace="local")
    reader = agent("dev", tools=[{"name": "reader"}], resources=[], resourceSelector=None)
    doc = ex.explain(
        observed(
            agent=reader,
            resources=[SHARED],
            tools=[SHARED_TOOL],
            agents=[],
            holds=[],
            grants=[broken, SHARE],
            namespace_labels={"tier": "team"},
        )
    )
    ignored = doc["ignored"]
    assert ignored["ResourceGrant local/broken"] == "spec.from: Input should be a valid list"
    assert "ResourceGrant local/share-config" not in ignored
    (row,) = doc["bindings"]
    assert row["resource"]["grant"] == "local/share-config"  # the valid grant still applies


# ------------------------------------------------------------ acknowledgements, as the controller


WRITTEN = ack.digest('{"bindings": [], "nonce": "0123456789abcdef"}')
"""The digest the agent's status records for the controller's last write."""


def acknowledging_world(lease_annotations: dict[str, str] | None, *, age: float) -> ex.Observed:
    """An idle agent whose session runs a pod with the delivery sidecar; the document the
    controller delivers was written ``age`` seconds before ``now``."""
    me = agent("dev", resources=[], tools=[], resourceSelector=None)
    running = pod(0)
    running["metadata"]["uid"] = "pod-1"
    running["status"]["conditions"] = [{"type": "Ready", "status": "True"}]
    # the ConfigMap is not observed (``why`` may not read it): the recorded write is in place
    me["status"] = {"delivery": {"digest": WRITTEN, "writtenAt": "2026-12-01T12:00:00Z"}}
    lease = None if lease_annotations is None else {"metadata": {"annotations": lease_annotations}}
    return ex.Observed(
        agent=me,
        types=TYPES,
        session=session(0, RUNTIME),
        pod=running,
        acknowledging=True,
        ack_lease=lease,
        now=datetime(2026, 12, 1, 12, 0, 0, tzinfo=UTC) + timedelta(seconds=age),
    )


def ready_of(doc: dict[str, Any]) -> tuple[str, str]:
    ready = next(c for c in doc["conditions"] if c["type"] == "Ready")
    return ready["status"], ready["reason"]


def test_an_unacknowledged_document_is_pending_then_overdue() -> None:
    assert ready_of(ex.explain(acknowledging_world(None, age=5))) == ("False", "DeliveryPending")
    late = ex.explain(acknowledging_world(None, age=61))
    assert ready_of(late) == ("False", "SessionNotAcknowledging")
    assert "not yet acknowledged" in why_text.render_text(late)


def test_a_document_the_controller_has_yet_to_write_names_no_digest() -> None:
    world = acknowledging_world(None, age=5)
    world.agent["status"] = {}  # nothing written yet
    doc = ex.explain(world)
    assert doc["delivery"]["toBeWritten"] is True
    assert "digest" not in doc["delivery"]
    assert ready_of(doc) == ("False", "DeliveryPending")
    assert "Bindings document: not written yet" in why_text.render_text(doc)
    written = ex.explain(acknowledging_world(None, age=5))
    assert written["delivery"]["digest"] == WRITTEN
    assert "toBeWritten" not in written["delivery"]


def test_an_applied_or_refused_document_reads_as_the_controller_says() -> None:
    digest = ex.explain(acknowledging_world(None, age=5))["delivery"]["digest"]
    applied = {
        ack.POD_UID: "pod-1",
        ack.APPLIED_DIGEST: digest,
        ack.ACKNOWLEDGES: "true",
    }
    doc = ex.explain(acknowledging_world(applied, age=5))
    assert ready_of(doc) == ("True", "BindingsDelivered")
    assert "taken in by the session" in why_text.render_text(doc)
    refused = {ack.POD_UID: "pod-1", ack.REFUSED_DIGEST: digest, ack.REFUSAL: "no such repo"}
    doc = ex.explain(acknowledging_world(refused, age=5))
    assert ready_of(doc) == ("False", "DocumentRefused")
    assert "refused by the session: no such repo" in why_text.render_text(doc)
    another_pod = {**applied, ack.POD_UID: "pod-0"}
    assert ready_of(ex.explain(acknowledging_world(another_pod, age=5))) == (
        "False",
        "DeliveryPending",
    )


# ------------------------------------------------------------ specs the models refuse


def test_a_spec_the_size_parser_refuses_is_reported_not_raised() -> None:
    huge = agent("huge", runtime={**RUNTIME, "workspace": {"size": "1Ei"}})
    doc = ex.explain(observed(agent=huge))
    assert doc["state"] == "Error"
    assert "spec.runtime.workspace.size" in doc["specError"]
    assert "1Ei" in doc["specError"]
    assert "spec rejected" in why_text.render_text(doc)
    # A rival whose spec is refused is left out, as the controller leaves it out.
    fine = ex.explain(observed(agents=[huge, *RIVALS]))
    assert "AgentSpec demo/huge" in fine["ignored"]
    assert fine["work"]["state"] == "Working"


# ------------------------------------------------------------ text


def test_event_columns_line_up_whatever_their_widths() -> None:
    events = [
        {"time": "2026-11-30T12:00:00Z", "type": "Normal", "reason": "R", "message": "one"},
        {
            "time": "2026-11-30T12:00:05.123456Z",
            "type": "Warning",
            "reason": "SessionNotAcknowledging",
            "message": "two",
        },
    ]
    lines = why_text.render_text({"agent": "demo/x", "generation": 1, "events": events})
    first, second = lines.splitlines()[-2:]
    assert first.index("one") == second.index("two")
    assert first.index("R ") == second.index("SessionNotAcknowledging")
    assert "Normal  " in first  # each column one space wider than its widest cell at least
