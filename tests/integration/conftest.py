"""Fixtures of the integration tests whose session pods run on the kwok node: the controller
gives them the delivery sidecar, and the harness plays that sidecar and the runtime
(:class:`harness.sessions.Sessions`, built from the real sidecar code)."""

from __future__ import annotations

import random
from collections.abc import Iterator
from pathlib import Path

import pytest

from harness.kube import Kube
from harness.sessions import Sessions
from tests.support import Cluster, ControllerProcess, controller_for

DELIVERING = ("--standalone", "--session-delivery-image", "localhost/bindery:dev")
"""Session pods get the delivery sidecar (kwok runs no container: the harness plays it)."""


@pytest.fixture
def delivering(
    cluster: Cluster, crds: list[str], namespace: str, tmp_path: Path
) -> Iterator[ControllerProcess]:
    """The controller, its session pods with the delivery sidecar."""
    with controller_for(cluster, namespace, tmp_path, args=DELIVERING) as proc:
        yield proc


@pytest.fixture
def sessions(cluster: Cluster, namespace: str) -> Iterator[Sessions]:
    """Every session pod's sidecar and runtime: they apply each document within a tenth of a
    second unless told otherwise."""
    kube = Kube(cluster.kubeconfig, user_agent="bindery-test-sessions/1")
    rng = random.Random(38)  # noqa: S311 - a seeded, reproducible simulation
    played = Sessions(kube, namespace, rng, acknowledging_share=1.0, delay=lambda r: 0.05)
    played.start()
    try:
        yield played
    finally:
        played.stop()
        kube.close()
