"""The tested Kubernetes range: what ``bindery run`` says about a cluster outside it, and the
chart's ``kubeVersion`` and the harness's builds agreeing with it."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
import yaml

from controller.domain.versions import (
    CHART_KUBE_VERSION,
    NEWEST,
    OLDEST,
    ServerVersion,
    support_note,
)

REPO = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize(
    ("body", "pair"),
    [
        ({"major": "1", "minor": "37", "gitVersion": "v1.37.2"}, (1, 37)),
        ({"major": "1", "minor": "33+", "gitVersion": "v1.33.5-eks-1"}, (1, 33)),
        ({"major": "1", "minor": "", "gitVersion": "v1.36.0"}, None),
        ({}, None),
    ],
)
def test_the_minor_is_read_from_its_leading_digits(
    body: dict[str, object], pair: tuple[int, int] | None
) -> None:
    assert ServerVersion.of(body).minor_pair == pair


@pytest.mark.parametrize("minor", range(OLDEST[1], NEWEST[1] + 1))
def test_a_tested_minor_says_nothing(minor: int) -> None:
    assert support_note(ServerVersion(f"v1.{minor}.0", 1, minor)) is None


def test_an_older_minor_names_the_sidecar_and_what_to_do() -> None:
    note = support_note(ServerVersion("v1.32.4", 1, 32))
    assert note is not None
    assert "v1.32.4 is older than 1.33" in note
    assert "native sidecar" in note
    assert "upgrade the cluster" in note


def test_a_newer_minor_is_expected_to_work_but_untested() -> None:
    note = support_note(ServerVersion("v1.38.0", 1, 38))
    assert note is not None
    assert "newer than 1.37" in note
    assert "nothing has shown it" in note


def test_an_unreadable_version_says_so() -> None:
    note = support_note(ServerVersion.of({"gitVersion": "v-custom"}))
    assert note is not None
    assert "'v-custom'" in note
    assert "kubectl version" in note


def test_the_chart_states_the_tested_range() -> None:
    chart = yaml.safe_load((REPO / "helm/bindery/Chart.yaml").read_text())
    assert chart["kubeVersion"] == CHART_KUBE_VERSION


def test_the_harness_builds_the_ends_of_the_range() -> None:
    out = subprocess.run(
        ["bash", str(REPO / "harness/tools/build.sh"), "--versions"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.split()
    minors = [tuple(int(x) for x in v.lstrip("v").split(".")[:2]) for v in out]
    assert minors[0] == NEWEST
    assert minors[-1] == OLDEST
