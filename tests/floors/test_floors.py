"""The declared dependency floors hold: the unit suite passes with the lowest versions
pyproject.toml allows for each runtime dependency.

A throwaway venv gets exactly those versions (wheels only where they exist), plus the test tools
at the versions of the running environment, and runs ``tests/unit`` from this checkout. The venv
is cached under ``~/.cache/bindery/floors-<key>``, keyed by the pins and the Python version, so
only a changed floor pays for the install.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import tomllib
from importlib import metadata
from pathlib import Path

import pytest
from packaging.version import Version

pytestmark = pytest.mark.floors

REPO = Path(__file__).resolve().parents[2]
CACHE = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "bindery"
TEST_TOOLS = ("pytest", "pytest-asyncio", "hypothesis", "psutil")
LOCAL = {"bindery-session": REPO / "session" / "src"}
"""Dependencies built from this repository (not on an index): imported from their source."""
FLOOR = re.compile(r"^\s*([A-Za-z0-9][A-Za-z0-9._-]*)\s*(?:\[[^\]]*\])?\s*(.*)$")


def floors(dependencies: list[str]) -> list[str]:
    """``name==lowest`` for each requirement; every runtime dependency must declare a floor."""
    pins = []
    for requirement in dependencies:
        match = FLOOR.match(requirement)
        assert match, f"cannot read the requirement {requirement!r}"
        name, spec = match.groups()
        lowest = re.search(r">=\s*([0-9][0-9A-Za-z.]*)", spec)
        assert lowest, f"{name}: declare a floor (>=X) so that it can be tested"
        pins.append(f"{name}=={lowest.group(1)}")
    return pins


def test_floors_are_read_from_the_requirements() -> None:
    assert floors(["kopf>=1.37", "pydantic>=2.7,<3", "x[extra] >= 2"]) == [
        "kopf==1.37",
        "pydantic==2.7",
        "x==2",
    ]


def _normal(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def _pip(venv: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(venv / "bin" / "python"), "-m", "pip", "--disable-pip-version-check", *args],
        capture_output=True,
        text=True,
        check=False,
        timeout=900,
    )


def _test_extras() -> tuple[str, ...]:
    """The names in the project's ``test`` extra (the tools the unit suite imports)."""
    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    names = []
    for requirement in project["optional-dependencies"]["test"]:
        match = FLOOR.match(requirement)
        assert match, f"cannot read the requirement {requirement!r}"
        names.append(match.group(1))
    return tuple(dict.fromkeys([*TEST_TOOLS, *names]))


def floor_venv(pins: list[str]) -> Path:
    tools = [f"{name}=={metadata.version(name)}" for name in _test_extras()]
    key = hashlib.sha256(json.dumps([sys.version_info[:2], pins, tools]).encode()).hexdigest()[:12]
    venv = CACHE / f"floors-{key}"
    if (venv / ".complete").exists():
        return venv
    shutil.rmtree(venv, ignore_errors=True)
    venv.parent.mkdir(parents=True, exist_ok=True)
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, timeout=300)
    # Wheels only, where the floor has them; a source build only for a floor without one.
    proc = _pip(venv, "install", "--quiet", "--only-binary=:all:", *pins, *tools)
    if proc.returncode != 0:
        proc = _pip(venv, "install", "--quiet", "--prefer-binary", *pins, *tools)
    if proc.returncode != 0:
        shutil.rmtree(venv, ignore_errors=True)
        pytest.fail(
            f"the floors do not install together ({' '.join(pins)}); each floor must name a "
            f"release that exists (the lowest one supported), and they must be compatible:\n"
            f"{proc.stderr[-4000:]}"
        )
    (venv / ".complete").write_text(" ".join(pins + tools) + "\n")
    return venv


def test_the_unit_suite_passes_on_the_dependency_floors() -> None:
    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    pins = [p for p in floors(project["dependencies"]) if p.split("==")[0] not in LOCAL]
    venv = floor_venv(pins)
    installed = {
        _normal(name): version
        for name, _, version in (
            line.partition("==") for line in _pip(venv, "freeze").stdout.splitlines()
        )
    }
    for pin in pins:
        name, version = pin.split("==")
        got = installed.get(_normal(name))
        assert got is not None, f"{name} is not installed in {venv}"
        assert Version(got) == Version(version), f"{name}: {got} installed, floor {version}"
    proc = subprocess.run(
        [
            str(venv / "bin" / "python"), "-m", "pytest", "tests/unit", "-q", "-x",
            "-p", "no:cacheprovider", "-m", "not floors",
        ],
        cwd=REPO,
        env={**os.environ, "PYTHONPATH": os.pathsep.join(map(str, [REPO, *LOCAL.values()]))},
        capture_output=True,
        text=True,
        check=False,
        timeout=1200,
    )  # fmt: skip
    assert proc.returncode == 0, (
        f"the unit suite fails on the declared floors ({' '.join(pins)}); raise the floor that "
        f"breaks it in pyproject.toml:\n{proc.stdout[-6000:]}\n{proc.stderr[-2000:]}"
    )
