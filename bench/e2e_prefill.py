"""Bring a namespace to the state a settled controller leaves, without waiting for one.

The 10,000-agent start-up benchmark needs 10,000 agents whose status and bindings ConfigMap are
already current (a restart, not a first start). Reconciling them with the controller itself costs
more than 25,000 writes through one loaded API server, several minutes on a 2-core machine. This
module runs the controller's own reconcile code (``controller.reconcile.Controller.process``)
against a recording stand-in for its API, then writes what it recorded (statuses and ConfigMaps;
no events) with the benchmark's client. It runs as a child process importing the controller from
the same source tree as the measured controller (``--controller-src``), so both compute alike.

The measured restart then proves the state is the controller's own: it must make zero writes,
and the benchmark reports the count.

    python -m bench.e2e_prefill --kubeconfig K --namespace NS [--cluster-scoped]
"""

from __future__ import annotations

import argparse
import asyncio
import copy
import json
import logging
import sys
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import structlog

from bench import e2e_objects as objs
from controller.domain.refs import Kind
from controller.k8s import api as k8s_api
from controller.reconcile import Controller
from harness.kube import Kube

Body = dict[str, Any]


class RecordingApi:
    """Enough of ``controller.k8s.api.KubeApi`` for passes over new, session-less agents."""

    def __init__(self) -> None:
        self.statuses: list[tuple[str, str, str, Body]] = []
        self.creates: list[tuple[str, Body]] = []

    async def replace_status(self, kind: Any, namespace: str, name: str, status: Body) -> Body:
        self.statuses.append((kind.plural, namespace, name, status))
        return {"metadata": {"resourceVersion": "0"}, "status": status}

    async def create(self, kind: Any, body: Body) -> Body:
        if kind.plural != "events":
            self.creates.append((kind.plural, body))
        out = copy.deepcopy(body)
        out["metadata"]["resourceVersion"] = "0"
        return out

    async def get(self, kind: Any, namespace: str, name: str) -> Body | None:
        return None

    async def merge_patch(self, *args: Any, **kwargs: Any) -> Body:
        raise NotImplementedError("not expected for session-less agents without work")

    json_patch = merge_patch

    async def delete(self, *args: Any, **kwargs: Any) -> bool:
        raise NotImplementedError("not expected for session-less agents without work")


async def settle(ctl: Controller, *, first: bool = False) -> None:
    """Run ``ctl``'s passes until its queue stays empty, the rollouts' recounts included (they
    come back through a timer once every agent had its pass); ``first``: queue everything
    first, as a start does."""
    if first:
        ctl.enqueue_all()
    while True:
        while len(ctl.queue):
            item = await ctl.queue.get()
            try:
                await ctl.process(item)
            finally:
                ctl.queue.done(item)
        await asyncio.sleep(0.05)  # a recount due now runs on the loop's next turn
        if not len(ctl.queue):
            return


def prefill(
    kube: Kube, namespace: str, *, cluster_scoped: bool = False, threads: int = 16
) -> dict[str, int]:
    """Compute and write every status and ConfigMap the controller would write in ``namespace``
    (and for the cluster-scoped ResourceTypes if ``cluster_scoped``)."""
    # The controller's reconcile log lines are not the benchmark's output.
    structlog.configure(wrapper_class=structlog.make_filtering_bound_logger(logging.WARNING))
    api = RecordingApi()
    ctl = Controller(api, workers=1, rollout_delay=0.0)  # type: ignore[arg-type]
    listed = {
        "type": kube.list_all(objs.path("resourcetypes")),
        "resource": kube.list_all(objs.path("resources", namespace)),
        "tool": kube.list_all(objs.path("tools", namespace)),
        "agent": kube.list_all(objs.path("agentspecs", namespace)),
    }
    for kind, items in listed.items():
        for body in items:
            body.setdefault("apiVersion", f"{objs.GROUP}/{objs.VERSION}")
            ctl.observe(k8s_api.ENDPOINTS[Kind(kind)], body)

    asyncio.run(settle(ctl))
    statuses = [s for s in api.statuses if cluster_scoped or s[0] != "resourcetypes"]

    def write_status(entry: tuple[str, str, str, Body]) -> None:
        plural, ns, name, status = entry
        kube.json_patch(
            objs.path(plural, ns, name, "status"),
            [{"op": "add", "path": "/status", "value": status}],
        )

    with ThreadPoolExecutor(threads) as pool:
        list(pool.map(write_status, statuses))
    kube.create_many(
        lambda b: objs.path("configmaps", b["metadata"]["namespace"]),
        [b for _, b in api.creates],
        threads,
    )
    return {"statuses": len(statuses), "configmaps": len(api.creates)}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="write a settled controller's statuses")
    parser.add_argument("--kubeconfig", required=True)
    parser.add_argument("--namespace", required=True)
    parser.add_argument("--cluster-scoped", action="store_true")
    args = parser.parse_args(argv)
    kube = Kube(args.kubeconfig, "bindery-bench/1")
    written = prefill(kube, args.namespace, cluster_scoped=args.cluster_scoped)
    print(json.dumps(written))
    return 0


if __name__ == "__main__":
    sys.exit(main())
