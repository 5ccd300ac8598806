"""The authoring commands: ``bindery render``, ``export`` and ``import-tool``.

``register`` adds them to the main command's subparsers; each sets ``func`` to a handler that
takes the parsed arguments and returns the exit code. On bad input a handler prints one
``FILE:LINE:COL: error: ...`` line per problem to stderr, nothing to stdout, and returns 1: an
empty input, or one nested too deeply to read, is bad input too.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from controller.cli.command import Subparsers
from controller.domain.errors import InvalidInputError
from controller.runtime.exits import Exit

if TYPE_CHECKING:
    from controller.authoring.convert import Source

STDIN = "-"
KDL = "Agent Spec KDL (an agent node, docs/kdl.md)"
MANIFESTS = "AgentSpec manifests (YAML or JSON)"
TOOLS = "tool definitions (YAML with resource_slots)"


def _read(paths: Sequence[str], expected: str) -> list[Source]:
    """Every input as (name, text); ``-`` is standard input. Unreadable or empty input (nothing
    but white space: ``expected`` says what it should hold) is an error."""
    from controller.authoring.kdlscan import Lines

    sources: list[Source] = []
    errors: list[str] = []
    for path in paths:
        name = "<stdin>" if path == STDIN else path
        try:
            data = sys.stdin.buffer.read() if path == STDIN else Path(path).read_bytes()
        except OSError as exc:
            errors.append(f"{name}: error: cannot read it: {exc.strerror or exc}")
            continue
        try:
            text = data.decode("utf-8")
        except UnicodeDecodeError as exc:
            good = data[: exc.start].decode("utf-8")
            pos = Lines(good).pos(len(good))
            errors.append(
                f"{name}:{pos}: error: invalid UTF-8 (byte 0x{data[exc.start]:02x}): "
                "expected UTF-8 text"
            )
            continue
        if not text.strip():
            errors.append(f"{name}: error: it is empty: expected {expected}")
            continue
        sources.append((name, text))
    if errors:
        raise _InputError("\n".join(errors))
    return sources


class _InputError(InvalidInputError):
    pass


def _run(produce: Callable[[], str], paths: Sequence[str]) -> int:
    from controller.authoring.errors import AuthoringError

    try:
        out = produce()
    except (AuthoringError, _InputError) as exc:
        print(exc, file=sys.stderr)
        return Exit.FAILURE
    except RecursionError:
        # Parsing and converting recurse once per level of nesting.
        names = ", ".join("<stdin>" if p == STDIN else p for p in paths)
        print(f"{names}: error: nested too deeply to read: flatten the input", file=sys.stderr)
        return Exit.FAILURE
    sys.stdout.write(out)
    sys.stdout.flush()
    return Exit.OK


def _dump(objects: list[dict[str, Any]], args: argparse.Namespace, expected: str) -> str:
    if not objects:
        names = ", ".join("<stdin>" if p == STDIN else p for p in args.files)
        raise _InputError(f"{names}: error: nothing to print: expected {expected}")
    from controller.authoring.manifests import dump_json, dump_yaml

    return dump_json(objects) if args.output == "json" else dump_yaml(objects)


def cmd_render(args: argparse.Namespace) -> int:
    if args.reverse:
        if args.output != "yaml":
            print("bindery render: error: --reverse prints KDL; -o does not apply", file=sys.stderr)
            return Exit.USAGE
        return cmd_export(args)
    from controller.authoring.convert import render

    warnings: list[str] = []
    code = _run(lambda: _dump(render(_read(args.files, KDL), warnings), args, KDL), args.files)
    for warning in warnings:
        print(warning, file=sys.stderr)
    return code


def cmd_export(args: argparse.Namespace) -> int:
    from controller.authoring.convert import export

    return _run(lambda: export(_read(args.files, MANIFESTS)), args.files)


def cmd_import_tool(args: argparse.Namespace) -> int:
    from controller.authoring.tools import import_tools

    return _run(lambda: _dump(import_tools(_read(args.files, TOOLS)), args, TOOLS), args.files)


def _output(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "-o",
        "--output",
        choices=("yaml", "json"),
        default="yaml",
        help="manifest format (default: yaml; json prints one object, or a v1 List of several)",
    )


def register(subparsers: Subparsers) -> None:
    """Add ``render``, ``export`` and ``import-tool`` to the ``bindery`` command."""
    render_p = subparsers.add_parser(
        "render",
        help="Agent Spec KDL -> AgentSpec manifests (for kubectl apply -f -)",
        description=(
            "Print the AgentSpec manifest of every agent in the KDL files (docs/kdl.md). "
            "With --reverse, read AgentSpec manifests and print KDL, like 'bindery export'."
        ),
    )
    render_p.add_argument("files", nargs="+", metavar="FILE", help="KDL files ('-' for stdin)")
    _output(render_p)
    render_p.add_argument(
        "--reverse", action="store_true", help="read AgentSpec manifests (YAML/JSON), print KDL"
    )
    render_p.set_defaults(func=cmd_render)

    export_p = subparsers.add_parser(
        "export",
        help="AgentSpec manifests -> Agent Spec KDL",
        description=(
            "Print the KDL of every AgentSpec in the YAML or JSON files (multi-document streams, "
            "v1 Lists and 'kubectl get -o yaml' output; status and server-set metadata are "
            "ignored)."
        ),
    )
    export_p.add_argument("files", nargs="+", metavar="FILE", help="manifest files ('-' for stdin)")
    export_p.set_defaults(func=cmd_export)

    tool_p = subparsers.add_parser(
        "import-tool",
        help="a tool definition (snake_case resource_slots YAML) -> Tool manifest",
        description=(
            "Print a Tool manifest for every tool definition in the YAML files: resource_slots "
            "with name, resource_type, access, binding, static_resource and required."
        ),
    )
    tool_p.add_argument("files", nargs="+", metavar="FILE", help="tool YAML files ('-' for stdin)")
    _output(tool_p)
    tool_p.set_defaults(func=cmd_import_tool)
