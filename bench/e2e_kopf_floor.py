"""The kopf floor: what kopf alone costs to list the objects the throughput phase starts with.

Bindery is specified to watch its five kinds through kopf, so every start-up pays for kopf's
listing of them: each listed object goes through kopf's per-object pipeline (a worker task, its
queue, the cause, the handler's keyword arguments, the loggers) before the controller sees it.
This process is that and nothing else: a kopf operator with one ``on.event`` handler per Bindery
kind that only counts what it is given, under the watch settings the controller uses. It does no
resolution and writes nothing. Once it has been handed ``--expect`` distinct listed objects it
prints one JSON line and stops:

    {"listed": N, "listed_s": seconds since the process began,
     "imports_cpu_s": CPU before kopf ran, "cpu_s": CPU in all}

so the benchmark can set the controller's start-up and CPU per new agent beside the least any
kopf-based controller pays for the same objects.

    python -m bench.e2e_kopf_floor --namespace NS --expect N
"""

from __future__ import annotations

import time

STARTED = time.monotonic()

import argparse  # noqa: E402  (the clock starts before the imports: they are part of the floor)
import asyncio  # noqa: E402
import json  # noqa: E402
import logging  # noqa: E402
import sys  # noqa: E402
from typing import Any  # noqa: E402

import kopf  # noqa: E402

GROUP, VERSION = "bindery.dev", "v1alpha1"
PLURALS = ("resourcetypes", "resources", "tools", "agentspecs", "resourcegrants")
PAGE = 500
"""The controller's page size (``controller/k8s/api.py: LIST_PAGE``)."""


class _NoDiffBase(kopf.DiffBaseStorage):
    """As the controller: no diff base (it registers no change-detecting handlers)."""

    def build(self, *, body: kopf.Body, extra_fields: Any = None) -> kopf.BodyEssence:
        return kopf.BodyEssence()

    def fetch(self, *, body: kopf.Body) -> kopf.BodyEssence | None:
        return None

    def store(self, *, body: kopf.Body, patch: kopf.Patch, essence: kopf.BodyEssence) -> None:
        return None


def _registry(expect: int, stop: asyncio.Event, imports_cpu: float) -> kopf.OperatorRegistry:
    registry = kopf.OperatorRegistry()
    kopf.on.login(registry=registry)(kopf.login_via_client)
    seen: set[tuple[str, str]] = set()

    @kopf.on.startup(registry=registry)
    async def configure(settings: kopf.OperatorSettings, **_: Any) -> None:
        settings.scanning.disabled = True
        settings.watching.server_timeout = 300
        settings.watching.client_timeout = 330
        settings.watching.chunk_size = PAGE
        settings.queueing.idle_timeout = 0.05
        settings.persistence.diffbase_storage = _NoDiffBase()
        settings.posting.level = logging.ERROR

    for plural in PLURALS:

        @kopf.on.event(GROUP, VERSION, plural, registry=registry, id=f"count-{plural}")
        async def count(*, event: kopf.RawEvent, **_: Any) -> None:
            meta = event["object"]["metadata"]
            seen.add((meta.get("namespace", ""), meta["uid"]))
            if len(seen) == expect and not stop.is_set():
                print(
                    json.dumps(
                        {
                            "listed": len(seen),
                            "listed_s": round(time.monotonic() - STARTED, 3),
                            "imports_cpu_s": round(imports_cpu, 3),
                            "cpu_s": round(time.process_time(), 3),
                        }
                    ),
                    flush=True,
                )
                stop.set()

    return registry


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    p.add_argument("--namespace", required=True, help="the namespace kopf watches")
    p.add_argument("--expect", type=int, required=True, help="listed objects to wait for")
    args = p.parse_args(argv)
    logging.basicConfig(level=logging.WARNING)
    imports_cpu = time.process_time()

    async def run() -> None:
        stop = asyncio.Event()
        await kopf.operator(
            registry=_registry(args.expect, stop, imports_cpu),
            clusterwide=False,
            namespaces=[args.namespace],
            standalone=True,
            stop_flag=stop,
        )

    asyncio.run(run())
    return 0


if __name__ == "__main__":
    sys.exit(main())
