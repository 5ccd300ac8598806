"""What kstatus (sigs.k8s.io/cli-utils, the library Flux and kpt use) computes for objects.

The harness's build script (``--kstatus``) builds the checker from ``harness/tools/kstatus``
once into its own cache; these helpers run it on live objects (read from the API server with
the test cluster's kubeconfig) or on objects given as JSON.
"""

from __future__ import annotations

import json
import subprocess
from functools import cache
from pathlib import Path
from typing import Any

from harness.cluster import build_script
from tests.support import Cluster

BUILD_SCRIPT = build_script()
STATUSES = {"InProgress", "Failed", "Current", "Terminating", "NotFound", "Unknown"}


@cache
def kstatus_binary() -> Path:
    proc = subprocess.run(
        ["bash", str(BUILD_SCRIPT), "--kstatus"], capture_output=True, text=True, check=False
    )
    if proc.returncode != 0:
        raise AssertionError(
            f"building the kstatus checker with {BUILD_SCRIPT} --kstatus failed "
            f"(exit {proc.returncode}); check the Go toolchain and the Go module proxy:\n"
            f"{proc.stderr}"
        )
    return Path(proc.stdout.strip().splitlines()[-1])


def _run(args: list[str], stdin: str | None = None) -> list[dict[str, Any]]:
    proc = subprocess.run(
        [str(kstatus_binary()), *args], input=stdin, capture_output=True, text=True, check=False
    )
    if proc.returncode != 0:
        raise AssertionError(f"kstatus {' '.join(args)} exited {proc.returncode}:\n{proc.stderr}")
    results = [json.loads(line) for line in proc.stdout.splitlines()]
    for result in results:
        assert result["status"] in STATUSES, result
    return results


def kstatus(cluster: Cluster, kind: str, namespace: str, name: str) -> dict[str, Any]:
    """``{"status", "message", ...}`` for one live object (``kind`` as kubectl takes it)."""
    args = ["--kubeconfig", str(cluster.kubeconfig)]
    if namespace:
        args += ["-n", namespace]
    (result,) = _run([*args, f"{kind}/{name}"])
    return result


def kstatus_of(objects: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """One result per object given (as ``kubectl get -o json`` prints them), in order."""
    return _run([], stdin="\n---\n".join(json.dumps(o) for o in objects))
