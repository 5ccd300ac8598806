"""The kopf glue: what it registers, and how its handlers reach the intake."""

from __future__ import annotations

import asyncio
import inspect
import threading
from typing import Any

import kopf
import pytest

from controller.k8s import api
from controller.reconcile.intake import OWNED
from controller.runtime import handlers, operator
from controller.runtime.operator import build_registry
from controller.runtime.settings import Settings


def _registry() -> kopf.OperatorRegistry:
    return build_registry(Settings(), asyncio.Event())


def test_every_bindery_kind_has_one_event_handler_and_no_owned_kind_has_any() -> None:
    watching = _registry()._watching.get_all_handlers()
    plurals = sorted(str(h.selector.plural) for h in watching if h.selector)
    expected = sorted(ref.plural for ref in handlers.WATCHED)
    assert plurals == sorted([*expected, "namespaces"])  # their labels, for grants
    # The controller's own informers list and watch what it creates (kopf would list it too).
    assert not {ref.plural for ref in OWNED} & set(plurals)


def test_handlers_are_coroutines_so_the_intake_runs_on_the_event_loop() -> None:
    # kopf runs a plain function in its thread pool, racing the workers on the loop's thread.
    for handler in _registry()._watching.get_all_handlers():
        assert inspect.iscoroutinefunction(handler.fn), handler.id


def test_no_handler_needs_a_diff_base() -> None:
    """NoDiffBase is only sound while no change-detecting handler is registered."""
    registry = _registry()
    assert not registry._changing.get_all_handlers()
    assert not registry._spawning.get_all_handlers()
    assert not registry._indexing.get_all_handlers()


def test_no_diff_base_copies_nothing() -> None:
    storage = handlers.NoDiffBase()
    body = kopf.Body({"metadata": {"name": "a"}, "spec": {"tools": [{"name": "t"}]}})
    assert storage.build(body=body) == {}
    assert storage.fetch(body=body) is None


def test_configure_watching_lists_in_pages_and_drops_the_diff_base() -> None:
    settings = kopf.OperatorSettings()
    handlers.configure_watching(settings)
    assert isinstance(settings.persistence.diffbase_storage, handlers.NoDiffBase)
    assert settings.watching.chunk_size == api.LIST_PAGE
    assert settings.watching.server_timeout is not None
    assert settings.watching.client_timeout is not None
    assert not settings.scanning.disabled  # all namespaces: kopf follows them as they come


def test_named_namespaces_stay_watched_while_they_terminate() -> None:
    settings = kopf.OperatorSettings()
    handlers.configure_watching(settings, namespaced=True)
    assert settings.scanning.disabled


class _Intake:
    def __init__(self) -> None:
        self.seen: list[tuple[str, str, bool, int]] = []

    def observe(self, kind: api.Endpoint, body: dict[str, Any], deleted: bool = False) -> None:
        self.seen.append((kind.plural, body["metadata"]["name"], deleted, threading.get_ident()))

    def listed(self, kind: api.Endpoint, body: dict[str, Any]) -> None:
        self.seen.append((kind.plural, "(listed)", False, threading.get_ident()))

    def watched(self, kind: api.Endpoint) -> None:
        self.seen.append((kind.plural, "(watched)", False, threading.get_ident()))


@pytest.mark.parametrize("event_type", ["ADDED", "MODIFIED", None, "DELETED"])
async def test_a_handler_hands_the_event_to_the_intake_on_the_loop_thread(
    event_type: str | None,
) -> None:
    intake = _Intake()
    memo = kopf.Memo(controller=intake)
    # The handlers take kopf's keyword arguments; only ``event`` and ``memo`` are read.
    by_id: dict[str, Any] = {h.id: h.fn for h in _registry()._watching.get_all_handlers()}
    event = {"type": event_type, "object": {"metadata": {"name": "x"}}}
    await by_id["observe-agentspecs"](event=event, memo=memo)
    await by_id["observe-resources"](event=event, memo=memo)
    loop_thread = threading.get_ident()
    deleted = event_type == "DELETED"
    then = "(listed)" if event_type is None else "(watched)"
    assert intake.seen == [
        ("agentspecs", "x", deleted, loop_thread),
        ("agentspecs", then, False, loop_thread),
        ("resources", "x", deleted, loop_thread),
        ("resources", then, False, loop_thread),
    ]


async def test_the_start_up_listing_is_tried_again_while_the_api_server_is_away() -> None:
    """The listing runs beside kopf's (the start-up handler no longer waits for it), so it
    retries by itself instead of through kopf's start-up retries."""
    answers: list[Any] = [
        api.ApiError(0, "GET", "/apis", {"reason": "Unreachable"}),
        api.ApiError(503, "GET", "/apis", {"reason": "ServiceUnavailable"}),
        {api.AGENTS: {"team/a": "7"}},
    ]

    class Listing:
        calls = 0

        async def listing(self) -> Any:
            self.calls += 1
            answer = answers.pop(0)
            if isinstance(answer, Exception):
                raise answer
            return answer

    controller = Listing()
    found = await asyncio.wait_for(
        operator._list_until_answered(controller, retry=0.01),  # type: ignore[arg-type]
        1.0,
    )
    assert found == {api.AGENTS: {"team/a": "7"}}
    assert controller.calls == 3
