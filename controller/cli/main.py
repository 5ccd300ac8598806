"""The ``bindery`` command.

bindery run                       run the controller (current kubeconfig, like any operator);
                                  exit codes: controller.cli.exits.Exit (3 no kubeconfig,
                                  4 API server unreachable, 5 CRDs missing, 6 port in use)
bindery cluster up|down|env       a local control plane for development, no cluster needed
bindery render FILE.kdl ...       Agent Spec KDL -> AgentSpec manifests
bindery export FILE.yaml ...      AgentSpec manifests -> KDL
bindery import-tool FILE.yaml     a tool with snake_case resource_slots -> Tool manifest
bindery uri-encode URI ...        a URI as the CRDs accept it: non-ASCII percent-encoded
bindery why AGENT [-o json]       why an agent is (not) Ready (also `kubectl bindery why`)
bindery resolve --tool T --slot S VALUE  (in a session) a deferred parameter slot -> resource
bindery ack [--refuse REASON | --started]  (in a session) acknowledge the current bindings
"""

from __future__ import annotations

import argparse
import importlib
import math
import os
import sys
from pathlib import Path
from typing import Any

from controller import __version__
from controller.cli.exits import Exit
from controller.cli.parsers import add_why_parser

DEFAULT_STATE_DIR = Path(".cache/cluster")


NO_HARNESS = (
    "bindery cluster needs the Bindery harness (the harness package of a source checkout, not "
    "part of the installed bindery): run `make cluster` in the checkout, or put the checkout "
    "on PYTHONPATH"
)


def _cluster(args: argparse.Namespace) -> int:
    """``bindery cluster ...``: the local control plane lives in the development harness, found
    on the import path at run time (the product never imports it)."""
    try:
        harness = importlib.import_module("harness.cluster")
    except ModuleNotFoundError as exc:
        if exc.name not in {"harness", "harness.cluster"}:
            raise
        print(f"error: {NO_HARNESS}", file=sys.stderr)
        return Exit.NO_HARNESS
    try:
        return int(args.cluster_func(harness, args))
    except harness.ClusterError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return Exit.FAILURE


def _cluster_up(harness: Any, args: argparse.Namespace) -> int:
    state = harness.LocalCluster(
        Path(args.state_dir),
        audit=args.audit,
        nodes=not args.no_nodes,
        kubelet=args.kubelet,
        api_port=args.port,
    ).up()
    print(f"local control plane ready at {state.server}")
    print(f"  kubeconfig: {state.kubeconfig}")
    print(f"  binaries:   {state.bin_dir}")
    if state.audit_log:
        print(f"  audit log:  {state.audit_log}")
    print(f"point kubectl at it:  export KUBECONFIG={Path(state.kubeconfig).resolve()}")
    print("stop it:              bindery cluster down")
    return Exit.OK


def _cluster_down(harness: Any, args: argparse.Namespace) -> int:
    harness.LocalCluster(Path(args.state_dir)).down()
    print("local control plane stopped")
    return Exit.OK


def _cluster_env(harness: Any, args: argparse.Namespace) -> int:
    state = harness.ClusterState.load(Path(args.state_dir))
    if state is None:
        print(
            f"error: no local control plane is recorded in {args.state_dir}; "
            "start one with 'bindery cluster up'",
            file=sys.stderr,
        )
        return Exit.FAILURE
    print(f"export KUBECONFIG={Path(state.kubeconfig).resolve()}")
    print(f"export PATH={state.bin_dir}:$PATH")
    return Exit.OK


def _seconds(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number of seconds") from None
    if not math.isfinite(value):
        raise argparse.ArgumentTypeError(f"{text!r}: give a finite number of seconds")
    return value


def _positive(text: str) -> float:
    """An argparse type: a number of seconds above zero."""
    value = _seconds(text)
    if not value > 0:
        raise argparse.ArgumentTypeError(f"{text!r}: give a number of seconds above 0")
    return value


def _not_negative(text: str) -> float:
    """An argparse type: a number of seconds, zero or more."""
    value = _seconds(text)
    if value < 0:
        raise argparse.ArgumentTypeError(f"{text!r}: give a number of seconds, 0 or more")
    return value


def _run(args: argparse.Namespace) -> int:
    from controller.domain.work import WorkScope
    from controller.runtime.operator import Options, run
    from controller.runtime.preflight import PreflightError

    options = Options(
        namespaces=args.namespace,
        workers=args.workers,
        resync_seconds=args.resync_seconds,
        leader_election=not args.standalone,
        election_namespace=args.leader_election_namespace,
        election_name=args.leader_election_id,
        api_wait=args.wait_for_api_server,
        delivery_image=args.session_delivery_image,
        unacknowledged_release=args.unacknowledged_release_seconds,
        acknowledge_timeout=args.acknowledge_timeout_seconds,
        work_scope=WorkScope(args.work_scope),
        work_hold_namespace=args.work_hold_namespace,
    )
    try:
        return run(
            options=options,
            liveness=args.liveness,
            metrics_port=args.metrics_port,
            log_level=args.log_level,
        )
    except PreflightError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return exc.code


def _why(args: argparse.Namespace) -> int:
    from controller.cli.why import run_why

    return run_why(args)


def _uri_encode(args: argparse.Namespace) -> int:
    from controller.domain.rules import percent_encoded, uri_problem

    status: int = Exit.OK
    for uri in args.uri:
        encoded = percent_encoded(uri)
        print(encoded)
        if why := uri_problem(encoded):
            print(f"error: {why}", file=sys.stderr)
            status = Exit.FAILURE
    return status


def _resolve(args: argparse.Namespace) -> int:
    from bindery_session import BindingsError, load_bindings

    from controller.session import ResolveError, resolve, resource_json

    try:
        bindings = load_bindings(args.bindings)
        resource = resolve(
            args.tool, args.slot, args.value, bindings=bindings, kubeconfig=args.kubeconfig
        )
    except (BindingsError, ResolveError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return Exit.FAILURE
    print(resource_json(resource))
    return Exit.OK


def _ack(args: argparse.Namespace) -> int:
    from bindery_session import (
        AcknowledgeError,
        BindingsError,
        acknowledge,
        announce,
        load_bindings,
        refuse,
    )

    if args.refuse is not None and not args.refuse.strip():
        print(
            "error: --refuse needs a reason: say what is wrong with the document (the "
            "controller shows it in the agent's status), e.g. --refuse 'unknown tool git'",
            file=sys.stderr,
        )
        return Exit.USAGE
    try:
        if args.started:
            written = announce(args.ack_file)
            print(f"announced: this runtime acknowledges bindings documents ({written})")
            return Exit.OK
        bindings = load_bindings(args.bindings)
        if args.refuse is not None:
            written = refuse(bindings, args.refuse, args.ack_file)
            print(f"refused {bindings.digest}: {args.refuse} ({written})")
        else:
            written = acknowledge(bindings, args.ack_file)
            print(f"applied {bindings.digest} ({written})")
    except (BindingsError, AcknowledgeError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return Exit.FAILURE
    return Exit.OK


def _add_ack_parser(sub: Any) -> None:
    ack = sub.add_parser(
        "ack",
        help="in a session: acknowledge the current bindings document (applied or refused)",
        description="Tell the controller, through the session's delivery sidecar, what this "
        "runtime did with the current bindings document: applied it and stopped using anything "
        "no longer in it (the default), refused it (--refuse), or, once before first reading "
        "the bindings, that it acknowledges documents at all (--started). Prints what it "
        "acknowledged; on error prints why on stderr and exits non-zero.",
    )
    what = ack.add_mutually_exclusive_group()
    what.add_argument(
        "--refuse", metavar="REASON", default=None, help="refuse the document, saying why"
    )
    what.add_argument(
        "--started",
        action="store_true",
        help="announce that this runtime acknowledges documents (before its first read)",
    )
    ack.add_argument(
        "--bindings",
        default=None,
        metavar="FILE",
        help="the bindings file (default: $BINDERY_BINDINGS_FILE, else the mounted path)",
    )
    ack.add_argument(
        "--ack-file",
        default=None,
        metavar="FILE",
        help="the acknowledgement file (default: $BINDERY_ACK_FILE, else the mounted path)",
    )
    ack.set_defaults(func=_ack)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="bindery", description="Bind AI agents to the typed resources and tools they use."
    )
    parser.add_argument("--version", action="version", version=f"bindery {__version__}")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    run = sub.add_parser("run", help="run the controller against the current kubeconfig")
    run.add_argument(
        "-n",
        "--namespace",
        action="append",
        default=[],
        help="watch only this namespace (repeatable, exact names); default: all namespaces",
    )
    run.add_argument(
        "--liveness",
        default="http://0.0.0.0:8080/healthz",
        help="liveness endpoint URL (empty to disable)",
    )
    run.add_argument(
        "--metrics-port", type=int, default=9090, help="Prometheus metrics port (0 to disable)"
    )
    run.add_argument("--workers", type=int, default=8, help="concurrent reconciles")
    run.add_argument(
        "--resync-seconds",
        type=_positive,
        default=30.0,
        help="how often every kind is listed (metadata only) to put right what a watch missed, "
        "such as a deletion during an API-server restart (default: 30)",
    )
    run.add_argument(
        "--session-delivery-image",
        default=os.environ.get("BINDERY_SESSION_DELIVERY_IMAGE", ""),
        help="the image of the delivery sidecar in every session pod launched from now on (the "
        "controller's own image; $BINDERY_SESSION_DELIVERY_IMAGE): a session then sees a new "
        "document within a second and acknowledges it. Empty: no sidecar; sessions read the "
        "kubelet's projection of the ConfigMap and cannot acknowledge",
    )
    run.add_argument(
        "--unacknowledged-release-seconds",
        type=_not_negative,
        default=float(os.environ.get("BINDERY_UNACKNOWLEDGED_RELEASE_SECONDS") or 120.0),
        help="for a session that cannot acknowledge (no delivery sidecar): seconds after the "
        "document without its work URI was written before the work hold is released, reported "
        "as unverified (default: $BINDERY_UNACKNOWLEDGED_RELEASE_SECONDS, else 120: longer "
        "than the kubelet's worst sync; 0: at once, as soon as the ConfigMap is written)",
    )
    run.add_argument(
        "--acknowledge-timeout-seconds",
        type=_positive,
        default=60.0,
        help="a session that can acknowledge and has not acknowledged the current document "
        "this long after it was written is Stalled (SessionNotAcknowledging) (default: 60)",
    )
    run.add_argument(
        "--wait-for-api-server",
        type=_not_negative,
        default=30.0,
        metavar="SECONDS",
        help="at start-up, how long to keep asking an API server that does not answer before "
        f"exiting with code {Exit.UNREACHABLE.value} (default: 30; 0 exits at once)",
    )
    mode = run.add_mutually_exclusive_group()
    mode.add_argument(
        "--leader-elect",
        action="store_true",
        help="reconcile only while holding a coordination Lease (the default; a second "
        "instance waits instead of reconciling beside the first)",
    )
    mode.add_argument(
        "--standalone",
        action="store_true",
        help="reconcile without leader election: only when nothing else can run beside it "
        "(one replica with a Recreate rollout, or tests)",
    )
    run.add_argument(
        "--leader-election-namespace",
        default=os.environ.get("POD_NAMESPACE", ""),
        help="namespace of the leader Lease (default: $POD_NAMESPACE, else the kubeconfig "
        "context's namespace, else 'default')",
    )
    run.add_argument(
        "--leader-election-id", default="bindery-controller", help="name of the leader Lease"
    )
    run.add_argument(
        "--work-scope",
        choices=("namespace", "cluster"),
        default="namespace",
        help="where a work URI has at most one holder: within each namespace (the default), "
        "or across the cluster (holds then live in --work-hold-namespace). Switching on a "
        "running installation is safe: see docs/install.md",
    )
    run.add_argument(
        "--work-hold-namespace",
        default="",
        metavar="NAMESPACE",
        help="with --work-scope=cluster, the namespace the work holds live in (default: the "
        "leader-election namespace); holds found there count in either scope",
    )
    run.add_argument("--log-level", default="INFO")
    run.set_defaults(func=_run)

    cluster = sub.add_parser("cluster", help="a local control plane (etcd, kube-apiserver...)")
    csub = cluster.add_subparsers(dest="cluster_command", required=True, metavar="ACTION")
    for name, func, text in (
        ("up", _cluster_up, "build (once) and start the local control plane"),
        ("down", _cluster_down, "stop it and remove its data"),
        ("env", _cluster_env, "print shell exports for kubectl"),
    ):
        p = csub.add_parser(name, help=text)
        p.add_argument(
            "--state-dir",
            default=str(DEFAULT_STATE_DIR),
            help="where the kubeconfig, logs and state live (default: %(default)s)",
        )
        p.set_defaults(func=_cluster, cluster_func=func)
        if name == "up":
            p.add_argument(
                "--audit",
                action="store_true",
                help="write an API audit log of every write (for counting writes)",
            )
            p.add_argument(
                "--no-nodes", action="store_true", help="skip kube-scheduler and the kwok fake node"
            )
            p.add_argument(
                "--kubelet",
                action="store_true",
                help="a real node (containerd, runc, CNI, a kubelet; root, Linux) instead of "
                "kwok's fake one: sessions run as real processes",
            )
            p.add_argument(
                "--port", type=int, default=None, help="kube-apiserver port (default: a free one)"
            )

    encode = sub.add_parser(
        "uri-encode",
        help="percent-encode URIs as Resource spec.uri accepts them (RFC 3986: printable ASCII)",
        description=(
            "Print each URI with every character outside printable ASCII (spaces, control, "
            "invisible and non-ASCII letters) replaced by the %%XX of its UTF-8 bytes; '%%' is "
            "kept, so an encoded URI prints unchanged. Exit 1 if a result is still no URI "
            "(no scheme, longer than 2048 bytes)."
        ),
    )
    encode.add_argument("uri", nargs="+", help="a URI, e.g. 'github-issue://example/café'")
    encode.set_defaults(func=_uri_encode)
    resolve = sub.add_parser(
        "resolve",
        help="in a session: resolve a value for a deferred parameter slot, print the resource",
        description="Resolve VALUE (a Resource name, namespace/name in the agent's namespace, "
        "uid or URI) for a deferred parameter slot, with the session's credentials and the "
        "controller's rules. Prints the resource as JSON; on refusal prints why on stderr and "
        "exits 1.",
    )
    resolve.add_argument("--tool", required=True, help="the tool being invoked")
    resolve.add_argument("--slot", required=True, help="its deferred parameter slot")
    resolve.add_argument("value", metavar="VALUE", help="what the caller named")
    resolve.add_argument(
        "--bindings",
        default=None,
        help="the bindings file (default: $BINDERY_BINDINGS_FILE, else the mounted path)",
    )
    resolve.add_argument(
        "--kubeconfig",
        default=None,
        help="credentials (default: the pod's ServiceAccount, else $KUBECONFIG)",
    )
    resolve.set_defaults(func=_resolve)
    _add_ack_parser(sub)
    from controller import sidecar

    deliver = sub.add_parser(
        "deliver",
        help="in a session pod: the delivery sidecar (the controller starts it)",
        description=sidecar.__doc__.split("\n\n")[0] if sidecar.__doc__ else None,
    )
    sidecar.add_arguments(deliver)
    deliver.set_defaults(func=sidecar.run_from_args)

    from controller.authoring.cli import register

    register(sub)
    add_why_parser(sub, _why)
    return parser


def main(argv: list[str] | None = None) -> int:
    from controller.runtime import logs

    logs.configure()
    args = build_parser().parse_args(argv)
    try:
        return int(args.func(args))
    except KeyboardInterrupt:
        return Exit.INTERRUPTED


if __name__ == "__main__":
    sys.exit(main())
