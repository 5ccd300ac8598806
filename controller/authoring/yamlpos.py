"""YAML documents with the position of every value and mapping key, for precise diagnostics."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import yaml

from controller.authoring.errors import START, AuthoringError, Pos
from controller.domain.errors import InvalidInputError

Path = tuple[str | int, ...]


@dataclass
class Located:
    """One document (or one item of a ``List``): the data, and where each part of it starts.

    ``values`` maps a path (mapping keys and sequence indexes) to where its value starts; ``keys``
    maps the path of a mapping entry to where its key starts.
    """

    data: Any
    file: str
    origin: Pos
    values: dict[Path, Pos] = field(default_factory=dict)
    keys: dict[Path, Pos] = field(default_factory=dict)

    def at(self, *path: str | int) -> Pos:
        """Where ``path`` starts, or its nearest enclosing part that has a position."""
        p: Path = tuple(path)
        while p:
            if p in self.values:
                return self.values[p]
            p = p[:-1]
        return self.values.get((), self.origin)

    def key_at(self, *path: str | int) -> Pos:
        """Where the key of the mapping entry at ``path`` starts (its value, failing that)."""
        return self.keys.get(tuple(path)) or self.at(*path)

    def sub(self, *prefix: str | int) -> Located:
        """The part at ``prefix`` as its own document, positions re-rooted."""
        data: Any = self.data
        for part in prefix:
            data = data[part]
        n = len(prefix)
        values = {p[n:]: v for p, v in self.values.items() if p[:n] == prefix}
        keys = {p[n:]: v for p, v in self.keys.items() if p[:n] == prefix and len(p) > n}
        return Located(data, self.file, self.at(*prefix), values, keys)


def _mark(node: yaml.Node) -> Pos:
    return Pos(node.start_mark.line + 1, node.start_mark.column + 1)


def _walk(node: yaml.Node, path: Path, doc: Located) -> None:
    doc.values[path] = _mark(node)
    if isinstance(node, yaml.MappingNode):
        for key, value in node.value:
            if isinstance(key, yaml.ScalarNode):
                child = (*path, str(key.value))
                doc.keys[child] = _mark(key)
                _walk(value, child, doc)
    elif isinstance(node, yaml.SequenceNode):
        for i, item in enumerate(node.value):
            _walk(item, (*path, i), doc)


class _UnpairedError(InvalidInputError):
    pass


def _pair_surrogates(value: Any) -> Any:
    """Join the UTF-16 surrogate pairs YAML leaves apart when it reads JSON escapes.

    ``json.dumps`` writes a character outside the BMP as two escapes (``"\\ud83d\\ude00"``); a
    YAML parser decodes each on its own. An unpaired surrogate is not text: it raises.
    """
    if isinstance(value, str):
        if any("\ud800" <= c <= "\udfff" for c in value):
            try:
                return value.encode("utf-16-le", "surrogatepass").decode("utf-16-le")
            except UnicodeDecodeError:
                raise _UnpairedError from None
        return value
    if isinstance(value, dict):
        return {_pair_surrogates(k): _pair_surrogates(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_pair_surrogates(v) for v in value]
    return value


def load(text: str, file: str) -> list[Located]:
    """Every non-empty document of a YAML (or JSON) stream, with positions.

    A syntax error is an :class:`AuthoringError` at the position the YAML parser reports.
    """
    try:
        nodes = list(yaml.compose_all(text, Loader=yaml.SafeLoader))
        datas = list(yaml.safe_load_all(text))
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        pos = Pos(mark.line + 1, mark.column + 1) if mark else START
        what = " ".join(p for p in (exc.context, exc.problem) if p) or "invalid YAML"
        raise AuthoringError.at(file, pos, f"YAML syntax error: {what}") from None
    except yaml.YAMLError as exc:
        raise AuthoringError.at(file, START, f"YAML error: {exc}") from None
    docs: list[Located] = []
    for node, raw in zip(nodes, datas, strict=True):
        if node is None or raw is None:
            continue
        try:
            data = _pair_surrogates(raw)
        except _UnpairedError:
            raise AuthoringError.at(
                file, _mark(node), "a string holds an unpaired UTF-16 surrogate: expected text"
            ) from None
        doc = Located(data, file, _mark(node))
        _walk(node, (), doc)
        docs.append(doc)
    return docs
