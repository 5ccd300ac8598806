"""The world an agent pass runs in, for the table tests of ``controller/reconcile/agent.py``:
agents, a controller over an in-memory stand-in API that numbers versions like etcd and can
refuse a write once, and the edits and objects a test brings into it.

That the API server itself behaves this way (create-if-absent, preconditions, generation bumps)
is proven against the real one in tests/integration/.
"""

from __future__ import annotations

import asyncio
import copy
from typing import Any

from controller.domain.refs import Request
from controller.domain.work import hold_name
from controller.k8s import api
from controller.reconcile import Controller
from controller.reconcile.clock import LOOP_CLOCK, Clock
from controller.reconcile.result import Result
from harness.fakes import ScriptedApi
from tests.unit.virtual_clock import VirtualClock

NS = "team"


Body = dict[str, Any]


Write = tuple[str, str, str]
"""(verb, plural, name)."""


def agent(name: str, work: str | None = None, *, review: str | None = None) -> Body:
    resources = []
    if work:
        resources.append({"name": "work", "tag": "issue", "uri": work})
    if review:
        resources.append({"name": "review", "tag": "issue", "uri": review})
    return {
        "apiVersion": "bindery.dev/v1alpha1",
        "kind": "AgentSpec",
        "metadata": {"name": name, "namespace": NS, "generation": 1},
        "spec": {"resources": resources},
    }


def world(*agents: Body, clock: Clock = LOOP_CLOCK) -> tuple[Controller, ScriptedApi]:
    fake = ScriptedApi()
    c = Controller(fake, clock=clock)  # type: ignore[arg-type]
    c.observe(api.RESOURCE_TYPES, fake.seed(api.RESOURCE_TYPES, _type("issue")))
    for body in agents:
        c.observe(api.AGENTS, fake.seed(api.AGENTS, body))
    c.queue.drain()
    return c, fake


def _type(name: str) -> Body:
    return {
        "apiVersion": "bindery.dev/v1alpha1",
        "kind": "ResourceType",
        "metadata": {"name": name, "generation": 1},
        "spec": {},
    }


async def run(c: Controller, *names: str) -> Result | None:
    """One pass of each agent named, in order; what the last one came to."""
    result = None
    for name in names:
        result = await c.process(Request.agent(f"{NS}/{name}"))
    await asyncio.sleep(0)  # let the event poster run
    await c.events.stop()
    return result


def edit(c: Controller, fake: ScriptedApi, body: Body) -> None:
    """A user's edit: the stored object changes (generation bumped), the watch reports it."""
    stored = fake.objects[("agentspecs", NS, body["metadata"]["name"])]
    stored["spec"] = copy.deepcopy(body["spec"])
    stored["metadata"]["generation"] += 1
    stored["metadata"]["resourceVersion"] = str(next(fake._rv))
    c.observe(api.AGENTS, copy.deepcopy(stored))


X = "gh://org/repo/issues/1"


LEASE = hold_name(X)


def hold_body(holder: str, *, name: str = LEASE, namespace: str = NS) -> Body:
    return {
        "metadata": {
            "name": name,
            "namespace": namespace,
            "labels": {"app.kubernetes.io/managed-by": "bindery"},
            "annotations": {"bindery.dev/uri": X, "bindery.dev/holder-uid": f"{holder}-uid"},
        },
        "spec": {"holderIdentity": f"{NS}/{holder}"},
    }


def with_runtime(body: Body) -> Body:
    body["spec"]["runtime"] = {"image": "example/agent:1"}
    return body


def session_pod(fake: ScriptedApi, agent_name: str) -> Body:
    """The running pod of an agent's session, as its StatefulSet made it (no delivery sidecar:
    it cannot acknowledge a document)."""
    sts = fake.objects[("statefulsets", NS, f"{agent_name}-session")]
    template = sts["spec"]["template"]
    owner = {"kind": "StatefulSet", "name": sts["metadata"]["name"], "uid": sts["metadata"]["uid"]}
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            **template["metadata"],
            "name": f"{agent_name}-session-0",
            "namespace": NS,
            "uid": f"{agent_name}-pod-uid",
            "resourceVersion": str(next(fake._rv)),
            "ownerReferences": [{**owner, "controller": True}],
        },
        "spec": template["spec"],
        "status": {
            "phase": "Running",
            "conditions": [{"type": "Ready", "status": "True"}],
            "containerStatuses": [{"name": "agent", "ready": True, "state": {"running": {}}}],
        },
    }


def with_idle_policy(body: Body, seconds: int = 30) -> Body:
    body["spec"]["runtime"] = {"image": "example/agent:1", "idle": {"suspendAfterSeconds": seconds}}
    return body


async def idle_for_long(clock: VirtualClock, c: Controller, seconds: float = 30) -> None:
    """Let the agent's idle period pass on the virtual clock (the idle clock its status
    recorded keeps counting), without the passes it would bring on the way."""
    await clock.advance(seconds + 1)
    c.queue.drain()


def replicas(fake: ScriptedApi, name: str) -> int:
    return int(fake.objects[("statefulsets", NS, f"{name}-session")]["spec"]["replicas"])


def world_objects(fake: ScriptedApi) -> set[tuple[str, str]]:
    """The objects the controller made (plural, name): the world after the passes, beside the
    agents and types the test put there."""
    return {(p, n) for (p, _, n) in fake.objects if p not in ("agentspecs", "resourcetypes")}
