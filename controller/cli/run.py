"""``bindery run``: the controller, against the current kubeconfig (or in-cluster configuration).

Its options are the knobs of :class:`controller.runtime.settings.Settings`, derived from it; kopf
and the Kubernetes client are imported only when the command runs.
"""

from __future__ import annotations

import argparse

from controller.cli.command import Subparsers, fail
from controller.runtime.exits import Exit
from controller.runtime.settings import Settings, SettingsError, add_arguments


def register(sub: Subparsers) -> None:
    parser = sub.add_parser(
        "run",
        help="run the controller against the current kubeconfig",
        description="Run the controller against the current kubeconfig (or the pod's "
        "ServiceAccount). Exit codes: 3 no kubeconfig, 4 API server unreachable, 5 CRDs "
        "missing, 6 port in use.",
    )
    add_arguments(parser)
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    try:
        settings = Settings.from_args(args)
    except SettingsError as exc:
        return fail(exc, Exit.USAGE)

    from controller.runtime.operator import run as run_controller
    from controller.runtime.preflight import PreflightError

    try:
        return run_controller(settings)
    except PreflightError as exc:
        return fail(exc, Exit(exc.code))
