"""Where the controller's memory goes per agent: its view of a settled namespace, in process.

No API server: the benchmark builds bench/e2e_objects.py's namespace (Resources, Tools, agents),
computes the statuses and bindings ConfigMaps a settled controller leaves with the controller's
own reconcile code (bench/e2e_prefill.py's recording stand-in for its API), gives every object
the metadata the API server adds (uid, resourceVersion, creationTimestamp, managedFields), and
then hands each body, freshly decoded from JSON as a watch delivers it, to a new controller, as a
restart does. It runs every pass once (they must write nothing) and measures what stays
allocated (tracemalloc), by the source file that allocated it, and the objects by type.

    python -m bench.bench_memory [--agents 1000,10000] [--resources 5000] [--top 25]

It prints, per size, the bytes per agent held after the passes and the files holding most;
between two sizes, the growth per added agent (the registry and Resources are the same). The
end-to-end figure (the controller's RSS after a real restart) is bench_e2e's scale phase.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import json
import logging
import sys
import time
import tracemalloc
import uuid
from collections import Counter
from typing import Any

import structlog

from bench import e2e_objects as objs
from bench.e2e_prefill import RecordingApi, settle
from controller.domain.refs import Kind
from controller.k8s import api as k8s_api
from controller.reconcile import Controller

Body = dict[str, Any]
NS = "bench-mem"


def _metadata(body: Body, rv: int) -> Body:
    """``body`` with what the API server adds to its metadata."""
    md = body.setdefault("metadata", {})
    md.setdefault("uid", str(uuid.uuid4()))
    md["resourceVersion"] = str(rv)
    md.setdefault("generation", 1)
    md.setdefault("creationTimestamp", "2026-12-05T08:00:00Z")
    md["managedFields"] = [
        {
            "manager": "bindery-bench",
            "operation": "Update",
            "apiVersion": body.get("apiVersion", "v1"),
            "time": "2026-12-05T08:00:00Z",
            "fieldsType": "FieldsV1",
            "fieldsV1": {"f:spec": {".": {}, "f:resources": {}}},
        }
    ]
    return body


def settled(agents: int, resources: int) -> list[tuple[k8s_api.Endpoint, str]]:
    """Every object of a settled namespace as (endpoint, JSON), statuses and ConfigMaps current."""
    structlog.configure(wrapper_class=structlog.make_filtering_bound_logger(logging.WARNING))
    shape = objs.Shape(agents=agents, resources=resources)
    rv = 1000
    bodies: dict[Kind, list[Body]] = {
        Kind.TYPE: objs.resource_types(),
        Kind.RESOURCE: objs.resources(NS, shape),
        Kind.TOOL: objs.tools(NS),
        Kind.AGENT: objs.agents(NS, shape),
    }
    recording = RecordingApi()
    ctl = Controller(recording, workers=1, rollout_delay=0.0)  # type: ignore[arg-type]
    for kind, items in bodies.items():
        for body in items:
            rv += 1
            ctl.observe(k8s_api.ENDPOINTS[kind], _metadata(body, rv))
    asyncio.run(settle(ctl))
    by_key = {
        (plural, b["metadata"].get("namespace", ""), b["metadata"]["name"]): b
        for kind, items in bodies.items()
        for b in items
        for plural in [k8s_api.ENDPOINTS[kind].plural]
    }
    for plural, ns, name, status in recording.statuses:
        rv += 1
        body = by_key[(plural, ns, name)]
        body["status"] = status
        body["metadata"]["resourceVersion"] = str(rv)
    out = [
        (k8s_api.ENDPOINTS[kind], json.dumps(b)) for kind, items in bodies.items() for b in items
    ]
    for _, cm in recording.creates:
        rv += 1
        cm["metadata"].pop("resourceVersion", None)
        out.append((k8s_api.CONFIG_MAPS, json.dumps(_metadata(cm, rv))))
    return out


def measure(agents: int, resources: int, top: int) -> dict[str, Any]:
    """A restart over the settled namespace: what it holds once every pass ran."""
    world = settled(agents, resources)
    gc.collect()
    tracemalloc.start(1)
    before = tracemalloc.take_snapshot()
    recording = RecordingApi()
    ctl = Controller(recording, workers=1, rollout_delay=0.0)  # type: ignore[arg-type]
    t = time.process_time()
    for endpoint, text in world:
        ctl.observe(endpoint, json.loads(text))
    observed_s = time.process_time() - t
    t = time.process_time()
    asyncio.run(settle(ctl, first=True))
    passes_s = time.process_time() - t
    del world
    gc.collect()
    after = tracemalloc.take_snapshot()
    tracemalloc.stop()
    stats = after.compare_to(before, "filename")
    total = sum(s.size_diff for s in stats)
    files = [(s.traceback[0].filename, s.size_diff) for s in stats[:top]]
    lines = after.compare_to(before, "lineno")[:top]
    types = Counter(type(o).__name__ for o in gc.get_objects())
    seen: set[int] = set()
    stored = {
        endpoint.plural: (len(objects), deep_size(objects, seen))
        for endpoint, objects in ctl.store._objects.items()
        if objects
    }
    writes = len(recording.statuses) + len(recording.creates)
    keep = ctl  # the view must live until the snapshot
    del keep
    return {
        "agents": agents,
        "resources": resources,
        "total": total,
        "observe_cpu_s": observed_s,
        "passes_cpu_s": passes_s,
        "writes": writes,
        "files": files,
        "lines": [(str(s.traceback[0]), s.size_diff, s.count_diff) for s in lines],
        "types": types.most_common(top),
        "stored": stored,
    }


def deep_size(obj: object, seen: set[int]) -> int:
    """The bytes of ``obj`` and of the dicts, lists and strings it holds, each counted once."""
    size, stack = 0, [obj]
    while stack:
        o = stack.pop()
        if id(o) in seen:
            continue
        seen.add(id(o))
        size += sys.getsizeof(o)
        if isinstance(o, dict):
            stack.extend(o.keys())
            stack.extend(o.values())
        elif isinstance(o, (list, tuple)):
            stack.extend(o)
    return size


def _short(path: str) -> str:
    for mark in ("/controller/", "/site-packages/", "/lib/python"):
        if mark in path:
            return path[path.index(mark) + 1 :]
    return path


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--agents", default="1000,10000", help="comma-separated agent counts")
    parser.add_argument("--resources", type=int, default=5000)
    parser.add_argument("--top", type=int, default=20)
    args = parser.parse_args(argv)
    rows = []
    for n in (int(x) for x in args.agents.split(",")):
        row = measure(n, args.resources, args.top)
        rows.append(row)
        print(
            f"\n{n} agents, {args.resources} Resources: {row['total'] / 2**20:.1f} MiB held, "
            f"{row['total'] / n / 1024:.1f} KiB per agent; observe {row['observe_cpu_s']:.1f} s "
            f"CPU, passes {row['passes_cpu_s']:.1f} s CPU, {row['writes']} writes (must be 0)"
        )
        for plural, (count, size) in row["stored"].items():
            print(
                f"  stored {plural}: {count} objects, {size / 2**20:.1f} MiB, "
                f"{size / max(count, 1) / 1024:.1f} KiB each"
            )
        for path, size in row["files"]:
            print(f"  {size / 2**20:8.1f} MiB  {_short(path)}")
        print("  by line:")
        for where, size, count in row["lines"]:
            print(f"  {size / 2**20:8.1f} MiB  {count:9d}  {_short(where)}")
        print("  objects by type:", ", ".join(f"{t} {c}" for t, c in row["types"]))
    if len(rows) > 1:
        a, b = rows[0], rows[-1]
        per = (b["total"] - a["total"]) / (b["agents"] - a["agents"])
        print(f"\ngrowth per added agent: {per / 1024:.1f} KiB")
    return 0


if __name__ == "__main__":
    sys.exit(main())
