"""Every row of the status semantics table: the conditions the builders write, and the Argo CD
health the shipped script (run in a real Lua 5.1) computes from them."""

from __future__ import annotations

from typing import Any

import pytest
import yaml

from tests.argocd_health import ARGO_CD_VALUES, HEALTH_SCRIPT, KINDS, LuaSyntaxError, argo_health
from tests.health_rows import Row, rows

ROWS = rows()


def _condition(status: dict[str, Any] | None, type_: str) -> dict[str, Any] | None:
    found = [c for c in (status or {}).get("conditions") or [] if c["type"] == type_]
    assert len(found) <= 1, f"{type_} appears {len(found)} times"
    return found[0] if found else None


def test_every_kind_has_every_outcome() -> None:
    for kind in KINDS:
        seen = {row.argo for row in ROWS if row.kind == kind}
        assert seen == {"Healthy", "Progressing", "Degraded"}, kind


def _says(row: Row) -> tuple[str, str]:
    """The reason and message Reconciling or Stalled repeat: Ready's, or (a pending rollout of
    a healthy object) the rollout's, as Delivered says it."""
    ready = _condition(row.status, "Ready")
    assert ready is not None
    delivered = _condition(row.status, "Delivered")
    if ready["status"] == "True" and delivered is not None and delivered["status"] == "False":
        return "RolloutPending", delivered["message"]
    return ready["reason"], ready["message"]


@pytest.mark.parametrize("row", ROWS, ids=lambda r: r.id)
def test_conditions(row: Row) -> None:
    ready = _condition(row.status, "Ready")
    if row.ready is None:
        assert ready is None
        return
    assert ready is not None
    assert (ready["status"], ready["reason"]) == (row.ready, row.reason)
    reconciling = _condition(row.status, "Reconciling")
    stalled = _condition(row.status, "Stalled")
    assert (reconciling is not None and reconciling["status"] == "True") is row.reconciling
    assert (stalled is not None and stalled["status"] == "True") is row.stalled
    for flag in (reconciling, stalled):
        if flag is not None and flag["status"] == "True":  # says what Ready says ...
            assert (flag["reason"], flag["message"]) == _says(row)


@pytest.mark.parametrize("row", ROWS, ids=lambda r: r.id)
def test_argo_cd_health(row: Row) -> None:
    health = argo_health(row.object())
    assert health["status"] == row.argo
    if row.argo == "Degraded" or (row.argo == "Progressing" and row.reconciling):
        reason, message = _says(row)
        assert health["message"] == f"{reason}: {message}"


def test_argo_cd_health_of_an_object_without_conditions_or_metadata() -> None:
    assert argo_health({"status": {"observedGeneration": 1}})["status"] == "Progressing"
    obj = {"metadata": {"generation": 1}, "status": {"observedGeneration": 1}}
    assert argo_health(obj) == {"status": "Progressing", "message": "no Ready condition yet"}


def test_argo_cd_health_reads_the_first_condition_of_a_type() -> None:
    obj = {
        "metadata": {"generation": 2},
        "status": {
            "observedGeneration": 2,
            "conditions": [
                {"type": "Ready", "status": "True", "reason": "Valid", "message": ""},
                {"type": "Ready", "status": "False", "reason": "Late", "message": "m"},
            ],
        },
    }
    assert argo_health(obj) == {"status": "Healthy", "message": "Valid"}


def test_the_script_is_lua_5_1() -> None:
    """Lua 5.2+ syntax (goto, integer division, bit operators) does not compile in 5.1."""
    with pytest.raises(LuaSyntaxError):
        argo_health({}, script="local a = 7 // 2\nreturn {status = 'Healthy', message = ''}")
    assert argo_health({}, script=HEALTH_SCRIPT.read_text())["status"] == "Progressing"


def test_the_argo_cd_values_snippet_carries_the_script_for_every_kind() -> None:
    values = yaml.safe_load(ARGO_CD_VALUES.read_text())
    cm = values["configs"]["cm"]
    script = HEALTH_SCRIPT.read_text()
    assert set(cm) == {f"resource.customizations.health.bindery.dev_{kind}" for kind in KINDS}
    for key, text in cm.items():
        assert text == script, f"{ARGO_CD_VALUES}: {key} is stale; run `make argocd-values`"
