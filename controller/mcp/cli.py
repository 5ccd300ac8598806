"""``python -m controller.mcp serve``: the adapter's command line (the session pod runs it).

:func:`add_arguments` and :func:`run_from_args` are the whole interface, so any command line can
offer the adapter as a subcommand.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import os
import sys
from pathlib import Path

import structlog

from controller.mcp import http
from controller.mcp._session import BindingsError, ack_path, bindings_path
from controller.mcp.access import AccessError, loopback_listen, refuse_host_network
from controller.mcp.adapter import BindingsAdapter
from controller.mcp.content import Snapshot

DEFAULT_PORT = 7411
DEFAULT_LISTEN = f"127.0.0.1:{DEFAULT_PORT}"
NAMESPACE_ENV = "POD_NAMESPACE"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--listen",
        default=DEFAULT_LISTEN,
        help=f"loopback address and port to serve on (default {DEFAULT_LISTEN}); the MCP "
        f"endpoint is http://HOST:PORT{http.PATH}",
    )
    parser.add_argument(
        "--bindings",
        help="the delivered bindings file (default: $BINDERY_BINDINGS_FILE, else the mounted path)",
    )
    parser.add_argument(
        "--ack-file",
        help="the acknowledgement file (default: $BINDERY_ACK_FILE, else the mounted path)",
    )
    parser.add_argument(
        "--resolve",
        choices=["auto", "off"],
        default="auto",
        help="offer bindery_resolve: 'auto' (default) when the session's credentials may read "
        "what resolving reads (checked at start), 'off' never",
    )
    parser.add_argument("--kubeconfig", help="credentials for resolving (default: the pod's)")
    parser.add_argument(
        "--poll-interval",
        type=float,
        default=0.05,
        help="seconds between two checks of the bindings file (default 0.05)",
    )
    parser.add_argument("--log-level", default="INFO", help="INFO (default), DEBUG, WARNING")


def _configure_logs(level: str) -> None:
    structlog.configure(
        processors=[
            structlog.processors.add_log_level,
            structlog.processors.TimeStamper(fmt="iso", utc=True),
            structlog.processors.JSONRenderer()
            if not sys.stderr.isatty()
            else structlog.dev.ConsoleRenderer(),
        ],
        wrapper_class=structlog.make_filtering_bound_logger(
            logging.getLevelNamesMapping().get(level.upper(), logging.INFO)
        ),
        logger_factory=structlog.PrintLoggerFactory(sys.stderr),
    )


def _namespace(bindings: Path) -> str:
    """The agent's namespace, from the document (else the pod's, from the downward API)."""
    try:
        return Snapshot.of(bindings.read_bytes()).bindings.agent.namespace
    except (OSError, BindingsError):
        return os.environ.get(NAMESPACE_ENV, "")


def run_from_args(args: argparse.Namespace) -> int:
    _configure_logs(args.log_level)
    try:
        refuse_host_network()
        host, port = loopback_listen(args.listen)
    except AccessError as exc:
        print(f"bindery mcp: {exc}", file=sys.stderr)
        return 2
    bindings = bindings_path(args.bindings)
    resolver = None
    if args.resolve == "auto":
        from controller.mcp.access import session_resolver  # noqa: PLC0415 - the client is slow to import

        namespace = _namespace(bindings)
        resolver = session_resolver(namespace, args.kubeconfig) if namespace else None
    adapter = BindingsAdapter(
        bindings,
        ack_file=ack_path(args.ack_file),
        resolver=resolver,
        poll_interval=args.poll_interval,
    )
    asyncio.run(http.serve(adapter, host, port))
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m controller.mcp",
        description="Serve a session's Bindery bindings over MCP (Streamable HTTP, loopback).",
    )
    sub = parser.add_subparsers(dest="command", required=True)
    serve = sub.add_parser("serve", help="serve the delivered bindings document")
    add_arguments(serve)
    args = parser.parse_args(argv)
    return run_from_args(args)
