"""The delivery sidecar: brings each new bindings document into the session within a second,
and carries the session's acknowledgement back to the controller.

It runs beside the agent's runtime in the session pod (``bindery deliver``, a native sidecar of
the project's image)
with the only API credentials in the pod: a pod-bound token allowed to read one ConfigMap
(``<agent>-bindings``) and to write one Lease (``bindery-ack-<agent>``). :mod:`.delivery` is its
loop, :mod:`.apiserver` its requests.

It runs in every session pod, so it stays small. Its imports, held by the import contract: the
standard library (``http.client``, ``ssl``, ``json``, threads), structlog for its log lines, the
session wire models it shares with the runtime and the controller (:mod:`bindery_session.wire`,
:mod:`bindery_session.files`), and from the controller's pure domain only the Lease record
(:mod:`controller.domain.acknowledgement`) and the error tree; no Kubernetes client, no kopf.
"""

from __future__ import annotations

import argparse
import os
import signal
import sys
import threading
from pathlib import Path

import structlog

from controller.sidecar.apiserver import ApiRequestError, InCluster
from controller.sidecar.delivery import Sidecar

__all__ = ["ApiRequestError", "InCluster", "Sidecar", "add_arguments", "run_from_args"]

log = structlog.get_logger("bindery.sidecar")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """``bindery deliver``'s arguments (the session builder passes them all)."""
    parser.add_argument("--config-map", required=True, help="the agent's bindings ConfigMap")
    parser.add_argument("--lease", required=True, help="the agent's acknowledgement Lease")
    parser.add_argument("--seed", required=True, type=Path, help="the mounted ConfigMap's file")
    parser.add_argument("--out", required=True, type=Path, help="the file the runtime reads")
    parser.add_argument("--ack-file", required=True, type=Path, help="what the runtime writes")
    parser.add_argument("--token-dir", required=True, type=Path, help="token and ca.crt")


def run_from_args(args: argparse.Namespace) -> int:
    """Run the sidecar until SIGTERM (its pod's own identity comes from the downward API)."""
    env = {k: os.environ.get(k, "") for k in ("POD_NAME", "POD_UID", "POD_NAMESPACE")}
    missing = [k for k, v in env.items() if not v]
    if missing:
        print(
            f"bindery deliver: {', '.join(missing)} not set; the session pod sets them from "
            "the downward API (it runs inside a Bindery session pod)",
            file=sys.stderr,
        )
        return 2
    sidecar = Sidecar(
        api=InCluster.from_environment(args.token_dir),
        namespace=env["POD_NAMESPACE"],
        config_map=args.config_map,
        lease=args.lease,
        pod_name=env["POD_NAME"],
        pod_uid=env["POD_UID"],
        seed=args.seed,
        out=args.out,
        ack_file=args.ack_file,
    )
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    signal.signal(signal.SIGINT, lambda *_: stop.set())
    log.info("delivering", config_map=args.config_map, lease=args.lease, pod=env["POD_NAME"])
    sidecar.run(stop)
    return 0
