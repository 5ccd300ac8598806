"""Authoring diagnostics: every problem names its file, line and column, and what was expected."""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from controller.domain.errors import InvalidInputError


@dataclass(frozen=True, order=True)
class Pos:
    """A 1-based line and column (columns count Unicode code points)."""

    line: int
    column: int

    def __str__(self) -> str:
        return f"{self.line}:{self.column}"


START = Pos(1, 1)


@dataclass(frozen=True)
class Diagnostic:
    """One problem in one input file."""

    file: str
    line: int
    column: int
    message: str

    def __str__(self) -> str:
        return f"{self.file}:{self.line}:{self.column}: error: {self.message}"


class AuthoringError(InvalidInputError):
    """Bad authoring input: one or more diagnostics, the first of which is ``file:line:column``.

    ``str()`` is the compiler-style report, one ``FILE:LINE:COL: error: ...`` line per problem.
    """

    def __init__(self, diagnostics: Sequence[Diagnostic]) -> None:
        if not diagnostics:
            raise ValueError("an AuthoringError needs at least one diagnostic")
        self.diagnostics: tuple[Diagnostic, ...] = tuple(diagnostics)
        super().__init__("\n".join(str(d) for d in self.diagnostics))

    @classmethod
    def at(cls, file: str, pos: Pos, message: str) -> AuthoringError:
        return cls([Diagnostic(file, pos.line, pos.column, message)])

    @property
    def file(self) -> str:
        return self.diagnostics[0].file

    @property
    def line(self) -> int:
        return self.diagnostics[0].line

    @property
    def column(self) -> int:
        return self.diagnostics[0].column

    @property
    def message(self) -> str:
        return self.diagnostics[0].message


class Problems:
    """Collects the diagnostics of one pass so a user sees every problem at once."""

    def __init__(self) -> None:
        self._items: list[Diagnostic] = []

    def add(self, file: str, pos: Pos, message: str) -> None:
        self._items.append(Diagnostic(file, pos.line, pos.column, message))

    def extend(self, diagnostics: Iterable[Diagnostic]) -> None:
        self._items.extend(diagnostics)

    def __bool__(self) -> bool:
        return bool(self._items)

    def __len__(self) -> int:
        return len(self._items)

    def raise_if_any(self) -> None:
        """Raise one ``AuthoringError`` with every diagnostic, in file and source order."""
        if self._items:
            unique = list(dict.fromkeys(self._items))
            order = {f: i for i, f in enumerate(dict.fromkeys(d.file for d in unique))}
            unique.sort(key=lambda d: (order[d.file], d.line, d.column))
            raise AuthoringError(unique)


def q(value: object) -> str:
    """A value quoted for a message: strings in double quotes (JSON escapes), others as is."""
    return json.dumps(value, ensure_ascii=False) if isinstance(value, str) else str(value)
