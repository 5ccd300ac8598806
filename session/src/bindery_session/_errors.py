"""The library's exceptions: one root, a branch per thing that can go wrong::

SessionError
├── BindingsError       the bindings document cannot be read or is not one
└── AcknowledgeError    the acknowledgement cannot be written, or there is nothing to
                        acknowledge
"""

from __future__ import annotations


class SessionError(Exception):
    """Any failure this library raises on purpose; the message says what to do."""


class BindingsError(SessionError):
    """The bindings document cannot be read or is not a bindings document."""


class AcknowledgeError(SessionError):
    """The acknowledgement cannot be written, or there is nothing to acknowledge."""
