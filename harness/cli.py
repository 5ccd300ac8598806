"""``python -m harness cluster up|down|env``: the local control plane for development.

The command lives beside the harness it drives, in a source checkout (the installed ``bindery``
does not ship the harness): run it from the checkout's root, where ``python -m`` finds the
``harness`` package on the import path without any set-up, as ``make cluster`` does::

    source .venv/bin/activate
    python -m harness cluster up             # or: make cluster
    eval "$(python -m harness cluster env)"  # KUBECONFIG and PATH for kubectl
    python -m harness cluster down           # or: make cluster-down
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Sequence
from pathlib import Path

from controller.runtime import logs
from controller.runtime.exits import Exit
from harness.cluster import ClusterState, LocalCluster
from harness.errors import ClusterError

DEFAULT_STATE_DIR = Path(".cache/cluster")
"""Where ``make cluster`` keeps the control plane's state: relative to the checkout's root."""
COMMAND = "python -m harness cluster"


def _up(args: argparse.Namespace) -> int:
    state = LocalCluster(
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
    print(f'point kubectl at it:  eval "$({COMMAND} env{_state_flag(args)})"')
    print(f"stop it:              {COMMAND} down{_state_flag(args)}")
    return Exit.OK


def _down(args: argparse.Namespace) -> int:
    LocalCluster(Path(args.state_dir)).down()
    print("local control plane stopped")
    return Exit.OK


def _env(args: argparse.Namespace) -> int:
    state = ClusterState.load(Path(args.state_dir))
    if state is None:
        print(
            f"error: no local control plane is recorded in {args.state_dir}; start one with "
            f"'{COMMAND} up{_state_flag(args)}' (or 'make cluster') from the checkout's root",
            file=sys.stderr,
        )
        return Exit.FAILURE
    print(f"export KUBECONFIG={Path(state.kubeconfig).resolve()}")
    print(f"export PATH={state.bin_dir}:$PATH")
    return Exit.OK


def _state_flag(args: argparse.Namespace) -> str:
    """The ``--state-dir`` to repeat in a hint (none for the default)."""
    return "" if Path(args.state_dir) == DEFAULT_STATE_DIR else f" --state-dir {args.state_dir}"


ACTIONS: tuple[tuple[str, Callable[[argparse.Namespace], int], str], ...] = (
    ("up", _up, "build (once) and start the local control plane"),
    ("down", _down, "stop it and remove its data"),
    ("env", _env, "print shell exports for kubectl"),
)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m harness", description="Bindery's development harness."
    )
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    cluster = sub.add_parser("cluster", help="a local control plane (etcd, kube-apiserver...)")
    actions = cluster.add_subparsers(dest="action", required=True, metavar="ACTION")
    for name, func, text in ACTIONS:
        action = actions.add_parser(name, help=text)
        action.add_argument(
            "--state-dir",
            default=str(DEFAULT_STATE_DIR),
            help="where the kubeconfig, logs and state live (default: %(default)s)",
        )
        action.set_defaults(func=func)
    up = actions.choices["up"]
    up.add_argument("--audit", action="store_true", help="write an API audit log of every write")
    up.add_argument(
        "--no-nodes", action="store_true", help="skip kube-scheduler and the kwok fake node"
    )
    up.add_argument(
        "--kubelet",
        action="store_true",
        help="a real node (containerd, runc, CNI, a kubelet; root, Linux) instead of kwok's "
        "fake one: sessions run as real processes",
    )
    up.add_argument(
        "--port", type=int, default=None, help="kube-apiserver port (default: a free one)"
    )
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    logs.configure()
    args = build_parser().parse_args(argv)
    try:
        return int(args.func(args))
    except ClusterError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return Exit.FAILURE
    except KeyboardInterrupt:
        return Exit.INTERRUPTED
