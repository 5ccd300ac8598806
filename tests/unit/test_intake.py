"""The intake: what an observed version does to the view and the queue.

No API server is involved: intake only updates memory and queues requests. What the reconcilers
then write is tested against the real API server in tests/integration.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest

from controller.domain.refs import Request
from controller.domain.work import hold_name
from controller.k8s.api import (
    AGENTS,
    CONFIG_MAPS,
    LEASES,
    RESOURCE_TYPES,
    STATEFUL_SETS,
    TOOLS,
    ApiError,
    Endpoint,
)
from controller.reconcile import Controller
from controller.reconcile.clock import Instant
from controller.reconcile.passes import Pass
from controller.reconcile.store import Tombstones
from controller.reconcile.writer import StaleWriteError

NS = "team"


def pass_of(key: str, body: dict[str, Any] | None = None) -> Pass:
    """A pass of the agent ``key`` (over ``body``, as observed)."""
    return Pass.of(Request.agent(key), body or {}, Instant(0.0, datetime.now(UTC)))


def body(
    kind: str, name: str, spec: dict[str, Any], rv: int, *, uid: str = "", ns: str = NS
) -> dict[str, Any]:
    md: dict[str, Any] = {"name": name, "uid": uid or f"{name}-uid", "resourceVersion": str(rv)}
    if ns:
        md["namespace"] = ns
    return {"apiVersion": "bindery.dev/v1alpha1", "kind": kind, "metadata": md, "spec": spec}


def drain(c: Controller) -> set[tuple[str, str]]:
    return {(r.kind.value, r.ref.key) for r in c.queue.drain()}


def controller() -> Controller:
    c = Controller(api=None)  # type: ignore[arg-type]  # intake never calls the API
    c.observe(RESOURCE_TYPES, body("ResourceType", "git-checkout", {}, 1, ns=""))
    c.observe(
        RESOURCE_TYPES,
        body("ResourceType", "worktree", {"parentTypes": ["git-checkout"]}, 2, ns=""),
    )
    c.observe(
        TOOLS,
        body(
            "Tool",
            "fmt",
            {"resourceSlots": [{"name": "repo", "resourceType": "git-checkout"}]},
            3,
        ),
    )
    c.observe(
        AGENTS,
        body(
            "AgentSpec",
            "a",
            {
                "resources": [{"name": "source", "tag": "worktree", "uri": "worktree://x"}],
                "tools": [{"name": "fmt"}],
            },
            4,
        ),
    )
    drain(c)
    return c


def test_a_spec_change_queues_the_object_and_its_dependents() -> None:
    c = controller()
    c.observe(RESOURCE_TYPES, body("ResourceType", "worktree", {"parentTypes": []}, 10, ns=""))
    assert ("agent", f"{NS}/a") in drain(c)


def test_an_older_event_than_what_is_cached_is_ignored() -> None:
    c = controller()
    c.observe(AGENTS, body("AgentSpec", "a", {}, 3))
    assert drain(c) == set()
    assert c.registry.agent(f"{NS}/a") is not None
    assert c.registry.agent(f"{NS}/a").spec.tools  # type: ignore[union-attr]


def test_the_echo_of_our_own_write_is_ignored() -> None:
    c = controller()
    cached = c.store.get(AGENTS, f"{NS}/a")
    assert cached is not None
    c.observe(AGENTS, dict(cached))
    assert drain(c) == set()


def test_a_late_event_for_a_deleted_object_cannot_bring_it_back() -> None:
    c = controller()
    c.observe(AGENTS, body("AgentSpec", "a", {}, 20), deleted=True)
    assert c.registry.agent(f"{NS}/a") is None
    drain(c)
    c.observe(AGENTS, body("AgentSpec", "a", {}, 21))  # same uid: a stale MODIFIED
    assert c.registry.agent(f"{NS}/a") is None
    c.observe(AGENTS, body("AgentSpec", "a", {}, 22, uid="new-uid"))  # re-created
    assert c.registry.agent(f"{NS}/a") is not None


def test_a_spec_the_models_reject_is_recorded_not_raised() -> None:
    c = controller()
    c.observe(AGENTS, body("AgentSpec", "a", {"relaunchGeneration": -1}, 30))
    assert "relaunchGeneration" in c.intake.parse_errors[Request.agent(f"{NS}/a")]
    assert c.registry.agent(f"{NS}/a") is None
    assert ("agent", f"{NS}/a") in drain(c)


def test_managed_fields_are_not_kept() -> None:
    c = controller()
    b = body("Tool", "fmt", {}, 40)
    b["metadata"]["managedFields"] = [{"manager": "kubectl"}]
    c.observe(TOOLS, b)
    assert "managedFields" not in c.store.get(TOOLS, f"{NS}/fmt")["metadata"]  # type: ignore[index]


def hold(rv: int, holder: str = "a", uid: str = "lease-1") -> dict[str, Any]:
    return {
        "metadata": {
            "name": hold_name("gh://1"),
            "namespace": NS,
            "uid": uid,
            "resourceVersion": str(rv),
            "annotations": {"bindery.dev/uri": "gh://1", "bindery.dev/holder-uid": f"{holder}-uid"},
        },
        "spec": {"holderIdentity": f"{NS}/{holder}"},
    }


def test_holds_are_filed_by_uri_and_by_holder_and_forgotten_on_delete() -> None:
    c = controller()
    c.observe(LEASES, hold(50))
    assert c.intake.holds.by_slot[(NS, "gh://1")].holder == f"{NS}/a"
    assert c.intake.holds.by_holder.get("a-uid") == {(NS, "gh://1")}
    assert ("agent", f"{NS}/a") in drain(c)
    c.observe(LEASES, hold(51), deleted=True)
    assert (NS, "gh://1") not in c.intake.holds.by_slot
    assert c.intake.holds.by_holder.get("a-uid") == frozenset()
    c.observe(LEASES, hold(50))  # the stale ADDED that arrives late
    assert (NS, "gh://1") not in c.intake.holds.by_slot


def test_an_owned_config_map_change_queues_its_agent() -> None:
    c = controller()
    cm = {
        "metadata": {
            "name": "a-bindings",
            "namespace": NS,
            "uid": "cm-1",
            "resourceVersion": "60",
            "labels": {"bindery.dev/agent": "a"},
        },
        "data": {},
    }
    c.observe(CONFIG_MAPS, cm)
    assert drain(c) == {("agent", f"{NS}/a")}
    c.observe(CONFIG_MAPS, cm)  # the same version again: nothing to do
    assert drain(c) == set()


def test_tombstones_forget_the_oldest_beyond_capacity() -> None:
    t = Tombstones(2)
    for uid in ("a", "b", "c"):
        t.add(uid)
    assert "a" not in t
    assert "b" in t
    assert "c" in t


class _DeletesAfterAnotherCreate:
    """Stands in for the API during one delete whose watch events overtake its response."""

    def __init__(self, c: Controller) -> None:
        self.c = c

    async def delete(self, *_: Any, **__: Any) -> bool:
        # While the DELETE is in flight: its event arrives and zed creates the next hold.
        self.c.observe(LEASES, hold(71, holder="a", uid="lease-1"), deleted=True)
        self.c.observe(LEASES, hold(72, holder="zed", uid="lease-2"))
        return True


async def test_releasing_a_hold_never_forgets_the_next_holders_hold_of_the_same_name() -> None:
    c = controller()
    c.observe(LEASES, hold(70, holder="a", uid="lease-1"))
    released = c.intake.holds.by_slot[(NS, "gh://1")]
    c.writer.api = _DeletesAfterAnotherCreate(c)  # type: ignore[assignment]
    await c.holds.release(pass_of(f"{NS}/a"), released)
    assert c.intake.holds.by_slot[(NS, "gh://1")].holder == f"{NS}/zed"
    assert c.intake.holds.by_holder.get("zed-uid") == {(NS, "gh://1")}
    assert "lease-1" in c.store.tombstones


class _WatchOvertakesWrite:
    """An API whose write responses arrive after the watch event of a later change."""

    def __init__(self, c: Controller) -> None:
        self.c = c

    async def create(self, kind: Endpoint, desired: dict[str, Any]) -> dict[str, Any]:
        created = {**desired, "metadata": {**desired["metadata"], "resourceVersion": "10"}}
        # The controller-manager updates the new StatefulSet's status; its event comes first.
        updated = {**created, "metadata": {**created["metadata"], "resourceVersion": "12"}}
        self.c.observe(kind, {**updated, "status": {"replicas": 1}})
        return created

    async def merge_patch(self, *_: Any, **__: Any) -> dict[str, Any]:
        written = body("AgentSpec", "a", {}, 20)
        written["metadata"]["finalizers"] = ["bindery.dev/work-hold"]
        # Meanwhile the user edits the spec; the watch delivers the edit before our response.
        edited = body("AgentSpec", "a", {"relaunchGeneration": 1}, 21)
        edited["metadata"]["finalizers"] = ["bindery.dev/work-hold"]
        self.c.observe(AGENTS, edited)
        return written


async def test_a_session_write_response_never_replaces_a_newer_watched_version() -> None:
    c = controller()
    c.observe(AGENTS, body("AgentSpec", "r", {"runtime": {"image": "example/agent:1"}}, 5))
    agent = c.registry.agent(f"{NS}/r")
    assert agent is not None
    c.writer.api = _WatchOvertakesWrite(c)  # type: ignore[assignment]
    await c.sessions.converge(pass_of(f"{NS}/r"), agent)
    # Caching the create's response (rv 10) would make the next guarded relaunch fail until
    # some unrelated event refreshed the StatefulSet.
    cached = c.store.get(STATEFUL_SETS, f"{NS}/r-session")
    assert cached is not None
    assert cached["metadata"]["resourceVersion"] == "12"
    assert cached["status"] == {"replicas": 1}


async def test_a_finalizer_write_response_never_hides_a_newer_spec() -> None:
    c = controller()
    key = f"{NS}/a"
    c.writer.api = _WatchOvertakesWrite(c)  # type: ignore[assignment]
    body_ = c.store.get(AGENTS, key)
    assert body_ is not None
    await c.holds.ensure_finalizer(pass_of(key, body_), body_, present=True)
    cached = c.store.get(AGENTS, key)
    assert cached is not None
    assert cached["metadata"]["resourceVersion"] == "21"
    assert cached["spec"] == {"relaunchGeneration": 1}
    assert ("agent", key) in drain(c)


class _WorkloadChangedMeanwhile:
    def __init__(self, current: dict[str, Any]) -> None:
        self.current = current

    async def json_patch_at(self, kind: Endpoint, ns: str, name: str, *_: Any) -> dict[str, Any]:
        raise ApiError(422, "PATCH", kind.path(ns, name), {"message": "test operation failed"})

    async def get(self, *_: Any) -> dict[str, Any]:
        return self.current


async def test_a_refused_relaunch_reads_the_workload_again_before_its_retry() -> None:
    c = controller()
    c.observe(AGENTS, body("AgentSpec", "r", {"runtime": {"image": "example/agent:2"}}, 5))
    agent = c.registry.agent(f"{NS}/r")
    assert agent is not None
    stale = body("StatefulSet", "r-session", {}, 10)
    c.store.put(STATEFUL_SETS, stale)
    desired = {"metadata": {"name": "r-session", "annotations": {}}, "spec": {"template": {}}}
    c.writer.api = _WorkloadChangedMeanwhile(body("StatefulSet", "r-session", {}, 14))  # type: ignore[assignment]
    with pytest.raises(StaleWriteError):
        await c.sessions.relaunch(pass_of(f"{NS}/r"), stale, desired)
    assert c.store.get(STATEFUL_SETS, f"{NS}/r-session")["metadata"]["resourceVersion"] == "14"  # type: ignore[index]
