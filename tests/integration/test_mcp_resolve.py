"""The MCP adapter's ``bindery_resolve`` on the real API server, as a session's ServiceAccount.

The adapter offers the tool only where the session's credentials may read what resolving reads,
which it asks the API server with SelfSubjectAccessReviews when it starts. Here a ServiceAccount
without any binding is refused both reads (no tool), and the same ServiceAccount bound to the
chart's session-resolver ClusterRole by the example RoleBinding (as docs/session.md tells a
namespace to do) may resolve: the tool, called by the SDK's client, resolves a deferred slot of
the document the real controller delivered.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path

import mcp_types as types
import pytest
from mcp import Client

from controller.mcp import BindingsAdapter
from controller.mcp.access import may_resolve, session_resolver
from tests.integration.kube import EXAMPLES, agent, apply
from tests.integration.test_session_library import (
    INSPECT,
    SESSION_SA,
    TARGET,
    delivered_text,
    resource,
    session_rbac,
    token_client,
    token_for,
    token_kubeconfig,
)
from tests.support import Cluster, ControllerProcess, wait_for

pytestmark = pytest.mark.integration


@pytest.fixture
def bindings_file(
    cluster: Cluster, namespace: str, controller: ControllerProcess, tmp_path: Path
) -> Path:
    cluster.kubectl("apply", "--server-side", "-f", str(EXAMPLES / "00-resourcetypes.yaml"))
    apply(
        cluster,
        namespace,
        resource("repo", "worktree", TARGET, alias="main"),
        INSPECT,
        agent("dev", resources=[{"name": "src", "tag": "fs-directory", "uri": "file:///s"}],
              tools=[{"name": "inspect"}]),
    )  # fmt: skip
    wait_for(
        lambda: '"Deferred"' in delivered_text(cluster, namespace, "dev"),
        what="the controller to deliver dev's bindings with a deferred slot",
    )
    path = tmp_path / "bindings.json"
    path.write_text(delivered_text(cluster, namespace, "dev"))
    cluster.kubectl("create", "serviceaccount", SESSION_SA, "-n", namespace)
    return path


@pytest.fixture
def rbac(cluster: Cluster, namespace: str) -> Iterator[None]:
    release = f"mr-{uuid.uuid4().hex[:8]}"
    session_rbac(cluster, namespace, release)
    yield
    cluster.kubectl(
        "delete", "clusterrole,clusterrolebinding", "-l",
        f"app.kubernetes.io/instance={release},app.kubernetes.io/component=session-resolver",
        "--ignore-not-found", check=False,
    )  # fmt: skip


def test_without_the_binding_the_tool_is_not_offered(
    cluster: Cluster, namespace: str, bindings_file: Path, tmp_path: Path
) -> None:
    token = token_for(cluster, namespace, SESSION_SA)
    api = token_client(cluster, token)
    try:
        assert may_resolve(api, namespace) == [
            f"list resources.bindery.dev in namespace {namespace}",
            "get resourcetypes.bindery.dev",
        ]
    finally:
        api.close()
    kubeconfig = token_kubeconfig(cluster, namespace, token, tmp_path / "kubeconfig")
    assert session_resolver(namespace, str(kubeconfig)) is None


async def test_with_the_binding_the_tool_resolves_a_deferred_slot(
    cluster: Cluster, namespace: str, bindings_file: Path, rbac: None, tmp_path: Path
) -> None:
    token = token_for(cluster, namespace, SESSION_SA)
    api = token_client(cluster, token)
    try:
        assert may_resolve(api, namespace) == []
    finally:
        api.close()
    kubeconfig = token_kubeconfig(cluster, namespace, token, tmp_path / "kubeconfig")
    resolver = session_resolver(namespace, str(kubeconfig))
    assert resolver is not None
    adapter = BindingsAdapter(bindings_file, ack_file=tmp_path / "ack.json", resolver=resolver)
    async with Client(adapter.server) as client:
        tools = [t.name for t in (await client.list_tools()).tools]
        assert "bindery_resolve" in tools
        bound = await client.call_tool(
            "bindery_resolve", {"tool": "inspect", "slot": "target", "value": "repo"}
        )
        refused = await client.call_tool(
            "bindery_resolve", {"tool": "inspect", "slot": "target", "value": "nothing-here"}
        )
    assert not bound.is_error, bound.content
    assert isinstance(bound.structured_content, dict)
    assert bound.structured_content["uri"] == TARGET
    assert bound.structured_content["alias"] == "main"
    assert refused.is_error
    block = refused.content[0]
    assert isinstance(block, types.TextContent)
    assert "nothing-here" in block.text
