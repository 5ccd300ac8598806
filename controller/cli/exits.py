"""The exit codes of every ``bindery`` command (defined in :mod:`controller.runtime.exits`)."""

from controller.runtime.exits import Exit

__all__ = ["Exit"]
