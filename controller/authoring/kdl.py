"""Agent Spec in KDL: parse agents into AgentSpec manifests, and write manifests back as KDL.

The source syntax (one ``agent`` node per agent, one ``resource "ROLE" _tag=... uri=...`` node per
direct binding) plus Bindery's extension for metadata, tools, the resource selector, the runtime
and the relaunch generation is documented in ``docs/kdl.md``. Documents are parsed by ckdl (KDL v1
or v2, as ckdl's default ``version="any"`` detects); positions come from :mod:`kdlscan`.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

import ckdl

from controller.authoring.errors import START, AuthoringError, Pos, Problems, q
from controller.authoring.kdlscan import NEWLINES, PNode, ScanError, locate_syntax_error, scan
from controller.authoring.yamlpos import Located
from controller.domain.models import API_VERSION, AgentSpecSpec, ResourceSelector

AGENT = "agent"

RUNTIME_PARTS = ("command", "args", "env", "instructions", "run-as-user")

USAGE = {
    "agent": 'agent "NAME" { ... }',
    "namespace": 'namespace "NAMESPACE"',
    "label": 'label "KEY" "VALUE"',
    "annotation": 'annotation "KEY" "VALUE"',
    "resource": 'resource "ROLE" _tag="TYPE" uri="URI"',
    "tool": 'tool "NAME" { param "SLOT" "RESOURCE" }',
    "param": 'param "SLOT" "RESOURCE"',
    "selector": 'selector { match-label "KEY" "VALUE" }',
    "match-label": 'match-label "KEY" "VALUE"',
    "match-expression": 'match-expression "KEY" "In|NotIn|Exists|DoesNotExist" "VALUE"...',
    "namespaces": 'namespaces "NAMESPACE"...',
    "runtime": (
        'runtime image="IMAGE" model="MODEL" { command ...; args ...; env ...; instructions ... }'
    ),
    "command": 'command "EXECUTABLE" "ARG"...',
    "args": 'args "ARG"...',
    "env": 'env "NAME" "VALUE"',
    "instructions": 'instructions "TEXT"',
    "run-as-user": "run-as-user UID",
    "relaunch-generation": "relaunch-generation N",
}


# --------------------------------------------------------------------------------------------
# The parsed tree: ckdl's values with the scanner's positions


@dataclass
class Value:
    value: object
    annotation: str | None
    pos: Pos


@dataclass
class Prop:
    key: Pos
    value: Value


@dataclass
class Node:
    name: str
    annotation: str | None
    pos: Pos
    args: list[Value] = field(default_factory=list)
    props: dict[str, Prop] = field(default_factory=dict)
    children: list[Node] = field(default_factory=list)
    block: Pos | None = None
    """Where the node's ``{`` is, when it has a children block."""


def _value(raw: object, pos: Pos) -> Value:
    if isinstance(raw, ckdl.Value):
        return Value(raw.value, raw.type_annotation, pos)
    return Value(raw, None, pos)


def _zip(cnode: Any, pnode: PNode | None, fallback: Pos) -> Node:
    pos = pnode.pos if pnode else fallback
    node = Node(str(cnode.name), cnode.type_annotation, pos)
    for i, arg in enumerate(cnode.args):
        node.args.append(_value(arg, pnode.args[i] if pnode and i < len(pnode.args) else pos))
    for key, raw in cnode.properties.items():
        where = pnode.props.get(key) if pnode else None
        node.props[key] = Prop(
            where.key if where else pos, _value(raw, where.value if where else pos)
        )
    pkids = pnode.children if pnode else None
    matched = pkids is not None and len(pkids) == len(cnode.children)
    for i, child in enumerate(cnode.children):
        node.children.append(_zip(child, pkids[i] if matched and pkids else None, pos))
    if pnode is not None:
        node.block = pnode.children_pos
    elif cnode.children:
        node.block = pos
    return node


_HINTS = {
    "Bare identifier not allowed here": (
        " (a file is read as KDL v1 or v2, whichever its first version-specific construct is:"
        ' v2 has bare-word strings and #true/#false/#null, v1 has r#"..."# raw strings and'
        " true/false/null; use one version throughout)"
    ),
}


def _parses(text: str) -> bool:
    try:
        ckdl.parse(text)
    except ckdl.ParseError:
        return False
    return True


def parse(text: str, file: str) -> list[Node]:
    """Parse a KDL document with ckdl; a syntax error is an AuthoringError at its position."""
    try:
        doc = ckdl.parse(text)
    except ckdl.ParseError as exc:
        pos, expected = locate_syntax_error(text, _parses)
        message = expected or f"{exc}".rstrip(".") + _HINTS.get(str(exc), "")
        raise AuthoringError.at(file, pos, f"KDL syntax error: {message}") from None
    try:
        pnodes: list[PNode] | None = scan(text)
    except ScanError:  # ckdl accepted what the scanner did not: keep going without positions
        pnodes = None
    matched = pnodes is not None and len(pnodes) == len(doc.nodes)
    return [
        _zip(cnode, pnodes[i] if matched and pnodes else None, START)
        for i, cnode in enumerate(doc.nodes)
    ]


# --------------------------------------------------------------------------------------------
# KDL -> AgentSpec manifests


def _describe(value: object) -> str:
    if isinstance(value, bool):
        return f"boolean {str(value).lower()}"
    if isinstance(value, int):
        return f"integer {value}"
    if isinstance(value, float):
        return f"number {value}"
    if value is None:
        return "null"
    return f"string {q(value)}"


class _Reader:
    """Reads the parts of KDL nodes against their usage; every deviation is a problem."""

    def __init__(self, file: str, problems: Problems) -> None:
        self.file = file
        self.problems = problems

    def error(self, pos: Pos, message: str) -> None:
        self.problems.add(self.file, pos, message)

    def plain(self, node: Node) -> bool:
        """Reject type annotations on the node and its values: Bindery gives them no meaning."""
        ok = True
        if node.annotation is not None:
            self.error(
                node.pos, f'type annotation "({node.annotation})" on {node.name}: expected none'
            )
            ok = False
        for value in [*node.args, *(p.value for p in node.props.values())]:
            if value.annotation is not None:
                self.error(value.pos, f'type annotation "({value.annotation})": expected none')
                ok = False
        return ok

    def strings(
        self, node: Node, what: str, low: int, high: int | None, label: str | None = None
    ) -> list[Value] | None:
        """``low`` to ``high`` (None: any number of) string arguments."""
        label = label or node.name
        usage = USAGE.get(node.name, node.name)
        if len(node.args) < low:
            self.error(node.pos, f"{label} is missing {what}: expected {usage}")
            return None
        if high is not None and len(node.args) > high:
            self.error(node.args[high].pos, f"unexpected argument to {label}: expected {usage}")
            return None
        ok = True
        for arg in node.args:
            if not isinstance(arg.value, str):
                self.error(
                    arg.pos,
                    f"arguments of {label} must be strings, found {_describe(arg.value)}: "
                    f"expected {usage}",
                )
                ok = False
        return node.args if ok else None

    def props(self, node: Node, allowed: Iterable[str], label: str | None = None) -> bool:
        label = label or node.name
        allowed = list(allowed)
        ok = True
        for key, prop in node.props.items():
            if key not in allowed:
                expected = (
                    "no properties"
                    if not allowed
                    else "only " + " and ".join(f"{k}=" for k in allowed)
                )
                self.error(
                    prop.key,
                    f'unknown property "{key}" on {label}: expected {expected} '
                    f"({USAGE.get(node.name, node.name)})",
                )
                ok = False
        return ok

    def prop_str(self, node: Node, key: str, required: bool, label: str, what: str) -> str | None:
        prop = node.props.get(key)
        if prop is None:
            if required:
                self.error(
                    node.pos,
                    f"{label} has no {key} property: expected {key}=... ({what}), "
                    f"as in {USAGE.get(node.name, node.name)}",
                )
            return None
        if not isinstance(prop.value.value, str):
            self.error(
                prop.value.pos,
                f"{key} of {label} must be a string, found {_describe(prop.value.value)}: "
                f'expected {key}="..." ({what})',
            )
            return None
        return prop.value.value

    def leaf(self, node: Node, label: str | None = None) -> bool:
        if node.block is not None:
            self.error(
                node.block,
                f"{label or node.name} takes no children block: expected "
                f"{USAGE.get(node.name, node.name)}",
            )
            return False
        return True

    def unknown(self, node: Node, where: str, allowed: Iterable[str]) -> None:
        names = sorted(allowed)
        expected = names[0] if len(names) == 1 else "one of " + ", ".join(names)
        self.error(node.pos, f'unknown node "{node.name}" {where}: expected {expected}')


class _Agent:
    """Builds one AgentSpec manifest (and the position of each part) from an ``agent`` node."""

    def __init__(self, node: Node, reader: _Reader, name: str) -> None:
        self.node = node
        self.r = reader
        self.name = name
        self.metadata: dict[str, Any] = {"name": name}
        self.spec: dict[str, Any] = {}
        self.doc = Located(
            {
                "apiVersion": API_VERSION,
                "kind": "AgentSpec",
                "metadata": self.metadata,
                "spec": self.spec,
            },
            reader.file,
            node.pos,
        )
        self.doc.values[("metadata", "name")] = node.args[0].pos
        self.doc.values[("spec",)] = node.pos
        self.seen: dict[str, Pos] = {}

    @property
    def label(self) -> str:
        return f'agent "{self.name}"'

    def once(self, node: Node) -> bool:
        first = self.seen.get(node.name)
        if first is not None:
            self.r.error(
                node.pos,
                f"{self.label} has a second {node.name} node (the first is at {first}): "
                "expected at most one",
            )
            return False
        self.seen[node.name] = node.pos
        return True

    def build(self) -> Located:
        handlers: dict[str, Callable[[Node], None]] = {
            "namespace": self.namespace,
            "label": self.meta_entry,
            "annotation": self.meta_entry,
            "resource": self.resource,
            "tool": self.tool,
            "selector": self.selector,
            "runtime": self.runtime,
            "relaunch-generation": self.relaunch_generation,
        }
        for child in self.node.children:
            handler = handlers.get(child.name)
            if handler is None:
                self.r.unknown(child, f"in {self.label}", handlers)
            elif self.r.plain(child):
                handler(child)
        return self.doc

    # -- metadata ---------------------------------------------------------------------------

    def namespace(self, node: Node) -> None:
        args = self.r.strings(node, "the namespace", 1, 1)
        if args and self.r.props(node, ()) and self.r.leaf(node) and self.once(node):
            self.metadata["namespace"] = args[0].value
            self.doc.values[("metadata", "namespace")] = args[0].pos

    def meta_entry(self, node: Node) -> None:
        args = self.r.strings(node, "a key and a value", 2, 2)
        if not (args and self.r.props(node, ()) and self.r.leaf(node)):
            return
        field_name = f"{node.name}s"
        key, value = str(args[0].value), str(args[1].value)
        entries = self.metadata.setdefault(field_name, {})
        path = ("metadata", field_name, key)
        if key in entries:
            self.r.error(
                args[0].pos,
                f'{node.name} "{key}" is set twice (the first is at {self.doc.keys[path]}): '
                "expected each key once",
            )
            return
        entries[key] = value
        self.doc.keys[path] = args[0].pos
        self.doc.values[path] = args[1].pos

    # -- spec -------------------------------------------------------------------------------

    def resource(self, node: Node) -> None:
        args = self.r.strings(node, "its role (the binding name)", 1, 1)
        label = f'resource "{args[0].value}"' if args else "resource"
        ok = self.r.props(node, ("_tag", "uri"), label) and self.r.leaf(node, label)
        tag = self.r.prop_str(node, "_tag", True, label, "the ResourceType of the resource")
        uri = self.r.prop_str(node, "uri", True, label, "the resource's identity")
        if not (args and ok and tag is not None and uri is not None):
            return
        resources = self.spec.setdefault("resources", [])
        at = ("spec", "resources", len(resources))
        resources.append({"name": args[0].value, "tag": tag, "uri": uri})
        self.doc.values[at] = node.pos
        self.doc.values[(*at, "name")] = args[0].pos
        self.doc.values[(*at, "tag")] = node.props["_tag"].value.pos
        self.doc.values[(*at, "uri")] = node.props["uri"].value.pos

    def tool(self, node: Node) -> None:
        args = self.r.strings(node, "the tool's name", 1, 1)
        if not (args and self.r.props(node, ())):
            return
        label = f'tool "{args[0].value}"'
        tools = self.spec.setdefault("tools", [])
        at = ("spec", "tools", len(tools))
        params: dict[str, str] = {}
        for child in node.children:
            if child.name != "param":
                self.r.unknown(child, f"in {label}", ("param",))
                continue
            pargs = self.r.strings(child, "a slot name and a resource", 2, 2)
            if not (
                self.r.plain(child) and pargs and self.r.props(child, ()) and self.r.leaf(child)
            ):
                continue
            slot, value = str(pargs[0].value), str(pargs[1].value)
            path = (*at, "params", slot)
            if slot in params:
                self.r.error(
                    pargs[0].pos,
                    f'{label} has a second param "{slot}" (the first is at {self.doc.keys[path]}): '
                    "expected one value per slot",
                )
                continue
            params[slot] = value
            self.doc.keys[path] = pargs[0].pos
            self.doc.values[path] = pargs[1].pos
        use: dict[str, Any] = {"name": args[0].value}
        if params:
            use["params"] = params
            self.doc.values[(*at, "params")] = node.block or node.pos
        tools.append(use)
        self.doc.values[at] = node.pos
        self.doc.values[(*at, "name")] = args[0].pos

    def selector(self, node: Node) -> None:
        ok = self.r.strings(node, "", 0, 0) is not None and self.r.props(node, ())
        if not (ok and self.once(node)):
            return
        selector: dict[str, Any] = {}
        self.spec["resourceSelector"] = selector
        self.doc.values[("spec", "resourceSelector")] = node.pos
        known = ("match-label", "match-expression", "namespaces")
        for child in node.children:
            if child.name not in known:
                self.r.unknown(child, "in selector", known)
            elif self.r.plain(child) and self.r.props(child, ()) and self.r.leaf(child):
                if child.name == "match-label":
                    self.match_label(child, selector)
                elif child.name == "match-expression":
                    self.match_expression(child, selector)
                else:
                    self.selector_namespaces(child, selector)

    def selector_namespaces(self, child: Node, selector: dict[str, Any]) -> None:
        """The other namespaces the selector selects in (where a ResourceGrant must admit)."""
        args = self.r.strings(child, "one or more namespace names", 1, None)
        if not args:
            return
        path = ("spec", "resourceSelector", "namespaces")
        if "namespaces" in selector:
            self.r.error(
                child.pos,
                f"namespaces is set twice (the first is at {self.doc.values[path]}): "
                "expected one namespaces node listing them all",
            )
            return
        selector["namespaces"] = [a.value for a in args]
        self.doc.values[path] = args[0].pos

    def match_label(self, child: Node, selector: dict[str, Any]) -> None:
        args = self.r.strings(child, "a label key and value", 2, 2)
        if not args:
            return
        labels = selector.setdefault("matchLabels", {})
        key = str(args[0].value)
        path = ("spec", "resourceSelector", "matchLabels", key)
        if key in labels:
            self.r.error(
                args[0].pos,
                f"match-label {q(key)} is set twice (the first is at "
                f"{self.doc.keys[path]}): expected each key once",
            )
            return
        labels[key] = args[1].value
        self.doc.keys[path] = args[0].pos
        self.doc.values[path] = args[1].pos

    def match_expression(self, child: Node, selector: dict[str, Any]) -> None:
        args = self.r.strings(child, "a label key and an operator", 2, None)
        if not args:
            return
        operator = str(args[1].value)
        if operator not in ("In", "NotIn", "Exists", "DoesNotExist"):
            self.r.error(
                args[1].pos,
                f"operator {q(operator)}: expected one of In, NotIn, Exists, DoesNotExist",
            )
            return
        exprs = selector.setdefault("matchExpressions", [])
        path = ("spec", "resourceSelector", "matchExpressions", len(exprs))
        expr: dict[str, Any] = {"key": args[0].value, "operator": operator}
        if len(args) > 2:
            expr["values"] = [a.value for a in args[2:]]
            self.doc.values[(*path, "values")] = args[2].pos
        exprs.append(expr)
        self.doc.values[path] = child.pos
        self.doc.values[(*path, "key")] = args[0].pos
        self.doc.values[(*path, "operator")] = args[1].pos

    def runtime(self, node: Node) -> None:
        if not self.once(node):
            return
        self.r.strings(node, "", 0, 0)
        self.r.props(node, ("image", "model"))
        image = self.r.prop_str(
            node, "image", True, "runtime", "the container image the session runs"
        )
        model = self.r.prop_str(node, "model", False, "runtime", "the model the agent uses")
        at = ("spec", "runtime")
        runtime: dict[str, Any] = {}
        self.doc.values[at] = node.pos
        if image is not None:
            runtime["image"] = image
            self.doc.values[(*at, "image")] = node.props["image"].value.pos
        if model is not None:
            runtime["model"] = model
            self.doc.values[(*at, "model")] = node.props["model"].value.pos
        seen: dict[str, Pos] = {}
        for child in node.children:
            if child.name not in RUNTIME_PARTS:
                self.r.unknown(child, "in runtime", RUNTIME_PARTS)
            elif child.name != "env" and child.name in seen:
                self.r.error(
                    child.pos,
                    f"runtime has a second {child.name} node (the first is at "
                    f"{seen[child.name]}): expected at most one",
                )
            elif self.r.plain(child) and self.r.props(child, ()) and self.r.leaf(child):
                seen.setdefault(child.name, child.pos)
                self.runtime_part(child, runtime)
        if image is not None:
            self.spec["runtime"] = runtime

    def runtime_part(self, child: Node, runtime: dict[str, Any]) -> None:
        at = ("spec", "runtime")
        if child.name in ("command", "args"):
            args = self.r.strings(child, "at least one argument", 1, None)
            if args:
                runtime[child.name] = [a.value for a in args]
                self.doc.values[(*at, child.name)] = child.pos
        elif child.name == "run-as-user":
            uid = child.args[0] if len(child.args) == 1 else None
            if uid is None or isinstance(uid.value, bool) or not isinstance(uid.value, int):
                self.r.error(
                    child.pos,
                    "run-as-user takes one whole number, the user id the session runs as "
                    f"(pod securityContext.runAsUser): expected {USAGE['run-as-user']}",
                )
                return
            runtime["securityContext"] = {"runAsUser": uid.value}
            self.doc.values[(*at, "securityContext", "runAsUser")] = uid.pos
        elif child.name == "instructions":
            args = self.r.strings(child, "the instructions text", 1, 1)
            if args:
                runtime["instructions"] = args[0].value
                self.doc.values[(*at, "instructions")] = args[0].pos
        else:
            args = self.r.strings(child, "a name and a value", 2, 2)
            if args:
                env = runtime.setdefault("env", [])
                path = (*at, "env", len(env))
                env.append({"name": str(args[0].value), "value": str(args[1].value)})
                self.doc.values[path] = child.pos
                self.doc.values[(*path, "name")] = args[0].pos
                self.doc.values[(*path, "value")] = args[1].pos

    def relaunch_generation(self, node: Node) -> None:
        usage = USAGE[node.name]
        if not (self.r.props(node, ()) and self.r.leaf(node)):
            return
        if len(node.args) != 1:
            where = node.args[1].pos if len(node.args) > 1 else node.pos
            self.r.error(where, f"relaunch-generation takes one integer: expected {usage}")
            return
        arg = node.args[0]
        if isinstance(arg.value, bool) or not isinstance(arg.value, int) or arg.value < 0:
            self.r.error(
                arg.pos,
                f"relaunch-generation is {_describe(arg.value)}: expected a whole number >= 0 "
                f"({usage})",
            )
            return
        if self.once(node):
            self.spec["relaunchGeneration"] = arg.value
            self.doc.values[("spec", "relaunchGeneration")] = arg.pos


def read_agents(text: str, file: str, problems: Problems) -> list[Located]:
    """Every ``agent`` in a KDL document as a manifest with positions (not yet checked).

    A syntax error raises at once; problems in the agents are added to ``problems``.
    """
    reader = _Reader(file, problems)
    docs: list[Located] = []
    for node in parse(text, file):
        if node.name != AGENT:
            reader.unknown(node, "at the top level", (AGENT,))
            continue
        if not reader.plain(node):
            continue
        args = reader.strings(node, "its name", 1, 1)
        if not args or not reader.props(node, ()):
            continue
        docs.append(_Agent(node, reader, str(args[0].value)).build())
    return docs


# --------------------------------------------------------------------------------------------
# AgentSpec -> KDL


def quote(value: str) -> str:
    """A KDL string that reads the same in KDL v1 and v2: quoted, with escapes only."""
    out = ['"']
    for ch in value:
        if ch == '"':
            out.append('\\"')
        elif ch == "\\":
            out.append("\\\\")
        elif ch == "\n":
            out.append("\\n")
        elif ch == "\r":
            out.append("\\r")
        elif ch == "\t":
            out.append("\\t")
        elif ord(ch) < 0x20 or ord(ch) == 0x7F or ch in NEWLINES or ch == "\ufeff":
            out.append(f"\\u{{{ord(ch):x}}}")
        else:
            out.append(ch)
    out.append('"')
    return "".join(out)


def _line(
    indent: int, name: str, args: Iterable[str] = (), props: Iterable[tuple[str, str]] = ()
) -> str:
    parts = [name, *(quote(a) for a in args), *(f"{k}={quote(v)}" for k, v in props)]
    return "  " * indent + " ".join(parts)


def _block(indent: int, head: str, body: list[str]) -> list[str]:
    if not body:
        return [head]
    return [f"{head} {{", *body, "  " * indent + "}"]


def _selector_lines(sel: ResourceSelector) -> list[str]:
    inner = [_line(2, "match-label", [k, v]) for k, v in sel.match_labels.items()]
    inner += [
        _line(2, "match-expression", [req.key, req.operator, *req.values])
        for req in sel.match_expressions
    ]
    if sel.namespaces:
        inner.append(_line(2, "namespaces", sel.namespaces))
    return inner


def to_kdl(metadata: dict[str, Any], spec: AgentSpecSpec) -> str:
    """One ``agent`` node; rendering it gives back the same manifest."""
    body: list[str] = []
    if "namespace" in metadata:
        body.append(_line(1, "namespace", [metadata["namespace"]]))
    for key, value in (metadata.get("labels") or {}).items():
        body.append(_line(1, "label", [key, value]))
    for key, value in (metadata.get("annotations") or {}).items():
        body.append(_line(1, "annotation", [key, value]))
    for binding in spec.resources:
        body.append(
            _line(1, "resource", [binding.name], [("_tag", binding.tag), ("uri", binding.uri)])
        )
    for use in spec.tools:
        params = [_line(2, "param", [slot, value]) for slot, value in use.params.items()]
        body.extend(_block(1, _line(1, "tool", [use.name]), params))
    if spec.resource_selector is not None:
        body.extend(_block(1, _line(1, "selector"), _selector_lines(spec.resource_selector)))
    if spec.runtime is not None:
        rt = spec.runtime
        props = [("image", rt.image)] + ([("model", rt.model)] if rt.model else [])
        inner = []
        if rt.command:
            inner.append(_line(2, "command", rt.command))
        if rt.args:
            inner.append(_line(2, "args", rt.args))
        inner += [_line(2, "env", [var.name, var.value]) for var in rt.env]
        if rt.instructions:
            inner.append(_line(2, "instructions", [rt.instructions]))
        if rt.security_context is not None and rt.security_context.run_as_user is not None:
            inner.append(f"    run-as-user {int(rt.security_context.run_as_user)}")
        body.extend(_block(1, _line(1, "runtime", props=props), inner))
    if spec.relaunch_generation:
        body.append(f"  relaunch-generation {spec.relaunch_generation}")
    return "\n".join(_block(0, _line(0, AGENT, [metadata["name"]]), body)) + "\n"
