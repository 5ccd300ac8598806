"""Bindery: a Kubernetes controller binding AI agents to the typed resources and tools they use."""

from importlib.metadata import PackageNotFoundError, version

try:
    # The one place the version is set is pyproject.toml; the chart's version and appVersion and
    # the image's label repeat it, and tests/unit/test_version.py keeps them equal.
    __version__ = version("bindery")
except PackageNotFoundError:  # a source tree on sys.path without the package installed
    __version__ = "0+unknown"
