"""The memory one tenant can make the controller hold: 1,000 Resources of the largest size the
CRD admits (64 attributes, 16,384 bytes of keys and values, a 2,048-byte URI), selected by a
few agents whose Tool has a contextual slot every one of them fits (so every slot considers all
1,000 candidates), and the controller's RSS once it has read and reconciled them all, against
the chart's memory limit with room to spare::

    .venv/bin/python -m bench.bench_budget [--resources 1000] [--agents 10]

It starts its own local control plane (no node) and the controller as a child process over one
namespace; it prints ratio lines as bench/bench_resolve.py does, so ``python -m bench`` can
show them as rows (``--only budget``).
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from bench import e2e_objects as objs
from bench.e2e_env import Env
from bench.e2e_procs import wait_settled
from controller.domain.rules import ATTRIBUTES_MAX_BYTES, URI_MAX_BYTES

NAMESPACE = "bench-budget"
CHART_LIMIT_MIB = 512.0
"""The chart's memory limit for the controller (helm/bindery/values.yaml)."""
RSS_TARGET_MIB = CHART_LIMIT_MIB / 2
"""Half the limit: the room left for bursts, watches re-listing, and agents' own state."""
ATTRIBUTES = 64


def attributes(i: int) -> dict[str, str]:
    """64 attributes whose keys and values come to exactly the CRD's total."""
    keys = [f"attribute-{i:04d}-{k:02d}" for k in range(ATTRIBUTES)]
    room = ATTRIBUTES_MAX_BYTES - sum(len(k) for k in keys)
    each, extra = divmod(room, ATTRIBUTES)
    return {k: chr(ord("a") + n % 26) * (each + (n < extra)) for n, k in enumerate(keys)}


def resource(i: int) -> dict[str, Any]:
    prefix = f"git://bench/budget/{i:04d}/"
    return {
        "apiVersion": objs.API_VERSION,
        "kind": "Resource",
        "metadata": {"name": f"big-{i:04d}", "namespace": NAMESPACE, "labels": {"bench": "big"}},
        "spec": {
            "type": "bench-repo",
            "uri": prefix + "x" * (URI_MAX_BYTES - len(prefix)),
            "attributes": attributes(i),
        },
    }


def tool() -> dict[str, Any]:
    slot = {"name": "repo", "resourceType": "bench-repo", "required": False}
    return {
        "apiVersion": objs.API_VERSION,
        "kind": "Tool",
        "metadata": {"name": "budget-tool", "namespace": NAMESPACE},
        "spec": {"description": "every big Resource fits its slot", "resourceSlots": [slot]},
    }


def agent(i: int) -> dict[str, Any]:
    return {
        "apiVersion": objs.API_VERSION,
        "kind": "AgentSpec",
        "metadata": {"name": f"selects-all-{i}", "namespace": NAMESPACE},
        "spec": {
            "tools": [{"name": "budget-tool"}],
            "resourceSelector": {"matchLabels": {"bench": "big"}},
        },
    }


def ratio_line(label: str, value: float, unit: str, target: float, detail: str = "") -> str:
    return (
        f"{label}: {value:.2f} {unit}{detail} (target <= {target:g} {unit}, "
        f"ratio {value / target:.2f})"
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("::")[0])
    parser.add_argument("--resources", type=int, default=1000)
    parser.add_argument("--agents", type=int, default=10)
    parser.add_argument("--timeout", type=float, default=600.0)
    args = parser.parse_args(argv)

    with tempfile.TemporaryDirectory(prefix="bindery-budget-") as tmp:
        env = Env(Path(tmp))
        try:
            env.install_crds()
            env.create([objs.namespace(NAMESPACE), *objs.resource_types()])
            t = time.monotonic()
            env.create([resource(i) for i in range(args.resources)])
            env.create([tool()] + [agent(i) for i in range(args.agents)])
            made = time.monotonic() - t
            ctl = env.controller(NAMESPACE, "budget").start()
            objects = args.resources + args.agents + 1
            settled = wait_settled(ctl, objects, timeout=args.timeout)
            rss, hwm = ctl.rss_mib(), ctl.hwm_mib()
        finally:
            env.down()
    body = len(str(resource(0)["spec"]).encode())
    print(
        f"{args.resources} Resources of {body} bytes of spec each, {args.agents} agents selecting "
        f"all of them; created in {made:.1f} s, controller settled in {settled.settled_s:.1f} s"
    )
    detail = f" (peak), {rss:.0f} MiB once settled, chart limit {CHART_LIMIT_MIB:g} MiB"
    label = f"controller RSS, {args.resources} maximum-size Resources"
    print(ratio_line(label, hwm, "MiB", RSS_TARGET_MIB, detail))
    return 0


if __name__ == "__main__":
    sys.exit(main())
