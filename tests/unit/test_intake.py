"""The reconciler's intake: what a watch event does to the observed view and the queue.

No API server is involved: intake only updates memory and queues keys. What the reconciler then
writes is tested against the real API server in tests/integration.
"""

from __future__ import annotations

from typing import Any

import pytest

from controller.k8s.api import CONFIG_MAPS, LEASES, ApiError, Kind
from controller.reconciler import Controller, Tombstones

NS = "team"


def body(
    kind: str, name: str, spec: dict[str, Any], rv: int, *, uid: str = "", ns: str = NS
) -> dict[str, Any]:
    md: dict[str, Any] = {"name": name, "uid": uid or f"{name}-uid", "resourceVersion": str(rv)}
    if ns:
        md["namespace"] = ns
    return {"apiVersion": "bindery.dev/v1alpha1", "kind": kind, "metadata": md, "spec": spec}


def drain(c: Controller) -> set[tuple[str, str]]:
    items: set[tuple[str, str]] = set()
    while not c.queue._queue.empty():
        item = c.queue._queue.get_nowait()
        c.queue._pending.discard(item)
        items.add(item)
    return items


def controller() -> Controller:
    c = Controller(api=None)  # type: ignore[arg-type]  # intake never calls the API
    c.observe("type", body("ResourceType", "git-checkout", {}, 1, ns=""))
    c.observe("type", body("ResourceType", "worktree", {"parentTypes": ["git-checkout"]}, 2, ns=""))
    c.observe(
        "tool",
        body(
            "Tool",
            "fmt",
            {"resourceSlots": [{"name": "repo", "resourceType": "git-checkout"}]},
            3,
        ),
    )
    c.observe(
        "agent",
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
    c.observe("type", body("ResourceType", "worktree", {"parentTypes": []}, 10, ns=""))
    assert ("agent", f"{NS}/a") in drain(c)


def test_an_older_event_than_what_is_cached_is_ignored() -> None:
    c = controller()
    c.observe("agent", body("AgentSpec", "a", {}, 3))
    assert drain(c) == set()
    assert c.registry.agent(f"{NS}/a") is not None
    assert c.registry.agent(f"{NS}/a").spec.tools  # type: ignore[union-attr]


def test_the_echo_of_our_own_write_is_ignored() -> None:
    c = controller()
    cached = c.observed.bodies["agent"][f"{NS}/a"]
    c.observe("agent", dict(cached))
    assert drain(c) == set()


def test_a_late_event_for_a_deleted_object_cannot_bring_it_back() -> None:
    c = controller()
    c.observe("agent", body("AgentSpec", "a", {}, 20), deleted=True)
    assert c.registry.agent(f"{NS}/a") is None
    drain(c)
    c.observe("agent", body("AgentSpec", "a", {}, 21))  # same uid: a stale MODIFIED
    assert c.registry.agent(f"{NS}/a") is None
    c.observe("agent", body("AgentSpec", "a", {}, 22, uid="new-uid"))  # re-created
    assert c.registry.agent(f"{NS}/a") is not None


def test_a_spec_the_models_reject_is_recorded_not_raised() -> None:
    c = controller()
    c.observe("agent", body("AgentSpec", "a", {"relaunchGeneration": -1}, 30))
    assert "relaunchGeneration" in c.observed.parse_errors[("agent", f"{NS}/a")]
    assert c.registry.agent(f"{NS}/a") is None
    assert ("agent", f"{NS}/a") in drain(c)


def test_managed_fields_are_not_kept() -> None:
    c = controller()
    b = body("Tool", "fmt", {}, 40)
    b["metadata"]["managedFields"] = [{"manager": "kubectl"}]
    c.observe("tool", b)
    assert "managedFields" not in c.observed.bodies["tool"][f"{NS}/fmt"]["metadata"]


def hold(rv: int, holder: str = "a", uid: str = "lease-1") -> dict[str, Any]:
    return {
        "metadata": {
            "name": "bindery-work-x",
            "namespace": NS,
            "uid": uid,
            "resourceVersion": str(rv),
            "annotations": {"bindery.dev/uri": "gh://1", "bindery.dev/holder-uid": f"{holder}-uid"},
        },
        "spec": {"holderIdentity": f"{NS}/{holder}"},
    }


def test_holds_are_filed_by_uri_and_by_holder_and_forgotten_on_delete() -> None:
    c = controller()
    c.observe_owned(LEASES, hold(50))
    assert c.observed.holds[(NS, "gh://1")].holder == f"{NS}/a"
    assert c.observed.holds_of.get("a-uid") == {(NS, "gh://1")}
    assert ("agent", f"{NS}/a") in drain(c)
    c.observe_owned(LEASES, hold(51), deleted=True)
    assert (NS, "gh://1") not in c.observed.holds
    assert c.observed.holds_of.get("a-uid") == frozenset()
    c.observe_owned(LEASES, hold(50))  # the stale ADDED that arrives late
    assert (NS, "gh://1") not in c.observed.holds


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
    c.observe_owned(CONFIG_MAPS, cm)
    assert drain(c) == {("agent", f"{NS}/a")}
    c.observe_owned(CONFIG_MAPS, cm)  # the same version again: nothing to do
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
        self.c.observe_owned(LEASES, hold(71, holder="a", uid="lease-1"), deleted=True)
        self.c.observe_owned(LEASES, hold(72, holder="zed", uid="lease-2"))
        return True


async def test_releasing_a_hold_never_forgets_the_next_holders_hold_of_the_same_name() -> None:
    c = controller()
    c.observe_owned(LEASES, hold(70, holder="a", uid="lease-1"))
    released = c.observed.holds[(NS, "gh://1")]
    c.api = _DeletesAfterAnotherCreate(c)  # type: ignore[assignment]
    await c._release(released)
    assert c.observed.holds[(NS, "gh://1")].holder == f"{NS}/zed"
    assert c.observed.holds_of.get("zed-uid") == {(NS, "gh://1")}
    assert "lease-1" in c.observed.tombstones


class _WatchOvertakesWrite:
    """An API whose write responses arrive after the watch event of a later change."""

    def __init__(self, c: Controller) -> None:
        self.c = c

    async def create(self, kind: Kind, desired: dict[str, Any]) -> dict[str, Any]:
        created = {**desired, "metadata": {**desired["metadata"], "resourceVersion": "10"}}
        # The controller-manager updates the new StatefulSet's status; its event comes first.
        updated = {**created, "metadata": {**created["metadata"], "resourceVersion": "12"}}
        self.c.observe_owned(kind, {**updated, "status": {"replicas": 1}})
        return created

    async def merge_patch(self, *_: Any, **__: Any) -> dict[str, Any]:
        written = body("AgentSpec", "a", {}, 20)
        written["metadata"]["finalizers"] = ["bindery.dev/work-hold"]
        # Meanwhile the user edits the spec; the watch delivers the edit before our response.
        edited = body("AgentSpec", "a", {"relaunchGeneration": 1}, 21)
        edited["metadata"]["finalizers"] = ["bindery.dev/work-hold"]
        self.c.observe("agent", edited)
        return written


async def test_a_session_write_response_never_replaces_a_newer_watched_version() -> None:
    c = controller()
    c.observe("agent", body("AgentSpec", "r", {"runtime": {"image": "example/agent:1"}}, 5))
    agent = c.registry.agent(f"{NS}/r")
    assert agent is not None
    c.api = _WatchOvertakesWrite(c)  # type: ignore[assignment]
    await c._converge_session(agent, c.observed.bodies["agent"][f"{NS}/r"])
    # Caching the create's response (rv 10) would make the next guarded relaunch fail until
    # some unrelated event refreshed the StatefulSet.
    cached = c.observed.sessions[f"{NS}/r-session"]
    assert cached["metadata"]["resourceVersion"] == "12"
    assert cached["status"] == {"replicas": 1}


async def test_a_finalizer_write_response_never_hides_a_newer_spec() -> None:
    c = controller()
    key = f"{NS}/a"
    c.api = _WatchOvertakesWrite(c)  # type: ignore[assignment]
    await c._ensure_finalizer(key, c.observed.bodies["agent"][key], present=True)
    cached = c.observed.bodies["agent"][key]
    assert cached["metadata"]["resourceVersion"] == "21"
    assert cached["spec"] == {"relaunchGeneration": 1}
    assert ("agent", key) in drain(c)


class _WorkloadChangedMeanwhile:
    def __init__(self, current: dict[str, Any]) -> None:
        self.current = current

    async def json_patch_at(self, kind: Kind, ns: str, name: str, *_: Any) -> dict[str, Any]:
        raise ApiError(422, "PATCH", kind.path(ns, name), {"message": "test operation failed"})

    async def get(self, *_: Any) -> dict[str, Any]:
        return self.current


async def test_a_refused_relaunch_reads_the_workload_again_before_its_retry() -> None:
    c = controller()
    c.observe("agent", body("AgentSpec", "r", {"runtime": {"image": "example/agent:2"}}, 5))
    agent = c.registry.agent(f"{NS}/r")
    assert agent is not None
    stale = body("StatefulSet", "r-session", {}, 10)
    c.observed.sessions[f"{NS}/r-session"] = stale
    desired = {"metadata": {"name": "r-session", "annotations": {}}, "spec": {"template": {}}}
    c.api = _WorkloadChangedMeanwhile(body("StatefulSet", "r-session", {}, 14))  # type: ignore[assignment]
    with pytest.raises(ApiError):
        await c._relaunch_session(agent, stale, desired)
    assert c.observed.sessions[f"{NS}/r-session"]["metadata"]["resourceVersion"] == "14"
