"""Delivery on a real node (containerd, runc, a kubelet): what session processes see, and when.

    .venv/bin/python -m bench.bench_node [--samples 20] [--kubelet-samples 3] [--handoffs 5]
                                         [--resumes 3]

Four figures, each measured from the spec change (``kubectl apply`` returned) to a line the
session's own process printed (``harness.probe``: the container shares the host's clock):

* **change -> applied, with the delivery sidecar**: p50 and p99 over ``--samples`` binding
  changes of one agent whose runtime acknowledges (target p99 <= 2 s);
* **change -> applied, the kubelet's own projection**, measured beside it: an agent whose session
  was launched without the sidecar reads the mounted ConfigMap, which the kubelet rewrites at its
  pod sync (both agents are changed in the same apply);
* **handoff**: the work URI moved from A to B (both acknowledge) ``--handoffs`` times: from the
  change to B's process applying it, and the longest time both processes held it (target 0);
* **resume**: an agent whose idle policy suspended its session (no pod) is given a work binding
  ``--resumes`` times: from the change to the resumed session's process applying the work (the
  pod is created, scheduled and started again with the same launch).

Needs root (the real node) and builds the node's images the first time (cached afterwards).
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from harness import probe
from harness.cluster import LocalCluster, kubectl
from harness.process import ControllerProcess

REPO_ROOT = Path(__file__).resolve().parent.parent
TYPES = REPO_ROOT / "examples" / "manifests" / "00-resourcetypes.yaml"
PROJECT_IMAGE = "localhost/bindery:dev"


class Plane:
    def __init__(self, state: Any, namespace: str) -> None:
        self.bin_dir = Path(state.bin_dir)
        self.kubeconfig = Path(state.kubeconfig)
        self.namespace = namespace

    def kubectl(self, *args: str, check: bool = True, input: str | None = None) -> Any:
        return kubectl(self.bin_dir, self.kubeconfig, *args, input=input, check=check)

    def apply(self, *objects: dict[str, Any]) -> None:
        body = json.dumps({"apiVersion": "v1", "kind": "List", "items": list(objects)})
        self.kubectl("apply", "--server-side", "-n", self.namespace, "-f", "-", input=body)

    def applied(self, agent: str) -> list[probe.Line]:
        return probe.applied(self.kubectl, self.namespace, f"{agent}-session-0")

    def wait_line(self, agent: str, what: Any, timeout: float) -> probe.Line:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            found = next((a for a in self.applied(agent) if what(a)), None)
            if found is not None:
                return found
            time.sleep(0.2)
        raise SystemExit(f"bench_node: {agent}'s process did not apply the change in {timeout} s")


def agent(name: str, resources: list[dict[str, str]], program: str) -> dict[str, Any]:
    return {
        "apiVersion": "bindery.dev/v1alpha1",
        "kind": "AgentSpec",
        "metadata": {"name": name},
        "spec": {"resources": resources, "runtime": probe.runtime(program)},
    }


def note(n: int) -> dict[str, str]:
    return {"name": f"note-{n}", "tag": "fs-directory", "uri": f"file:///notes/{n}"}


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def run(args: argparse.Namespace, work: Path) -> list[str]:
    local = LocalCluster(work / "cluster", kubelet=True)
    state = local.up(timeout=180)
    out: list[str] = []
    try:
        plane = Plane(state, "bench-node")
        plane.kubectl("create", "namespace", plane.namespace)
        for crd in sorted((REPO_ROOT / "crds").glob("*.yaml")):
            plane.kubectl("apply", "--server-side", "-f", str(crd))
        plane.kubectl("wait", "--for=condition=Established", "-f", str(REPO_ROOT / "crds"))
        plane.kubectl("apply", "--server-side", "-f", str(TYPES))

        def controller(name: str, env: dict[str, str]) -> ControllerProcess:
            return ControllerProcess(
                state.kubeconfig, plane.namespace, work / name, name=name, env=env
            ).start()

        legacy = agent("legacy", [note(0)], probe.READER)
        first = controller("without-sidecar", {"BINDERY_SESSION_DELIVERY_IMAGE": ""})
        plane.apply(legacy)
        plane.wait_line("legacy", lambda a: True, 180)
        first.stop()
        proc = controller("with-sidecar", {"BINDERY_SESSION_DELIVERY_IMAGE": PROJECT_IMAGE})
        try:
            fast = agent("fast", [note(0)], probe.WATCHER)
            plane.apply(fast)
            plane.wait_line("fast", lambda a: True, 180)
            sidecar: list[float] = []
            kubelet: list[float] = []
            for n in range(1, args.samples + 1):
                fast["spec"]["resources"] = [note(n)]
                both = n <= args.kubelet_samples
                if both:
                    legacy["spec"]["resources"] = [note(n)]
                changed = time.time()
                plane.apply(fast, legacy) if both else plane.apply(fast)
                mark = f"note-{n}"
                seen = plane.wait_line("fast", lambda a, m=mark: m in a.fields["resources"], 30)
                sidecar.append(seen.t - changed)
                if both:
                    old = plane.wait_line(
                        "legacy", lambda a, m=mark: m in a.fields["resources"], 150
                    )
                    kubelet.append(old.t - changed)
            out.append(
                f"change -> applied, delivery sidecar: p50 {pct(sidecar, 0.5):.2f} s, "
                f"p99 {pct(sidecar, 0.99):.2f} s over {len(sidecar)} changes "
                f"(target p99 <= 2 s, ratio {pct(sidecar, 0.99) / 2:.2f})"
            )
            out.append(
                f"change -> applied, kubelet projection: p50 {statistics.median(kubelet):.1f} s, "
                f"max {max(kubelet):.1f} s over {len(kubelet)} changes (same applies); "
                f"sidecar p50 is {statistics.median(kubelet) / max(pct(sidecar, 0.5), 1e-3):.0f}x "
                "faster"
            )
            out += handoffs(plane, args.handoffs)
            out += resumes(plane, args.resumes)
        finally:
            proc.stop()
    finally:
        local.down()
    return out


def handoffs(plane: Plane, count: int) -> list[str]:
    uri = "github-issue://bench/node/1"
    a = agent("a", [{"name": "work", "tag": "github-issue", "uri": uri}], probe.WATCHER)
    b = agent("b", [{"name": "work", "tag": "github-issue", "uri": uri}], probe.WATCHER)
    plane.apply(a)
    plane.wait_line("a", lambda x: x.fields["work"] == uri, 180)
    plane.apply(b)
    plane.wait_line("b", lambda x: x.fields["work"] is None, 180)
    moves: list[float] = []
    overlaps: list[float] = []
    holder, waiter = a, b
    for _ in range(count):
        moved = time.time()
        holder["spec"]["resources"] = []
        plane.apply(holder)
        name = waiter["metadata"]["name"]
        got = plane.wait_line(name, lambda x, t=moved: x.t > t and x.fields["work"] == uri, 120)
        moves.append(got.t - moved)
        until = time.time()
        held = [probe.holding(plane.applied(x), uri, until) for x in ("a", "b")]
        overlaps.append(max(probe.overlap(*held), 0.0))
        holder["spec"]["resources"] = [{"name": "work", "tag": "github-issue", "uri": uri}]
        plane.apply(holder)  # it queues up behind the new holder
        holder, waiter = waiter, holder
    return [
        f"handoff: change -> new holder applied: p50 {statistics.median(moves):.2f} s, "
        f"p99 {pct(moves, 0.99):.2f} s over {count} handoffs",
        f"handoff overlap (both processes held the URI): max {max(overlaps):.3f} s "
        f"(target 0 s, {sum(1 for o in overlaps if o > 0)} of {count} samples above 0)",
    ]


def suspended(plane: Plane, name: str, timeout: float) -> None:
    """Wait until ``name``'s session is suspended and its pod gone."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        got = plane.kubectl("get", "agentspec", "-n", plane.namespace, name, "-o", "json")
        state = (json.loads(got.stdout).get("status") or {}).get("state")
        pod = plane.kubectl(
            "get", "pod", "-n", plane.namespace, f"{name}-session-0", "--ignore-not-found"
        )
        if state == "Suspended" and not pod.stdout.strip():
            return
        time.sleep(0.2)
    raise SystemExit(f"bench_node: {name}'s session was not suspended in {timeout} s")


def resumes(plane: Plane, count: int) -> list[str]:
    uri = "github-issue://bench/node/resume"
    idle = agent("sleeper", [], probe.WATCHER)
    idle["spec"]["runtime"]["idle"] = {"suspendAfterSeconds": 2}
    plane.apply(idle)
    took: list[float] = []
    for _ in range(count):
        suspended(plane, "sleeper", 180)
        changed = time.time()
        idle["spec"]["resources"] = [{"name": "work", "tag": "github-issue", "uri": uri}]
        plane.apply(idle)
        got = plane.wait_line(
            "sleeper", lambda x, t=changed: x.t > t and x.fields["work"] == uri, 180
        )
        took.append(got.t - changed)
        idle["spec"]["resources"] = []
        plane.apply(idle)  # idle again: suspended 2 s after its hold is released
    return [
        f"resume: work binding added to a suspended agent -> applied in the resumed session: "
        f"p50 {statistics.median(took):.2f} s, max {max(took):.2f} s over {count} resumes"
    ]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("--samples", type=int, default=20)
    parser.add_argument("--kubelet-samples", type=int, default=3)
    parser.add_argument("--handoffs", type=int, default=5)
    parser.add_argument("--resumes", type=int, default=3)
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="bindery-bench-node-") as tmp:
        for line in run(args, Path(tmp)):
            print(line)
    return 0


if __name__ == "__main__":
    sys.exit(main())
