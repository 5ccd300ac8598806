"""docs/kdl.md lists exactly the AgentSpec fields that KDL cannot carry (what export refuses)."""

from __future__ import annotations

import re
from pathlib import Path

from controller.authoring.manifests import KDL_RUNTIME_FIELDS
from controller.domain.models import Runtime

DOC = Path(__file__).resolve().parents[2] / "docs" / "kdl.md"


def test_the_fields_without_a_kdl_form_are_listed_and_nothing_else() -> None:
    section = DOC.read_text().split("## What has no KDL form", 1)[1].split("\n## ", 1)[0]
    listed = set(re.findall(r"^- `([A-Za-z]+)`", section, re.MULTILINE))
    fields = {f.alias or name for name, f in Runtime.model_fields.items()}
    # securityContext has a KDL form for runAsUser only (run-as-user), so it is listed too.
    assert listed == fields - KDL_RUNTIME_FIELDS
    assert "securityContext" in listed
    for said in KDL_RUNTIME_FIELDS:
        assert f"`{said}`" in section
