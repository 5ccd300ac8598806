"""Bindery: a Kubernetes controller binding AI agents to the typed resources and tools they use."""

import tomllib
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path


def _version() -> str:
    """The one place the version is set is pyproject.toml: read there in a source checkout (an
    editable install included), else from the installed package's metadata. The chart's version
    and appVersion and the image's label repeat it; tests/unit/test_version.py keeps them equal."""
    source = Path(__file__).resolve().parent.parent / "pyproject.toml"
    if source.is_file():
        project = tomllib.loads(source.read_text()).get("project", {})
        if project.get("name") == "bindery":
            return str(project["version"])
    try:
        return version("bindery")
    except PackageNotFoundError:
        return "0+unknown"


__version__ = _version()
