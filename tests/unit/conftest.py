"""Fixtures shared by the unit tests."""

from __future__ import annotations

import pytest

from tests.unit.virtual_clock import VirtualClock


@pytest.fixture
def clock() -> VirtualClock:
    """Time that moves only when the test moves it (see ``virtual_clock``)."""
    return VirtualClock()
