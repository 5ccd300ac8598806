"""The ``bindery`` command: one module per command, each registering its own subparser.

bindery run                       run the controller (current kubeconfig, like any operator):
                                  :mod:`.run`; exit codes: :class:`controller.cli.exits.Exit`
bindery render FILE.kdl ...       Agent Spec KDL -> AgentSpec manifests (:mod:`.authoring`)
bindery export FILE.yaml ...      AgentSpec manifests -> KDL
bindery import-tool FILE.yaml     a tool with snake_case resource_slots -> Tool manifest
bindery uri-encode URI ...        a URI as the CRDs accept it: non-ASCII percent-encoded
bindery why AGENT [-o json]       why an agent is (not) Ready (also `kubectl bindery why`)
bindery resolve --tool T --slot S VALUE  (in a session) a deferred parameter slot -> resource
bindery ack [--refuse REASON | --started]  (in a session) acknowledge the current bindings
bindery deliver ...               (in a session pod) the delivery sidecar

A command imports what it runs only when it runs: ``bindery render`` never loads kopf. The local
control plane for development is the harness's own command (``python -m harness cluster``, in a
source checkout), not part of the installed ``bindery``.
"""

from __future__ import annotations

import argparse
import sys

from controller import __version__
from controller.cli import ack, authoring, deliver, resolve, run, uri
from controller.cli.exits import Exit
from controller.cli.parsers import add_why_parser

COMMANDS = (run, authoring, uri, resolve, ack, deliver)
"""The command modules, in the order ``bindery --help`` lists them (``why`` comes last)."""


def _why(args: argparse.Namespace) -> int:
    from controller.cli.why import run_why

    return run_why(args)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="bindery", description="Bind AI agents to the typed resources and tools they use."
    )
    parser.add_argument("--version", action="version", version=f"bindery {__version__}")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for command in COMMANDS:
        command.register(sub)
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
