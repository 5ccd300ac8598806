"""The reconciler's intake: what a watch event does to the observed view and the queue.

No API server is involved: intake only updates memory and queues keys. What the reconciler then
writes is tested against the real API server in tests/integration.
"""

from __future__ import annotations

from typing import Any

from controller.k8s.api import CONFIG_MAPS, LEASES
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
