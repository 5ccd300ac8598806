"""The root of every exception Bindery raises, and its three branches.

Every exception class defined in ``controller`` derives from :class:`BinderyError`, through the
branch that says what kind of failure it is (tests/unit/test_errors.py walks the package and
holds every class to it). A caller that must not crash on any Bindery failure catches
``BinderyError``; one that reacts to a kind of failure catches its branch or the class itself.
A class keeps the built-in base its callers rely on as a second base (``LeadershipLostError`` is
also a ``RuntimeError``).

The tree (the class of each leaf is in the module named)::

    BinderyError
    ├── InvalidInputError       what a person wrote cannot be used: fix the input
    │   ├── AuthoringError          authoring/errors.py   KDL or YAML manifests, file:line:col
    │   ├── ScanError               authoring/kdlscan.py  a KDL syntax error at an offset
    │   ├── ResolveError            session/resolver.py   a value that cannot fill a slot
    │   ├── SettingsError           runtime/settings.py   an environment variable a knob cannot take
    │   ├── QuantityError           domain/quantity.py    not a quantity, or one too large
    │   └── _InputError, _UnpairedError  cli/authoring.py, authoring/yamlpos.py (private)
    ├── ApiServerError          the API server refused, did not answer, or holds what forbids
    │   │                       the write: classify by status and reason, never by message
    │   ├── ApiError                k8s/api.py            the controller's seam (status, reason,
    │   │                                                 causes)
    │   ├── ApiRequestError         sidecar/apiserver.py  the session sidecar's requests
    │   ├── ForeignObjectError      reconcile/writer.py   an object Bindery does not own
    │   └── StaleWriteError         reconcile/writer.py   decided from a version since changed
    └── RunError                the running process cannot go on as it is: start-up checks,
        │                       leadership
        ├── PreflightError          runtime/preflight.py  a start-up check, with its exit code
        └── LeadershipLostError     runtime/leader.py     this replica no longer leads

A broken invariant of Bindery's own code is a bug: it raises what Python raises (an
``AssertionError``, a ``TypeError``), outside this tree, so that no ``except BinderyError``
swallows it.

The session library (``bindery_session``, a distribution of its own that imports nothing of the
controller) has its own small tree: ``SessionError``, with ``BindingsError`` (not a bindings
document) and ``AcknowledgeError`` (the acknowledgement cannot be written).

Exit codes are not part of this tree: :class:`controller.runtime.exits.Exit` names them, and
``bindery run`` maps each failure to one.
"""

from __future__ import annotations


class BinderyError(Exception):
    """Any failure Bindery raises on purpose; its branch says which kind (see the module)."""


class InvalidInputError(BinderyError):
    """Input a person wrote (a manifest, a spec, a bindings document, a value for a slot)
    cannot be used; the message says where and what to change. Retrying unchanged cannot help."""


class ApiServerError(BinderyError):
    """The Kubernetes API server refused a request, did not answer, or holds an object that
    forbids the write. Callers decide from the status and the API Status ``reason`` and
    ``details.causes[].reason``, never from the message text."""


class RunError(BinderyError):
    """The running process (the controller, a session's sidecar) cannot go on as it is: a
    start-up check failed, leadership was lost."""
