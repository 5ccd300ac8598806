"""One exception tree under :class:`BinderyError`, and API errors read from the API Status.

The tree is held for every class defined anywhere in ``controller``: a new exception class that
forgets its branch fails here. API errors are classified by the Status ``reason`` and
``details.causes[].reason``, never by the message (a message says the same in other words
across Kubernetes versions); the bodies below have the shape kube-apiserver sends.
"""

from __future__ import annotations

import importlib
import inspect
import json
import pkgutil
from typing import Any

import pytest

import controller
from controller.domain.errors import (
    ApiServerError,
    BinderyError,
    InvalidInputError,
    RunError,
)
from controller.domain.refs import Request
from controller.k8s import api
from controller.k8s.api import ApiError
from controller.reconcile import Controller
from controller.runtime.leader import LeadershipLostError
from harness.fakes import NS, ScriptedApi

Body = dict[str, Any]
BRANCHES = (InvalidInputError, ApiServerError, RunError)


def controller_exceptions() -> list[type[BaseException]]:
    """Every exception class defined in a module of the ``controller`` package."""
    found: list[type[BaseException]] = []
    for info in pkgutil.walk_packages(controller.__path__, "controller."):
        if info.name == "controller.__main__":
            continue
        module = importlib.import_module(info.name)
        for _, cls in inspect.getmembers(module, inspect.isclass):
            if cls.__module__ == info.name and issubclass(cls, BaseException):
                found.append(cls)
    return found


def test_every_exception_of_controller_is_on_one_branch_of_the_bindery_tree() -> None:
    found = controller_exceptions()
    names = {cls.__name__ for cls in found}
    # The walk reaches every layer (a walk that found nothing would prove nothing).
    assert {"ApiError", "PreflightError", "AuthoringError", "ResolveError"} <= names
    assert {"ForeignObjectError", "StaleWriteError", "LeadershipLostError"} <= names
    outside = [f"{c.__module__}.{c.__qualname__}" for c in found if not issubclass(c, BinderyError)]
    assert outside == [], "derive these from a branch of controller.domain.errors.BinderyError"
    leaves = [c for c in found if c is not BinderyError and c not in BRANCHES]
    on_branches = {c.__name__: [b.__name__ for b in BRANCHES if issubclass(c, b)] for c in leaves}
    assert {n: b for n, b in on_branches.items() if len(b) != 1} == {}


def test_a_class_keeps_the_built_in_base_its_callers_catch() -> None:
    assert issubclass(LeadershipLostError, RuntimeError)
    assert issubclass(LeadershipLostError, RunError)


def status(code: int, reason: str, message: str, details: Body | None = None) -> Body:
    """An API Status as kube-apiserver sends it for a failed request."""
    body: Body = {
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Failure",
        "message": message,
        "reason": reason,
        "code": code,
    }
    if details is not None:
        body["details"] = details
    return body


TERMINATING = status(
    403,
    "Forbidden",
    'configmaps "a-bindings" is forbidden: unable to create new content in namespace team '
    "because it is being terminated",
    {
        "name": "a-bindings",
        "kind": "configmaps",
        "causes": [
            {
                "reason": "NamespaceTerminating",
                "message": "namespace team is being terminated",
                "field": "metadata.namespace",
            }
        ],
    },
)
"""A create in a namespace being deleted (admission's NamespaceLifecycle)."""

RBAC = status(
    403,
    "Forbidden",
    'configmaps is forbidden: User "system:serviceaccount:bindery:bindery" cannot create '
    'resource "configmaps" in API group "" in the namespace "team"',
    {"kind": "configmaps"},
)
INVALID = status(
    422,
    "Invalid",
    'ConfigMap "a-bindings" is invalid: metadata.labels: Invalid value: "-x"',
    {
        "name": "a-bindings",
        "kind": "ConfigMap",
        "causes": [
            {"reason": "FieldValueInvalid", "message": "Invalid value", "field": "metadata.labels"},
            {"reason": "FieldValueRequired", "message": "Required value", "field": "data"},
        ],
    },
)
EXISTS = status(
    409,
    "AlreadyExists",
    'configmaps "a-bindings" already exists',
    {"name": "a-bindings", "kind": "configmaps"},
)


def error(body: Body) -> ApiError:
    return ApiError(int(body.get("code", 500)), "POST", "/api/v1/namespaces/team/configmaps", body)


@pytest.mark.parametrize(
    ("body", "reason", "causes", "terminating"),
    [
        (TERMINATING, "Forbidden", ("NamespaceTerminating",), True),
        (RBAC, "Forbidden", (), False),
        (INVALID, "Invalid", ("FieldValueInvalid", "FieldValueRequired"), False),
        (EXISTS, "AlreadyExists", (), False),
        ({"message": "<html>proxy error</html>"}, "", (), False),
        ({"reason": "Odd", "details": {"causes": "not a list of objects"}}, "Odd", (), False),
    ],
    ids=["terminating", "rbac", "invalid", "exists", "not-a-status", "malformed-details"],
)
def test_an_api_error_reads_reason_and_causes_from_the_status(
    body: Body, reason: str, causes: tuple[str, ...], terminating: bool
) -> None:
    exc = error(body)
    assert (exc.reason, exc.causes, exc.namespace_terminating) == (reason, causes, terminating)
    assert exc.status == body.get("code", 500)
    assert exc.message == body.get("message", json.dumps(body))


REWORDED = {**TERMINATING, "message": "namespace team: deletion in progress"}
"""The same refusal in other words."""
MIMIC = status(403, "Forbidden", "x is forbidden because it is being terminated", {})
"""Another refusal whose words sound like it."""


def test_the_words_of_a_message_classify_nothing() -> None:
    assert error(REWORDED).namespace_terminating
    assert not error(MIMIC).namespace_terminating


def world() -> tuple[Controller, ScriptedApi]:
    fake = ScriptedApi()
    c = Controller(fake)  # type: ignore[arg-type]
    issue = {"metadata": {"name": "issue", "generation": 1}, "spec": {}}
    c.observe(api.RESOURCE_TYPES, fake.seed(api.RESOURCE_TYPES, issue))
    agent = {"metadata": {"name": "a", "namespace": NS, "generation": 1}, "spec": {}}
    c.observe(api.AGENTS, fake.seed(api.AGENTS, agent))
    c.queue.drain()
    return c, fake


@pytest.mark.parametrize(
    ("refusal", "swept"),
    [(TERMINATING, True), (REWORDED, True), (RBAC, False), (MIMIC, False)],
    ids=["terminating", "reworded", "rbac", "mimic"],
)
async def test_a_pass_refused_in_a_terminating_namespace_sweeps_it_soon(
    refusal: Body, swept: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    c, fake = world()
    sweeps: list[str] = []
    monkeypatch.setattr(c.sweeper, "soon", lambda: sweeps.append("soon"))
    fake.refuse = {("create", "configmaps", "a-bindings"): refusal}
    with pytest.raises(ApiError) as raised:
        await c.process(Request.agent(f"{NS}/a"))
    await c.events.stop()
    assert raised.value.status == 403
    assert sweeps == (["soon"] if swept else [])
