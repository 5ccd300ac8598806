"""``bindery ack`` (in a session): acknowledge the current bindings document."""

from __future__ import annotations

import argparse

from controller.cli.command import Subparsers, fail
from controller.runtime.exits import Exit


def register(sub: Subparsers) -> None:
    parser = sub.add_parser(
        "ack",
        help="in a session: acknowledge the current bindings document (applied or refused)",
        description="Tell the controller, through the session's delivery sidecar, what this "
        "runtime did with the current bindings document: applied it and stopped using anything "
        "no longer in it (the default), refused it (--refuse), or, once before first reading "
        "the bindings, that it acknowledges documents at all (--started). Prints what it "
        "acknowledged; on error prints why on stderr and exits non-zero.",
    )
    what = parser.add_mutually_exclusive_group()
    what.add_argument(
        "--refuse", metavar="REASON", default=None, help="refuse the document, saying why"
    )
    what.add_argument(
        "--started",
        action="store_true",
        help="announce that this runtime acknowledges documents (before its first read)",
    )
    parser.add_argument(
        "--bindings",
        default=None,
        metavar="FILE",
        help="the bindings file (default: $BINDERY_BINDINGS_FILE, else the mounted path)",
    )
    parser.add_argument(
        "--ack-file",
        default=None,
        metavar="FILE",
        help="the acknowledgement file (default: $BINDERY_ACK_FILE, else the mounted path)",
    )
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from bindery_session import (
        AcknowledgeError,
        BindingsError,
        acknowledge,
        announce,
        load_bindings,
        refuse,
    )

    if args.refuse is not None and not args.refuse.strip():
        return fail(
            "--refuse needs a reason: say what is wrong with the document (the controller "
            "shows it in the agent's status), e.g. --refuse 'unknown tool git'",
            Exit.USAGE,
        )
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
        return fail(exc)
    return Exit.OK
