"""``bindery uri-encode``: URIs as a Resource's ``spec.uri`` accepts them (printable ASCII)."""

from __future__ import annotations

import argparse

from controller.cli.command import Subparsers, fail
from controller.runtime.exits import Exit


def register(sub: Subparsers) -> None:
    parser = sub.add_parser(
        "uri-encode",
        help="percent-encode URIs as Resource spec.uri accepts them (RFC 3986: printable ASCII)",
        # A description is printed as written (only help strings are %-formatted).
        description=(
            "Print each URI with every character outside printable ASCII (spaces, control, "
            "invisible and non-ASCII letters) replaced by the %XX of its UTF-8 bytes; '%' is "
            "kept, so an encoded URI prints unchanged. Exit 1 if a result is still no URI "
            "(no scheme, longer than 2048 bytes) or an argument is not UTF-8 text."
        ),
    )
    parser.add_argument("uri", nargs="+", help="a URI, e.g. 'github-issue://example/café'")
    parser.set_defaults(func=run)


def not_utf8(arg: str) -> str | None:
    """Why a command-line argument is not UTF-8 text, or None. Python hands each undecodable
    byte of argv over as a lone surrogate (U+DC80 to U+DCFF for bytes 0x80 to 0xFF)."""
    try:
        arg.encode("utf-8")
    except UnicodeEncodeError as exc:
        bad = ord(arg[exc.start])
        byte = f"byte 0x{bad - 0xDC00:02x}" if 0xDC80 <= bad <= 0xDCFF else f"U+{bad:04X}"
        return f"not UTF-8 text ({byte} after {arg[: exc.start]!r}): give the URI as UTF-8 text"
    return None


def run(args: argparse.Namespace) -> int:
    from controller.domain.rules import percent_encoded, uri_problem

    status = Exit.OK
    for number, uri in enumerate(args.uri, 1):
        if why := not_utf8(uri):
            status = fail(f"URI {number}: {why}")
            continue
        encoded = percent_encoded(uri)
        print(encoded)
        if why := uri_problem(encoded):
            status = fail(why)
    return status
