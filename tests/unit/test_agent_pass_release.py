"""Agent pass step 4 (release) and a deleted agent: a hold goes only once its session has let
go of the URI."""

from __future__ import annotations

import copy
import json
from typing import Any

import pytest

from controller.domain import acknowledgement as ack
from controller.domain import names
from controller.domain.refs import Request
from controller.k8s import api
from controller.k8s.builders.sidecar import DELIVERY_CONTAINER
from controller.reconcile import Controller
from harness.fakes import ScriptedApi
from tests.unit.agent_pass_world import (
    LEASE,
    NS,
    X,
    agent,
    edit,
    run,
    session_pod,
    with_runtime,
    world,
)
from tests.unit.virtual_clock import VirtualClock


async def test_a_hold_is_released_only_once_the_session_has_let_go(clock: VirtualClock) -> None:
    """Step 4's gate: the work URI leaves the running session's document, but the hold stays
    while that session (one that cannot acknowledge) may still work on it; the pass asks to be
    looked at again when the grace period is over, and that pass releases it."""
    c, fake = world(with_runtime(agent("a", X)), clock=clock)
    await run(c, "a")
    c.observe(api.PODS, session_pod(fake, "a"))
    edit(c, fake, with_runtime(agent("a", review=X)))
    c.queue.drain()
    fake.writes.clear()
    result = await run(c, "a")
    assert fake.writes == [("patch", "configmaps", "a-bindings"), ("status", "agentspecs", "a")]
    assert ("leases", NS, LEASE) in fake.objects  # not released yet
    assert result is not None
    grace = result.requeue_after
    assert grace is not None
    assert grace == pytest.approx(c.acks.grace, abs=1.0)
    await clock.advance(grace - 1.0)  # not yet over: still held
    c.queue.drain()
    await run(c, "a")
    assert ("leases", NS, LEASE) in fake.objects
    await clock.advance(1.0)
    c.queue.drain()
    fake.writes.clear()
    await run(c, "a")
    assert fake.writes[:2] == [("patch", "leases", LEASE), ("delete", "leases", LEASE)]
    assert ("leases", NS, LEASE) not in fake.objects
    assert fake.events[-1] == "ReleasedUnacknowledged"


async def test_handoff_goes_a_then_no_holder_then_b() -> None:
    c, fake = world(agent("a", X), agent("b", X))
    await run(c, "a", "b")
    fake.writes.clear()
    edit(c, fake, agent("a", review=X))  # A lets go of X as work (keeps it under another role)
    queued = c.queue.drain()
    assert Request.agent(f"{NS}/a") in queued
    await run(c, "a")
    assert fake.writes == [
        ("patch", "configmaps", "a-bindings"),  # A's session stops seeing X as work ...
        ("patch", "leases", LEASE),  # ... and only then is the hold released: its finalizer,
        ("delete", "leases", LEASE),  # then the Lease
        ("patch", "agentspecs", "a"),  # finalizer dropped
        ("status", "agentspecs", "a"),
    ]
    # The release queued the waiting claimant, not A again.
    assert c.queue.drain() == {Request.agent(f"{NS}/b")}
    fake.writes.clear()
    await run(c, "b")
    assert fake.writes[0] == ("create", "leases", LEASE)
    assert ("patch", "configmaps", "b-bindings") in fake.writes
    assert c.store.status(api.AGENTS, f"{NS}/b")["state"] == "Working"


async def test_a_hold_whose_namespace_is_going_away_outlives_the_holders_bindings() -> None:
    """The namespace controller deletes Leases and ConfigMaps in no particular order: the hold's
    finalizer keeps it until its holder has withdrawn the URI."""
    c, fake = world(agent("a", X))
    await run(c, "a")
    lease = fake.objects[("leases", NS, LEASE)]
    assert lease["metadata"]["finalizers"] == ["bindery.dev/hold"]
    lease["metadata"]["deletionTimestamp"] = "2026-12-01T00:00:00Z"  # marked, not gone
    lease["metadata"]["resourceVersion"] = str(next(fake._rv))
    c.observe(api.LEASES, copy.deepcopy(lease))
    assert Request.agent(f"{NS}/a") in c.queue.drain()
    fake.writes.clear()
    await run(c, "a")
    assert fake.writes[:2] == [("patch", "configmaps", "a-bindings"), ("patch", "leases", LEASE)]
    assert X not in fake.objects[("configmaps", NS, "a-bindings")]["data"]["bindings.json"]


async def test_a_holder_deleted_with_orphan_propagation_still_withdraws_before_releasing() -> None:
    """Orphan deletion removes the ConfigMap's owner reference before the holder's finalizer
    runs: the URI must still leave that document before the hold goes."""
    c, fake = world(agent("a", X), agent("b", X))
    await run(c, "a", "b")
    cm = fake.objects[("configmaps", NS, "a-bindings")]
    cm["metadata"].pop("ownerReferences")  # the garbage collector orphans it ...
    cm["metadata"]["resourceVersion"] = str(next(fake._rv))
    c.observe(api.CONFIG_MAPS, copy.deepcopy(cm))
    holder = fake.objects[("agentspecs", NS, "a")]  # ... and the holder is being deleted
    holder["metadata"]["deletionTimestamp"] = "2026-12-01T00:00:00Z"
    holder["metadata"]["resourceVersion"] = str(next(fake._rv))
    c.observe(api.AGENTS, copy.deepcopy(holder))
    fake.writes.clear()
    await run(c, "a")
    assert fake.writes[:3] == [
        ("patch", "configmaps", "a-bindings"),
        ("patch", "leases", LEASE),
        ("delete", "leases", LEASE),
    ]
    assert X not in fake.objects[("configmaps", NS, "a-bindings")]["data"]["bindings.json"]


async def test_a_hold_left_by_an_agent_that_vanished_is_released() -> None:
    """A holder removed without its finalizer's work (finalizer stripped by hand, deleted while
    unwatched) leaves a hold whose own finalizer waits for it: the controller releases it once
    the API server confirms the holder is gone."""
    c, fake = world(agent("a", X))
    await run(c, "a")
    del fake.objects[("agentspecs", NS, "a")]
    gone = fake.objects.get(("agentspecs", NS, "a")) or {
        "metadata": {"name": "a", "namespace": NS, "uid": "a-uid", "resourceVersion": "999"}
    }
    c.observe(api.AGENTS, gone, deleted=True)
    assert Request.agent(f"{NS}/a") in c.queue.drain()
    fake.writes.clear()
    await c.process(Request.agent(f"{NS}/a"))
    assert fake.writes == [
        ("patch", "configmaps", "a-bindings"),  # withdrawn first (the GC has not removed it)
        ("patch", "leases", LEASE),
        ("delete", "leases", LEASE),
    ]


def _vanish(c: Controller, fake: ScriptedApi, name: str) -> None:
    """The agent is removed without its finalizer's work (its finalizer stripped by hand)."""
    gone = fake.objects.pop(("agentspecs", NS, name))
    c.observe(api.AGENTS, copy.deepcopy(gone), deleted=True)


async def test_a_vanished_holders_hold_waits_for_its_session_pod_to_stop() -> None:
    """The holder is gone but its session pod still runs (the garbage collector stops it some
    time later): the hold stays, nobody reclaims it, and the session is being stopped; the
    pod's end releases it and the claimant takes it."""
    c, fake = world(with_runtime(agent("a", X)), agent("b", X))
    await run(c, "a", "b")
    pod = session_pod(fake, "a")
    c.observe(api.PODS, copy.deepcopy(pod))
    c.queue.drain()
    _vanish(c, fake, "a")
    assert Request.agent(f"{NS}/a") in c.queue.drain()
    fake.writes.clear()
    await c.process(Request.agent(f"{NS}/a"))
    assert fake.writes == [
        ("patch", "configmaps", "a-bindings"),  # the URI withdrawn from its document
        ("delete", "statefulsets", "a-session"),  # its session stopped (fencing by termination)
    ]
    assert ("leases", NS, LEASE) in fake.objects  # still held: the pod runs
    await run(c, "b")  # the claimant does not reclaim the hold of a gone holder yet
    assert fake.objects[("leases", NS, LEASE)]["spec"]["holderIdentity"] == f"{NS}/a"
    assert c.store.status(api.AGENTS, f"{NS}/b")["state"] == "Waiting"

    c.observe(api.PODS, pod, deleted=True)  # the pod is gone: a and the claimant are looked at
    assert c.queue.drain() >= {Request.agent(f"{NS}/a"), Request.agent(f"{NS}/b")}
    await c.process(Request.agent(f"{NS}/a"))
    assert ("leases", NS, LEASE) not in fake.objects
    await run(c, "b")
    assert fake.objects[("leases", NS, LEASE)]["spec"]["holderIdentity"] == f"{NS}/b"


async def test_a_claimant_never_reclaims_a_gone_holders_hold_while_its_pod_runs() -> None:
    """The claimant's own pass sees the holder gone (the API server confirms it) but the
    holder's session pod running: it waits, and takes the hold once the pod has stopped."""
    c, fake = world(with_runtime(agent("a", X)), agent("b", X))
    await run(c, "a", "b")
    pod = session_pod(fake, "a")
    c.observe(api.PODS, copy.deepcopy(pod))
    _vanish(c, fake, "a")  # gone; only the claimant has a pass
    c.queue.drain()
    await run(c, "b")
    assert fake.objects[("leases", NS, LEASE)]["spec"]["holderIdentity"] == f"{NS}/a"
    stopped = copy.deepcopy(pod)
    stopped["status"]["phase"] = "Succeeded"
    stopped["metadata"]["resourceVersion"] = str(next(fake._rv))
    c.observe(api.PODS, stopped)
    assert Request.agent(f"{NS}/b") in c.queue.drain()
    await run(c, "b")
    assert fake.objects[("leases", NS, LEASE)]["spec"]["holderIdentity"] == f"{NS}/b"


async def test_an_orphaned_session_pod_still_holds_a_releasing_agents_work() -> None:
    """The session StatefulSet deleted with orphan propagation: the pod loses its owner but is
    still the session, so the release goes on waiting for it."""
    c, fake = world(with_runtime(agent("a", X)))
    await run(c, "a")
    pod = session_pod(fake, "a")
    c.observe(api.PODS, copy.deepcopy(pod))
    edit(c, fake, with_runtime(agent("a", review=X)))
    c.queue.drain()
    await run(c, "a")
    assert ("leases", NS, LEASE) in fake.objects  # Releasing: the session cannot acknowledge
    sts = fake.objects.pop(("statefulsets", NS, "a-session"))
    c.observe(api.STATEFUL_SETS, copy.deepcopy(sts), deleted=True)
    pod["metadata"].pop("ownerReferences")  # orphaned by the garbage collector
    pod["metadata"]["resourceVersion"] = str(next(fake._rv))
    c.observe(api.PODS, copy.deepcopy(pod))
    c.queue.drain()
    await run(c, "a")
    assert ("leases", NS, LEASE) in fake.objects
    assert ("create", "statefulsets", "a-session") in fake.writes  # the session is recreated
    assert c.store.status(api.AGENTS, f"{NS}/a")["delivery"]["podUID"] == pod["metadata"]["uid"]


async def test_a_later_agents_pods_do_not_hold_up_an_earlier_agents_hold() -> None:
    """An agent of the same name made again: its session pods carry its own uid, so the hold
    its predecessor left is released once the predecessor's session pod is gone."""
    c, fake = world(with_runtime(agent("a", X)))
    await run(c, "a")
    pod = session_pod(fake, "a")
    c.observe(api.PODS, copy.deepcopy(pod))
    c.queue.drain()
    _vanish(c, fake, "a")
    c.queue.drain()
    await c.process(Request.agent(f"{NS}/a"))
    assert ("leases", NS, LEASE) in fake.objects
    c.observe(api.PODS, pod, deleted=True)
    successor = copy.deepcopy(pod)
    successor["metadata"]["uid"] = "a-pod-uid-2"
    successor["metadata"]["labels"]["bindery.dev/agent-uid"] = "a-uid-2"
    successor["metadata"]["resourceVersion"] = str(next(fake._rv))
    c.observe(api.PODS, successor)
    c.queue.drain()
    await c.process(Request.agent(f"{NS}/a"))
    assert ("leases", NS, LEASE) not in fake.objects


def _acknowledging(pod: dict[str, Any]) -> dict[str, Any]:
    """The session pod with the delivery sidecar: it can acknowledge documents."""
    pod["spec"] = {**pod["spec"], "initContainers": [{"name": DELIVERY_CONTAINER}]}
    return pod


def _applied(c: Controller, fake: ScriptedApi, name: str, document: str) -> None:
    """The session's sidecar records that the runtime applied ``document``."""
    record = ack.Acknowledgement(
        pod_uid=f"{name}-pod-uid",
        pod_name=f"{name}-session-0",
        delivered_digest=ack.digest(document),
        applied_digest=ack.digest(document),
        acknowledges=True,
    )
    lease = {
        "apiVersion": "coordination.k8s.io/v1",
        "kind": "Lease",
        "metadata": {
            "name": names.ack_lease_name(name),
            "namespace": NS,
            "annotations": {k: v for k, v in record.annotations().items() if v},
        },
        "spec": {},
    }
    c.observe(api.LEASES, fake.seed(api.LEASES, lease))


def _document(fake: ScriptedApi, name: str) -> str:
    return str(fake.objects[("configmaps", NS, f"{name}-bindings")]["data"]["bindings.json"])


async def test_an_acknowledgement_of_an_earlier_equal_document_confirms_nothing_later() -> None:
    """The ABA a chaos run found: the session applied D0 (no work); the work was given (D1) and
    withdrawn again within the session's apply time, so the bindings of D2 equal D0's. D2 is a
    write of its own (a fresh nonce, its own digest): the acknowledgement of D0 on record does
    not release the hold while the session may still be applying D1; D2's does."""
    c, fake = world(with_runtime(agent("a")))
    await run(c, "a")
    c.observe(api.PODS, _acknowledging(session_pod(fake, "a")))
    d0 = _document(fake, "a")
    _applied(c, fake, "a", d0)
    edit(c, fake, with_runtime(agent("a", X)))
    c.queue.drain()
    await run(c, "a")
    d1 = _document(fake, "a")
    assert X in d1
    assert ("leases", NS, LEASE) in fake.objects
    edit(c, fake, with_runtime(agent("a")))
    c.queue.drain()
    await run(c, "a")
    d2 = _document(fake, "a")
    assert json.loads(d2)["resources"] == json.loads(d0)["resources"] == []
    assert len({ack.digest(d0), ack.digest(d1), ack.digest(d2)}) == 3
    assert ("leases", NS, LEASE) in fake.objects, "released on the acknowledgement of D0"
    assert c.store.status(api.AGENTS, f"{NS}/a")["delivery"]["digest"] == ack.digest(d2)
    _applied(c, fake, "a", d1)  # the session catches up with D1: X is still in it
    c.queue.drain()
    await run(c, "a")
    assert ("leases", NS, LEASE) in fake.objects
    _applied(c, fake, "a", d2)
    c.queue.drain()
    await run(c, "a")
    assert ("leases", NS, LEASE) not in fake.objects
    assert _document(fake, "a") == d2, "an unchanged pass rewrites nothing"
