"""``bindery deliver`` (in a session pod): the delivery sidecar, started by the controller.

Its options belong to :mod:`controller.sidecar` and are parsed there, when the command
runs: the session library (and the Kubernetes client under it) is imported by this command
only, not by every ``bindery`` command that builds the parser.
"""

from __future__ import annotations

import argparse

from controller.cli.command import Subparsers

HELP = "in a session pod: the delivery sidecar (the controller starts it)"


def register(sub: Subparsers) -> None:
    # Nothing here looks like an option to this parser ("+" prefixes none of the sidecar's):
    # every argument, --help included, is handed to the sidecar's own parser.
    parser = sub.add_parser("deliver", help=HELP, add_help=False, prefix_chars="+")
    parser.add_argument("options", nargs=argparse.REMAINDER)
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from controller import sidecar

    parser = argparse.ArgumentParser(
        prog="bindery deliver",
        description=sidecar.__doc__.split("\n\n")[0] if sidecar.__doc__ else HELP,
    )
    sidecar.add_arguments(parser)
    return sidecar.run_from_args(parser.parse_args(args.options))
