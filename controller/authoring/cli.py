"""The authoring subcommands of ``bindery``: ``render``, ``export`` and ``import-tool``.

``register`` adds them to the main command's subparsers; each sets ``func`` to a handler that
takes the parsed arguments and returns the exit code. On bad input a handler prints one
``FILE:LINE:COL: error: ...`` line per problem to stderr, nothing to stdout, and returns 1.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from controller.authoring.convert import Source, export, render
from controller.authoring.errors import AuthoringError, Pos
from controller.authoring.kdlscan import Lines
from controller.authoring.manifests import dump_json, dump_yaml
from controller.authoring.tools import import_tools
from controller.domain.errors import InvalidInputError

STDIN = "-"


def _read(paths: Sequence[str]) -> list[Source]:
    """Every input as (name, text); ``-`` is standard input. Unreadable input is an error."""
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
            sources.append((name, data.decode("utf-8")))
        except UnicodeDecodeError as exc:
            good = data[: exc.start].decode("utf-8")
            pos: Pos = Lines(good).pos(len(good))
            errors.append(
                f"{name}:{pos}: error: invalid UTF-8 (byte 0x{data[exc.start]:02x}): "
                "expected UTF-8 text"
            )
    if errors:
        raise _InputError("\n".join(errors))
    return sources


class _InputError(InvalidInputError):
    pass


def _run(produce: Callable[[], str]) -> int:
    try:
        out = produce()
    except (AuthoringError, _InputError) as exc:
        print(exc, file=sys.stderr)
        return 1
    sys.stdout.write(out)
    sys.stdout.flush()
    return 0


def _dump(objects: list[dict[str, Any]], output: str) -> str:
    if not objects:
        return ""
    return dump_json(objects) if output == "json" else dump_yaml(objects)


def cmd_render(args: argparse.Namespace) -> int:
    if args.reverse:
        if args.output != "yaml":
            print("bindery render: error: --reverse prints KDL; -o does not apply", file=sys.stderr)
            return 2
        return cmd_export(args)
    warnings: list[str] = []
    code = _run(lambda: _dump(render(_read(args.files), warnings), args.output))
    for warning in warnings:
        print(warning, file=sys.stderr)
    return code


def cmd_export(args: argparse.Namespace) -> int:
    return _run(lambda: export(_read(args.files)))


def cmd_import_tool(args: argparse.Namespace) -> int:
    return _run(lambda: _dump(import_tools(_read(args.files)), args.output))


def _output(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "-o",
        "--output",
        choices=("yaml", "json"),
        default="yaml",
        help="manifest format (default: yaml; json prints one object, or a v1 List of several)",
    )


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
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


def main(argv: Sequence[str] | None = None) -> int:
    """The authoring subcommands on their own (``python -m controller.authoring.cli``)."""
    parser = argparse.ArgumentParser(prog="bindery")
    register(parser.add_subparsers(dest="command", required=True, metavar="COMMAND"))
    args = parser.parse_args(argv)
    func: Callable[[argparse.Namespace], int] = args.func
    return func(args)


if __name__ == "__main__":
    sys.exit(main())
