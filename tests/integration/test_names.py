"""Names that cannot make an agent's objects are refused at admission (real API server)."""

from __future__ import annotations

import pytest
import yaml

from tests.integration.kube import agent
from tests.support import Cluster

pytestmark = pytest.mark.integration

RUNTIME = {"image": "registry.example/agent:1"}


def create(cluster: Cluster, namespace: str, name: str, *, runtime: bool) -> tuple[int, str]:
    body = agent(name, runtime=RUNTIME if runtime else None)
    out = cluster.kubectl(
        "create", "-n", namespace, "-f", "-", input=yaml.safe_dump(body), check=False
    )
    return out.returncode, out.stderr


def test_a_name_too_long_for_a_session_is_refused_with_the_reason(
    cluster: Cluster, crds: list[str], namespace: str
) -> None:
    code, err = create(cluster, namespace, "a" * 45, runtime=True)
    assert code != 0
    assert "metadata.name: at most 44 characters for an AgentSpec with spec.runtime" in err
    assert create(cluster, namespace, "b" * 44, runtime=True)[0] == 0
    # Without a session the bindings ConfigMap's label is the only limit.
    assert create(cluster, namespace, "c" * 63, runtime=False)[0] == 0
    code, err = create(cluster, namespace, "d" * 64, runtime=False)
    assert code != 0
    assert "metadata.name" in err


def test_adding_a_runtime_to_a_long_named_agent_is_refused(
    cluster: Cluster, crds: list[str], namespace: str
) -> None:
    name = "e" * 50
    assert create(cluster, namespace, name, runtime=False)[0] == 0
    body = agent(name, runtime=RUNTIME)
    out = cluster.kubectl(
        "apply", "--server-side", "-n", namespace, "-f", "-", input=yaml.safe_dump(body),
        check=False,
    )  # fmt: skip
    assert out.returncode != 0
    assert "at most 44 characters" in out.stderr
