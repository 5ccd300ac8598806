"""``bindery deliver`` (in a session pod): the delivery sidecar, started by the controller."""

from __future__ import annotations

import argparse

from controller.cli.command import Subparsers


def register(sub: Subparsers) -> None:
    from controller.session import sidecar

    parser = sub.add_parser(
        "deliver",
        help="in a session pod: the delivery sidecar (the controller starts it)",
        description=sidecar.__doc__.split("\n\n")[0] if sidecar.__doc__ else None,
    )
    sidecar.add_arguments(parser)
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from controller.session import sidecar

    return sidecar.run_from_args(args)
