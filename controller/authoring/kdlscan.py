"""Source positions for KDL documents parsed by ckdl.

ckdl parses KDL but reports no positions: neither for the nodes it returns nor for the syntax
errors it raises. This module is a small scanner that walks the same text with KDL's lexical
rules (strings, raw strings, multi-line strings, nested comments, slashdash, line continuations,
type annotations; KDL v1 and v2 alike) and records where every node, argument and property
starts. It does not decode values: ckdl stays the parser of record and this scanner only locates
what ckdl returned, or locates the error ckdl reported.

On a document ckdl rejects, :func:`locate_syntax_error` returns the scanner's own diagnosis
(position and what was expected) when it finds one; otherwise it bisects the document with ckdl
over the boundaries between complete entries to find where the text stops being parseable.
"""

from __future__ import annotations

import bisect
import contextlib
from collections.abc import Callable
from dataclasses import dataclass, field

from controller.authoring.errors import Pos
from controller.domain.errors import InvalidInputError

NEWLINES = "\n\r\x0b\x0c\x85\u2028\u2029"
SPACES = "\t \u00a0\u1680" + "".join(map(chr, range(0x2000, 0x200B))) + "\u202f\u205f\u3000\ufeff"
_NOT_IDENT = set('\\/(){};[]="') | set(NEWLINES) | set(SPACES)
_ESCAPES = {
    "n": "\n",
    "r": "\r",
    "t": "\t",
    "\\": "\\",
    '"': '"',
    "/": "/",
    "b": "\b",
    "f": "\f",
    "s": " ",
}


class ScanError(InvalidInputError):
    """A syntax error found by the scanner: an offset and what was expected there."""

    def __init__(self, offset: int, message: str) -> None:
        super().__init__(message)
        self.offset = offset
        self.message = message


@dataclass
class PProp:
    key: Pos
    value: Pos


@dataclass
class PNode:
    """Where one node and its parts start. ``children`` is None when the node has no block."""

    pos: Pos
    args: list[Pos] = field(default_factory=list)
    props: dict[str, PProp] = field(default_factory=dict)
    children: list[PNode] | None = None
    children_pos: Pos | None = None


@dataclass
class _Token:
    start: int
    end: int
    kind: str  # "string" | "raw" | "word" | "keyword"
    text: str  # the decoded text for strings and words (used for property keys)


class Lines:
    """Offsets to 1-based line and column, counting KDL's newlines (CRLF is one)."""

    def __init__(self, text: str) -> None:
        starts = [0]
        i, n = 0, len(text)
        while i < n:
            c = text[i]
            if c in NEWLINES:
                if c == "\r" and i + 1 < n and text[i + 1] == "\n":
                    i += 1
                starts.append(i + 1)
            i += 1
        self._starts = starts

    def pos(self, offset: int) -> Pos:
        line = bisect.bisect_right(self._starts, offset) - 1
        return Pos(line + 1, offset - self._starts[line] + 1)


class Scanner:
    """One pass over a KDL document building a :class:`PNode` tree (slashdashed parts dropped)."""

    def __init__(self, text: str) -> None:
        self.text = text
        self.n = len(text)
        self.i = 0
        self.lines = Lines(text)
        self.depth = 0
        self.cuts: list[tuple[int, int]] = []
        """Offsets after complete parts, with the block depth there: where a prefix can end."""

    # -- helpers ---------------------------------------------------------------------------

    def _peek(self, k: int = 0) -> str:
        j = self.i + k
        return self.text[j] if j < self.n else ""

    def _starts(self, s: str) -> bool:
        return self.text.startswith(s, self.i)

    def _fail(self, message: str, offset: int | None = None) -> ScanError:
        return ScanError(self.i if offset is None else offset, message)

    def _describe(self, offset: int) -> str:
        if offset >= self.n:
            return "the end of the file"
        c = self.text[offset]
        if c in NEWLINES:
            return "the end of the line"
        return f'"{c}"'

    def _cut(self) -> None:
        self.cuts.append((self.i, self.depth))

    # -- space and comments ------------------------------------------------------------------

    def _block_comment(self) -> None:
        start = self.i
        self.i += 2
        level = 1
        while self.i < self.n:
            if self._starts("/*"):
                level += 1
                self.i += 2
            elif self._starts("*/"):
                level -= 1
                self.i += 2
                if level == 0:
                    return
            else:
                self.i += 1
        raise self._fail('unterminated comment: expected "*/" to close this "/*"', start)

    def _line_comment(self) -> None:
        while self.i < self.n and self.text[self.i] not in NEWLINES:
            self.i += 1

    def _newline(self) -> None:
        if self._starts("\r\n"):
            self.i += 2
        else:
            self.i += 1

    def _node_space(self) -> bool:
        """Skip spaces, block comments and line continuations; True if anything was skipped."""
        start = self.i
        while self.i < self.n:
            c = self.text[self.i]
            if c in SPACES:
                self.i += 1
            elif self._starts("/*"):
                self._block_comment()
            elif c == "\\":
                cont = self.i
                self.i += 1
                while self.i < self.n and self.text[self.i] in SPACES:
                    self.i += 1
                if self._starts("//"):
                    self._line_comment()
                if self.i < self.n and self.text[self.i] not in NEWLINES:
                    raise self._fail(
                        'expected a newline after the line continuation "\\", found '
                        + self._describe(self.i),
                        cont,
                    )
                if self.i < self.n:
                    self._newline()
            else:
                break
        return self.i > start

    def _line_space(self) -> None:
        """Skip everything allowed between nodes: space, newlines, comments and ";"."""
        while self.i < self.n:
            c = self.text[self.i]
            if c in SPACES or c == ";":
                self.i += 1
            elif c in NEWLINES:
                self._newline()
            elif self._starts("//"):
                self._line_comment()
            elif self._starts("/*"):
                self._block_comment()
            else:
                break

    # -- tokens ------------------------------------------------------------------------------

    def _multiline(self) -> _Token:
        start = self.i
        self.i += 3
        while self.i < self.n:
            if self.text[self.i] == "\\":
                self.i += 2
            elif self._starts('"""'):
                self.i += 3
                return _Token(start, self.i, "string", self.text[start + 3 : self.i - 3])
            else:
                self.i += 1
        raise self._fail('unterminated string: expected """ to close this """', start)

    def _quoted(self) -> _Token:
        if self._starts('"""'):
            return self._multiline()
        start = self.i
        self.i += 1
        out: list[str] = []
        while self.i < self.n:
            c = self.text[self.i]
            if c == "\\":
                nxt = self._peek(1)
                if nxt == "u" and self._peek(2) == "{":
                    close = self.text.find("}", self.i)
                    if close < 0:
                        close = self.n - 1
                    try:
                        out.append(chr(int(self.text[self.i + 3 : close], 16)))
                    except (ValueError, OverflowError):
                        out.append("?")
                    self.i = close + 1
                else:
                    out.append(_ESCAPES.get(nxt, nxt))
                    self.i += 2
            elif c == '"':
                self.i += 1
                return _Token(start, self.i, "string", "".join(out))
            else:
                out.append(c)
                self.i += 1
        raise self._fail("unterminated string: expected a closing '\"' for this string", start)

    def _raw(self, prefix: int) -> _Token:
        """A raw string: ``r#"..."#`` (v1) when prefix is 1, ``#"..."#`` (v2) when it is 0."""
        start = self.i
        self.i += prefix
        hashes = 0
        while self._peek() == "#":
            hashes += 1
            self.i += 1
        if self._peek() != '"':
            raise self._fail("expected '\"' to start a raw string")
        multi = prefix == 0 and self._starts('"""')  # v1 has no multi-line raw strings
        self.i += 3 if multi else 1
        closing = ('"""' if multi else '"') + "#" * hashes
        end = self.text.find(closing, self.i)
        if end < 0:
            raise self._fail(f"unterminated raw string: expected {closing} to close it", start)
        body = self.text[self.i : end]
        self.i = end + len(closing)
        return _Token(start, self.i, "raw", body)

    def _word(self) -> _Token:
        start = self.i
        while self.i < self.n and self.text[self.i] not in _NOT_IDENT:
            self.i += 1
        return _Token(start, self.i, "word", self.text[start : self.i])

    def _token(self) -> _Token | None:
        """A string, raw string, bare word/number, or ``#keyword``; None if none starts here."""
        c = self._peek()
        if c == '"':
            return self._quoted()
        if c == "#":
            j = self.i
            while j < self.n and self.text[j] == "#":
                j += 1
            if j < self.n and self.text[j] == '"':
                return self._raw(0)
            start = self.i
            self.i += 1
            word = self._word()
            return _Token(start, word.end, "keyword", self.text[start : word.end])
        if c == "r" and self._peek(1) in ('"', "#"):
            j = self.i + 1
            while j < self.n and self.text[j] == "#":
                j += 1
            if j < self.n and self.text[j] == '"':
                return self._raw(1)
        if c and c not in _NOT_IDENT:
            return self._word()
        return None

    def _annotation(self) -> None:
        self.i += 1
        self._node_space()
        if self._token() is None:
            raise self._fail(
                "expected a type name inside a type annotation, found " + self._describe(self.i)
            )
        self._node_space()
        if self._peek() != ")":
            raise self._fail(
                'expected ")" to close the type annotation, found ' + self._describe(self.i)
            )
        self.i += 1

    # -- structure ---------------------------------------------------------------------------

    def document(self) -> list[PNode]:
        nodes = self._nodes()
        if self.i < self.n:  # only a "}" stops the top-level list early
            raise self._fail('unexpected "}": there is no children block to close')
        return nodes

    def _nodes(self) -> list[PNode]:
        nodes: list[PNode] = []
        while True:
            self._line_space()
            if self.i >= self.n or self._peek() == "}":
                return nodes
            dropped = False
            if self._starts("/-"):
                dropped = True
                self.i += 2
                self._line_space()
            node = self._node()
            if not dropped:
                nodes.append(node)

    def _terminated(self) -> bool:
        """At the end of a node: consume its terminator (a ``}`` is left to the block)."""
        c = self._peek()
        if c in NEWLINES and c:
            self._newline()
        elif c == ";":
            self.i += 1
        elif self._starts("//"):
            self._line_comment()
        elif c and c != "}":
            return False
        return True

    def _node(self) -> PNode:
        if self._peek() == "(":
            self._annotation()
            self._node_space()
        name_at = self.i
        name = self._token()
        if name is None or name.kind == "keyword":
            raise self._fail("expected a node name, found " + self._describe(name_at), name_at)
        node = PNode(self.lines.pos(name_at))
        if name.kind == "word" and self._peek() in ("{", '"'):
            raise self._fail(
                f'expected whitespace after the node name "{name.text}", found '
                + self._describe(self.i)
            )
        self._cut()
        closed = False
        while True:
            spaced = self._node_space()
            if self._terminated():
                return node
            c = self._peek()
            dropped = False
            if self._starts("/-"):
                dropped = True
                self.i += 2
                self._node_space()
                c = self._peek()
            if c == "{":
                if closed and not dropped:
                    raise self._fail(
                        "expected the end of the node: it already has a children block"
                    )
                block = self._children()
                if not dropped:
                    node.children, node.children_pos, closed = block[0], block[1], True
                continue
            if closed:
                raise self._fail(
                    "expected the end of the node after its children block, found "
                    + self._describe(self.i)
                )
            if not spaced:
                raise self._fail(
                    "expected whitespace before this argument or property, found "
                    + self._describe(self.i)
                )
            self._entry(node, dropped)

    def _children(self) -> tuple[list[PNode], Pos]:
        open_at = self.i
        self.i += 1
        self.depth += 1
        self._cut()
        kids = self._nodes()
        if self.i >= self.n:
            raise self._fail('this "{" is never closed: expected a matching "}"', open_at)
        self.i += 1
        self.depth -= 1
        self._cut()
        return kids, self.lines.pos(open_at)

    def _entry(self, node: PNode, dropped: bool) -> None:
        start = self.i
        if self._peek() == "(":
            self._annotation()
            self._node_space()
            tok = self._token()
            if tok is None:
                raise self._fail(
                    "expected a value after the type annotation, found " + self._describe(self.i)
                )
            if not dropped:
                node.args.append(self.lines.pos(start))
            self._cut()
            return
        tok = self._token()
        if tok is None:
            raise self._fail(
                'expected an argument, a property, "{" or the end of the node, found '
                + self._describe(self.i)
            )
        after = self.i
        self._node_space()
        if self._peek() != "=":
            self.i = after
            if not dropped:
                node.args.append(self.lines.pos(start))
            self._cut()
            return
        key = tok.text
        self.i += 1
        self._node_space()
        value_at = self.i
        if self._peek() == "(":
            self._annotation()
            self._node_space()
        if self._token() is None:
            raise self._fail(f'expected a value after "{key}=", found ' + self._describe(self.i))
        if not dropped:
            node.props[key] = PProp(self.lines.pos(start), self.lines.pos(value_at))
        self._cut()


def scan(text: str) -> list[PNode]:
    """Positions of every node in a document; raises :class:`ScanError` on a syntax error."""
    return Scanner(text).document()


def locate_syntax_error(text: str, parses: Callable[[str], bool]) -> tuple[Pos, str | None]:
    """Where a document that ``parses`` rejects goes wrong, and what was expected if known.

    The scanner's own diagnosis wins when it has one. Otherwise the document is bisected over the
    boundaries between complete parts (node names, arguments, properties, braces): the error is at
    the first part after the longest prefix that still parses once its open blocks are closed.
    """
    scanner = Scanner(text)
    try:
        scanner.document()
    except ScanError as exc:
        return scanner.lines.pos(exc.offset), exc.message

    def ok(k: int) -> bool:
        if k < 0:
            return True
        offset, depth = scanner.cuts[k]
        return parses(text[:offset] + "\n" + "}\n" * depth)

    lo, hi = -1, len(scanner.cuts)  # ok(lo) holds; the whole text (hi) does not
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if ok(mid):
            lo = mid
        else:
            hi = mid
    probe = Scanner(text)
    probe.i = scanner.cuts[lo][0] if lo >= 0 else 0
    with contextlib.suppress(ScanError):
        probe._line_space()
    return scanner.lines.pos(min(probe.i, len(text))), None
