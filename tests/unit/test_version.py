"""One version number: pyproject.toml sets it; ``bindery --version``, the image's label, the
chart's ``version`` and ``appVersion`` and the changelog's newest entry repeat it."""

from __future__ import annotations

import re
import subprocess
import sys
import tomllib
from pathlib import Path

import yaml

from controller import __version__

REPO = Path(__file__).resolve().parents[2]


def _pyproject_version() -> str:
    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    return str(project["version"])


def test_the_package_reports_the_pyproject_version() -> None:
    assert __version__ == _pyproject_version()


def test_bindery_version_prints_it() -> None:
    out = subprocess.run(
        [sys.executable, "-m", "controller.cli.main", "--version"],
        capture_output=True, text=True, check=True, cwd=REPO,
    ).stdout  # fmt: skip
    assert out.strip() == f"bindery {_pyproject_version()}"


def test_the_image_label_is_the_version() -> None:
    labels = re.findall(
        r'org\.opencontainers\.image\.version="([^"]*)"', (REPO / "Dockerfile").read_text()
    )
    assert labels == [_pyproject_version()]


def test_the_chart_version_and_app_version_are_the_version() -> None:
    chart = yaml.safe_load((REPO / "helm" / "bindery" / "Chart.yaml").read_text())
    assert str(chart["version"]) == _pyproject_version()
    assert str(chart["appVersion"]) == _pyproject_version()


def test_the_changelog_starts_with_the_version() -> None:
    headings = re.findall(r"^## (\S+)", (REPO / "CHANGELOG.md").read_text(), flags=re.M)
    assert headings, "CHANGELOG.md has no '## <version>' entries"
    assert headings[0] == _pyproject_version(), "the newest CHANGELOG.md entry is not this version"


# ------------------------------------------------------------------ supported Kubernetes versions


def _tested_minors() -> list[int]:
    """The minors the harness builds: tools/k8s (the newest) and each tools/k8s-<minor>."""
    tools = REPO / "harness" / "tools"
    minors = []
    for mod in [tools / "k8s" / "go.mod", *sorted(tools.glob("k8s-*/go.mod"))]:
        found = re.search(r"^require k8s\.io/kubernetes v1\.(\d+)\.\d+$", mod.read_text(), re.M)
        assert found, f"{mod} requires no k8s.io/kubernetes release"
        minors.append(int(found.group(1)))
    return minors


def test_the_chart_kube_version_is_the_tested_range() -> None:
    oldest, newest = min(_tested_minors()), max(_tested_minors())
    chart = yaml.safe_load((REPO / "helm" / "bindery" / "Chart.yaml").read_text())
    assert chart["kubeVersion"] == f">=1.{oldest}.0-0 <1.{newest + 1}.0-0"


def test_the_docs_state_the_tested_range() -> None:
    oldest, newest = min(_tested_minors()), max(_tested_minors())
    for doc in ("docs/install.md", "helm/bindery/README.md", "README.md"):
        assert f"Kubernetes 1.{oldest} to 1.{newest}" in (REPO / doc).read_text(), doc


def test_the_chart_names_every_crd_it_ships() -> None:
    chart = yaml.safe_load((REPO / "helm" / "bindery" / "Chart.yaml").read_text())
    named = set(chart["annotations"]["bindery.dev/crds"].split(","))
    shipped = {
        yaml.safe_load(p.read_text())["metadata"]["name"] for p in (REPO / "crds").glob("*.yaml")
    }
    assert named == shipped
