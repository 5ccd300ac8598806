"""Benchmark of binding resolution: cold resolution of every agent, and incremental updates.

Builds a synthetic cluster (at ``--scale 1``: 10,000 agents using 5 tools of 4 slots each, over
100,000 resources of 200 types in 100 namespaces), then prints each figure with its target and
the ratio between them (a ratio at or below 1.00 meets the target)::

    .venv/bin/python -m bench.bench_resolve [--scale 0.1] [--seed 1]
"""

from __future__ import annotations

import argparse
import gc
import random
import resource
import statistics
import sys
import time
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import partial

from controller.domain.models import (
    AgentObject,
    AgentSpecSpec,
    DirectBinding,
    LabelSelector,
    LabelSelectorRequirement,
    ObjectMeta,
    ResourceObject,
    ResourceSlot,
    ResourceSpec,
    ResourceTypeObject,
    ResourceTypeSpec,
    ToolObject,
    ToolSpec,
    ToolUse,
)
from controller.domain.registry import Affected, Registry

COLD_TARGET_S = 2.0
STEP_TARGET_MS = 10.0
MEMORY_TARGET_MB = 500.0
CHAIN_DEPTH = 400
CHAIN_TARGET_S = 0.5
"""A chain of 400 types registered child-first (as a start-up LIST in name order can), then every
type it affected closed once, as their status is written (10 s before closures were built
from parents' closures; 0.12 s after, on the same machine)."""

SLOT_NAMES = ("repo", "config", "target", "out", "input", "cache", "docs", "logs")
TYPES = 200
ROOTS = 20
LEVEL1 = 80
"""Types ``t000..t019`` are roots, ``t020..t079`` their children, ``t080..t199`` grandchildren."""
KINDS_PER_NAMESPACE = 6
TRIALS = 30


@dataclass(frozen=True)
class Shape:
    """How big the synthetic cluster is (the type hierarchy is the same at every scale)."""

    namespaces: int
    resources_per_namespace: int
    agents_per_namespace: int
    tools_per_namespace: int = 50

    @classmethod
    def at(cls, scale: float) -> Shape:
        namespaces = max(1, round(100 * scale))
        return cls(
            namespaces=namespaces,
            resources_per_namespace=max(20, round(100_000 * scale / namespaces)),
            agents_per_namespace=max(2, round(10_000 * scale / namespaces)),
        )


# --------------------------------------------------------------------------------------------
# The synthetic cluster


def _name(index: int) -> str:
    return f"t{index:03d}"


def _index(type_name: str) -> int:
    return int(type_name[1:])


def _parent(index: int) -> int | None:
    if index < ROOTS:
        return None
    return (index - ROOTS) // 3 if index < LEVEL1 else ROOTS + (index - LEVEL1) // 2


def lineage(index: int) -> list[int]:
    """The type and its first-parent ancestors, leaf first."""
    out = [index]
    parent = _parent(index)
    while parent is not None:
        out.append(parent)
        parent = _parent(parent)
    return out


def build_types() -> list[ResourceTypeObject]:
    """20 roots with two levels below them; every tenth non-root type has a second parent."""
    out = []
    for i in range(TYPES):
        parent = _parent(i)
        parents = [] if parent is None else [_name(parent)]
        if parent is not None and i % 10 == 0:
            parents.append(_name((i + 7) % ROOTS))
        spec = ResourceTypeSpec(parent_types=parents, uri_schemes=[f"s{i}"] if i % 2 else [])
        out.append(ResourceTypeObject(meta=ObjectMeta(name=_name(i)), spec=spec))
    return out


@dataclass
class Namespace:
    """One namespace's objects; its resources come in a few kinds (leaf types), as in a project."""

    name: str
    kinds: list[int]
    resources: list[ResourceObject]
    tools: list[ToolObject]


def build_resources(
    shape: Shape, rng: random.Random, ns: str, kinds: Sequence[int]
) -> list[ResourceObject]:
    """Each label group holds four resources of the namespace's first four kinds."""
    out = []
    for j in range(shape.resources_per_namespace):
        t = kinds[j % 4]
        meta = ObjectMeta(
            name=f"r{j}",
            namespace=ns,
            uid=f"{ns}-uid-{j}",
            labels={"group": f"g{j // 4}", "tier": rng.choice("abc")},
        )
        spec = ResourceSpec(
            type=_name(t),
            uri=f"s{t}://{ns}/r{j}",
            alias=rng.choice(SLOT_NAMES) if rng.random() < 0.1 else None,
            attributes={"owner": "bench"},
        )
        out.append(ResourceObject(meta=meta, spec=spec))
    return out


def _contextual_type(rng: random.Random, kinds: Sequence[int]) -> str:
    """Mostly a kind itself (one linked resource fits), sometimes its parent or root (several
    may fit, and only an alias equal to the slot name settles it)."""
    roll = rng.random()
    return _name(lineage(rng.choice(kinds))[0 if roll < 0.75 else 1 if roll < 0.95 else -1])


def build_tools(
    shape: Shape,
    rng: random.Random,
    ns: str,
    kinds: Sequence[int],
    resources: Sequence[ResourceObject],
) -> list[ToolObject]:
    """Each tool: two contextual slots, one static, one parameter, asking for the namespace's
    kinds or their ancestors (a few static slots ask for an unrelated type)."""
    tools = []
    for k in range(shape.tools_per_namespace):
        names = rng.sample(SLOT_NAMES, 4)
        static = rng.choice(resources)
        static_type = rng.choice(lineage(_index(static.spec.type)))
        if rng.random() < 0.05:
            static_type = rng.randrange(TYPES)
        slots = [
            ResourceSlot(name=names[0], resource_type=_contextual_type(rng, kinds[:4])),
            ResourceSlot(
                name=names[1],
                resource_type=_contextual_type(rng, kinds[:4]),
                required=rng.random() < 0.5,
            ),
            ResourceSlot(
                name=names[2],
                resource_type=_name(static_type),
                binding="static",
                static_resource=static.meta.name,
            ),
            ResourceSlot(
                name=names[3],
                resource_type=_name(lineage(rng.choice(kinds[:4]))[-1]),
                binding="parameter",
            ),
        ]
        tools.append(
            ToolObject(
                meta=ObjectMeta(name=f"tool{k}", namespace=ns), spec=ToolSpec(resource_slots=slots)
            )
        )
    return tools


def _selector(rng: random.Random, group: str, groups: int) -> LabelSelector | None:
    """Mostly the agent's own group (four resources); sometimes a second group too, a tier
    filter, or no selector at all."""
    roll = rng.random()
    if roll < 0.7:
        return LabelSelector(match_labels={"group": group})
    if roll < 0.8:
        return LabelSelector(
            match_expressions=[
                LabelSelectorRequirement(
                    key="group", operator="In", values=[group, f"g{rng.randrange(groups)}"]
                ),
                LabelSelectorRequirement(key="tier", operator="NotIn", values=["c"]),
            ]
        )
    if roll < 0.9:
        return LabelSelector(
            match_labels={"group": group},
            match_expressions=[LabelSelectorRequirement(key="tier", operator="Exists")],
        )
    return None


def _params(rng: random.Random, tool: ToolObject, ns: Namespace) -> dict[str, str]:
    """Values for half of the tool's parameter slots: a resource of a fitting kind (from the
    first ten label groups, which hold every kind), named by name, namespace/name, uid or URI;
    one in twenty does not fit."""
    params = {}
    for slot in tool.spec.resource_slots:
        if slot.binding == "parameter" and rng.random() < 0.5:
            fitting = [
                r
                for r in ns.resources[:40]
                if slot.resource_type in map(_name, lineage(_index(r.spec.type)))
            ]
            target = rng.choice(ns.resources if rng.random() < 0.05 else fitting)
            params[slot.name] = rng.choice(
                (target.meta.name, target.meta.key, target.meta.uid, target.spec.uri)
            )
    return params


def build_agents(shape: Shape, rng: random.Random, ns: Namespace) -> list[AgentObject]:
    """Agents working on a resource of their own label group: a ``work`` binding to it (tagged
    with an ancestor of its type), an unregistered ``notes`` binding, a selector for the group,
    and five tools with some parameters."""
    groups = shape.resources_per_namespace // 4
    agents = []
    for k in range(shape.agents_per_namespace):
        group = rng.randrange(groups)
        work = ns.resources[4 * group + rng.randrange(4)]
        uses = [
            ToolUse(name=tool.meta.name, params=_params(rng, tool, ns))
            for tool in rng.sample(ns.tools, 5)
        ]
        notes_kind = rng.choice(ns.kinds[4:])
        spec = AgentSpecSpec(
            resources=[
                DirectBinding(
                    name="work",
                    tag=_name(rng.choice(lineage(_index(work.spec.type)))),
                    uri=work.spec.uri,
                ),
                DirectBinding(
                    name="notes", tag=_name(notes_kind), uri=f"s{notes_kind}://{ns.name}/notes/{k}"
                ),
            ],
            tools=uses,
            resource_selector=_selector(rng, f"g{group}", groups),
        )
        agents.append(AgentObject(meta=ObjectMeta(name=f"agent{k}", namespace=ns.name), spec=spec))
    return agents


@dataclass
class Cluster:
    types: list[ResourceTypeObject]
    resources: list[ResourceObject]
    tools: list[ToolObject]
    agents: list[AgentObject]


def build_cluster(shape: Shape, seed: int) -> Cluster:
    rng = random.Random(seed)
    cluster = Cluster(build_types(), [], [], [])
    for n in range(shape.namespaces):
        name = f"ns{n}"
        kinds = rng.sample(range(LEVEL1, TYPES), KINDS_PER_NAMESPACE)
        resources = build_resources(shape, rng, name, kinds)
        ns = Namespace(name, kinds, resources, build_tools(shape, rng, name, kinds, resources))
        cluster.resources += ns.resources
        cluster.tools += ns.tools
        cluster.agents += build_agents(shape, rng, ns)
    return cluster


def load(cluster: Cluster) -> Registry:
    registry = Registry()
    for t in cluster.types:
        registry.upsert_type(t)
    for r in cluster.resources:
        registry.upsert_resource(r)
    for tool in cluster.tools:
        registry.upsert_tool(tool)
    for agent in cluster.agents:
        registry.upsert_agent(agent)
    return registry


# --------------------------------------------------------------------------------------------
# Measurements


def reconcile(registry: Registry, affected: Affected) -> None:
    """What the controller does after a change: recompute everything the change affects."""
    for agent in affected.agents:
        registry.resolve(agent)
    for tool in affected.tools:
        registry.validate_tool(tool)
    for res in affected.resources:
        registry.validate_resource(res)
    for type_name in affected.types:
        registry.closure(type_name)


@dataclass(frozen=True)
class Step:
    """Timings (ms) of one kind of incremental change, and how many agents each touched."""

    times_ms: list[float]
    agents: list[int]


def measure_steps(registry: Registry, changes: Sequence[Callable[[], Affected]]) -> Step:
    times, agents = [], []
    for change in changes:
        start = time.process_time()
        affected = change()
        reconcile(registry, affected)
        times.append((time.process_time() - start) * 1000)
        agents.append(len(affected.agents))
    return Step(times, agents)


def _edited_resource(resource: ResourceObject) -> ResourceObject:
    spec = resource.spec.model_copy(update={"attributes": {"owner": "bench", "edited": "yes"}})
    return resource.model_copy(update={"spec": spec})


def _edited_type(rtype: ResourceTypeObject) -> ResourceTypeObject:
    """The type with one more parent (a root), so its closure changes."""
    parents = [*rtype.spec.parent_types, "t000"]
    return rtype.model_copy(
        update={"spec": rtype.spec.model_copy(update={"parent_types": parents})}
    )


def _edited_tool(tool: ToolObject) -> ToolObject:
    """The tool with its first slot's ``required`` flipped."""
    slots = list(tool.spec.resource_slots)
    slots[0] = slots[0].model_copy(update={"required": not slots[0].required})
    return tool.model_copy(update={"spec": tool.spec.model_copy(update={"resource_slots": slots})})


def changes(
    registry: Registry, cluster: Cluster, rng: random.Random
) -> dict[str, list[Callable[[], Affected]]]:
    """Prepared edits of each kind (built before timing: only the registry's work is timed).

    Resources: the ``work`` resource of a random agent (so some agent depends on it). Types: a
    leaf type gains a parent. Tools: a random tool's slot changes.
    """
    by_uri = {(r.meta.namespace, r.spec.uri): r for r in cluster.resources}
    agents = rng.sample(cluster.agents, min(TRIALS, len(cluster.agents)))
    works = [by_uri[(a.meta.namespace, a.spec.resources[0].uri)] for a in agents]
    leaves = [t for t in cluster.types if not registry.types.descendants(t.meta.name)]
    tools = rng.sample(cluster.tools, min(TRIALS, len(cluster.tools)))
    return {
        "resource": [partial(registry.upsert_resource, _edited_resource(r)) for r in works],
        "type": [
            partial(registry.upsert_type, _edited_type(t))
            for t in rng.sample(leaves, min(TRIALS, len(leaves)))
        ],
        "tool": [partial(registry.upsert_tool, _edited_tool(t)) for t in tools],
    }


def measure_chain(depth: int) -> tuple[float, int]:
    """CPU seconds and closure steps to register a ``depth``-level chain of types child-first
    into an empty registry, closing every type each registration affects."""
    chain = [
        ResourceTypeObject(
            meta=ObjectMeta(name=f"c{i:04}"),
            spec=ResourceTypeSpec(parent_types=[f"c{i - 1:04}"] if i else []),
        )
        for i in range(depth)
    ]
    registry = Registry()
    start = time.process_time()
    affected: set[str] = set()
    for obj in reversed(chain):
        affected |= registry.upsert_type(obj).types
    for type_name in affected:  # the reconcile queue holds each type once
        registry.closure(type_name)
    return time.process_time() - start, registry.types.steps


def _ratio_line(label: str, value: float, unit: str, target: float, detail: str = "") -> str:
    return (
        f"{label}: {value:.2f} {unit}{detail} (target <= {target:g} {unit}, "
        f"ratio {value / target:.2f})"
    )


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--scale", type=float, default=1.0, help="size factor (1.0 = full size)")
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args(argv)
    shape = Shape.at(args.scale)
    rng = random.Random(args.seed)

    cluster = build_cluster(shape, args.seed)
    start = time.process_time()
    registry = load(cluster)
    load_s = time.process_time() - start
    gc.freeze()  # as a long-running controller should after its initial sync (bench/README.md)
    print(
        f"cluster: {len(cluster.agents)} agents x 5 tools x 4 slots, {len(cluster.resources)} "
        f"resources, {len(cluster.types)} types, {shape.namespaces} namespaces"
    )
    print(f"load (upsert every object): {load_s:.2f} s")

    start = time.process_time()
    for agent in cluster.agents:
        registry.resolve(agent.meta.key)
    cold_s = time.process_time() - start
    print(_ratio_line("cold resolution of all agents", cold_s, "s", COLD_TARGET_S))
    states = Counter(
        slot.state.value for a in cluster.agents for slot in registry.resolve(a.meta.key).slots
    )
    print("slot states: " + ", ".join(f"{state} {n}" for state, n in sorted(states.items())))

    for kind, edits in changes(registry, cluster, rng).items():
        step = measure_steps(registry, edits)
        worst = max(step.times_ms)
        detail = (
            f" worst of {len(step.times_ms)}, median {statistics.median(step.times_ms):.2f} ms, "
            f"agents re-resolved median {statistics.median(step.agents):g} max {max(step.agents)}"
        )
        print(_ratio_line(f"incremental, one {kind}", worst, "ms", STEP_TARGET_MS, detail))

    chain_s, chain_steps = measure_chain(CHAIN_DEPTH)
    print(
        _ratio_line(
            f"type chain of {CHAIN_DEPTH} registered child-first",
            chain_s,
            "s",
            CHAIN_TARGET_S,
            f", {chain_steps} closure steps",
        )
    )

    peak_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(_ratio_line("peak memory (RSS)", peak_mb, "MB", MEMORY_TARGET_MB))
    return 0


if __name__ == "__main__":
    sys.exit(main())
