"""What every ``bindery`` command module shares: the subparsers it registers on, and the one way
a command reports a failure (one ``error:`` line on stderr, and an :class:`Exit` code)."""

from __future__ import annotations

import argparse
import sys
from typing import TypeAlias

from controller.runtime.exits import Exit

Subparsers: TypeAlias = "argparse._SubParsersAction[argparse.ArgumentParser]"
"""``bindery``'s subcommands: each command module's ``register`` adds its own."""


def fail(message: object, code: Exit = Exit.FAILURE) -> Exit:
    """Say what went wrong on stderr, as one ``error:`` line; the command returns ``code``."""
    print(f"error: {message}", file=sys.stderr)
    return code
