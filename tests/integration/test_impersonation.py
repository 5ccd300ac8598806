"""`bindery run` acts as the kubeconfig's user says, impersonation included (``as``,
``as-groups``): the API server itself reports who each of its two clients is."""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Any

import kopf
import pytest
import yaml
from kubernetes import config

from controller.k8s.api import KubeApi
from controller.runtime import operator
from controller.runtime.preflight import load_client
from tests.support import Cluster

pytestmark = pytest.mark.integration

REVIEW = {"apiVersion": "authentication.k8s.io/v1", "kind": "SelfSubjectReview"}
REVIEWS = "/apis/authentication.k8s.io/v1/selfsubjectreviews"


def impersonating(cluster: Cluster, tmp_path: Path) -> Path:
    """The cluster's kubeconfig, its user impersonating alice of two teams."""
    doc: dict[str, Any] = yaml.safe_load(cluster.kubeconfig.read_text())
    for entry in doc["users"]:
        entry["user"].update({"as": "alice", "as-groups": ["team-a", "team-b"]})
    path = tmp_path / "kubeconfig"
    path.write_text(yaml.safe_dump(doc))
    return path


def who(review: dict[str, Any]) -> tuple[str, set[str]]:
    info = review["status"]["userInfo"]
    return info["username"], set(info.get("groups") or ())


async def test_the_controllers_requests_impersonate_as_the_kubeconfig_says(
    cluster: Cluster, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)
    monkeypatch.setenv("KUBECONFIG", str(impersonating(cluster, tmp_path)))
    kube = KubeApi(load_client(), connections=1)
    try:
        review = await kube.request("POST", REVIEWS, REVIEW)
    finally:
        await kube.close()
    assert who(review) == ("alice", {"team-a", "team-b", "system:authenticated"})


async def test_kopfs_login_impersonates_as_the_kubeconfig_says(
    cluster: Cluster, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = impersonating(cluster, tmp_path)
    monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)
    monkeypatch.setenv("KUBECONFIG", str(path))
    # kopf's login reads the client's default path, fixed when the client was imported.
    monkeypatch.setattr(config.kube_config, "KUBE_CONFIG_DEFAULT_LOCATION", str(path))
    info = await operator.login(logger=logging.getLogger("test"), settings=kopf.OperatorSettings())
    assert isinstance(info, kopf.AiohttpSession)
    session = info.aiohttp_session
    try:
        async with session.post(f"{info.server}{REVIEWS}", json=REVIEW) as response:
            review = await response.json()
    finally:
        await session.close()
    assert who(review) == ("alice", {"team-a", "team-b", "system:authenticated"})


async def test_kopfs_login_without_impersonation_is_the_kubeconfig_user_and_our_parser(
    cluster: Cluster, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Without impersonation kopf's session is still the controller's own making: the same
    user kopf would log in as, its answers decoded by the controller's parser."""
    monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)
    monkeypatch.setenv("KUBECONFIG", str(cluster.kubeconfig))
    monkeypatch.setattr(config.kube_config, "KUBE_CONFIG_DEFAULT_LOCATION", str(cluster.kubeconfig))
    info = await operator.login(logger=logging.getLogger("test"), settings=kopf.OperatorSettings())
    assert isinstance(info, kopf.AiohttpSession)
    session = info.aiohttp_session
    try:
        async with session.post(f"{info.server}{REVIEWS}", json=REVIEW) as response:
            assert isinstance(response, operator.JsonResponse)
            review = await response.json()
            assert review == json.loads(await response.read())
    finally:
        await session.close()
    kube = KubeApi(load_client(), connections=1)
    try:
        own = await kube.request("POST", REVIEWS, REVIEW)
    finally:
        await kube.close()
    assert who(review) == who(own)
    assert who(review)[0] != "alice"
