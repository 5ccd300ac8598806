"""``bindery resolve`` (in a session): a value for a deferred parameter slot -> the resource."""

from __future__ import annotations

import argparse

from controller.cli.command import Subparsers, fail
from controller.runtime.exits import Exit


def register(sub: Subparsers) -> None:
    parser = sub.add_parser(
        "resolve",
        help="in a session: resolve a value for a deferred parameter slot, print the resource",
        description="Resolve VALUE (a Resource name, namespace/name in the agent's namespace, "
        "uid or URI) for a deferred parameter slot, with the session's credentials and the "
        "controller's rules. Prints the resource as JSON; on refusal prints why on stderr and "
        "exits 1.",
    )
    parser.add_argument("--tool", required=True, help="the tool being invoked")
    parser.add_argument("--slot", required=True, help="its deferred parameter slot")
    parser.add_argument("value", metavar="VALUE", help="what the caller named")
    parser.add_argument(
        "--bindings",
        default=None,
        help="the bindings file (default: $BINDERY_BINDINGS_FILE, else the mounted path)",
    )
    parser.add_argument(
        "--kubeconfig",
        default=None,
        help="credentials (default: the pod's ServiceAccount, else $KUBECONFIG)",
    )
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from bindery_session import BindingsError, load_bindings

    from controller.domain.rules import ascii_problem, param_problem
    from controller.session import ResolveError, resolve, resource_json

    # Checked here, before any request: the value and names go into models and queries whose
    # own checks would end in a traceback rather than a message.
    if why := param_problem(args.value):
        return fail(f"VALUE: {why}", Exit.USAGE)
    for flag, name in (("--tool", args.tool), ("--slot", args.slot)):
        if why := ("expected a name, found ''" if not name else ascii_problem(flag, name)):
            return fail(f"{flag}: {why}", Exit.USAGE)
    try:
        bindings = load_bindings(args.bindings)
        resource = resolve(
            args.tool, args.slot, args.value, bindings=bindings, kubeconfig=args.kubeconfig
        )
    except (BindingsError, ResolveError) as exc:
        return fail(exc)
    print(resource_json(resource))
    return Exit.OK
