"""The Kubernetes client calls the API seam (controller/k8s/api.py) relies on exist in the
installed client, with the arguments it passes: the dependency-floors test runs this against the
lowest declared ``kubernetes`` version."""

from __future__ import annotations

from kubernetes import client

from controller.k8s.api import KubeApi


def test_the_client_serializes_requests_as_the_seam_calls_it() -> None:
    cfg = client.Configuration()
    cfg.host = "https://127.0.0.1:6443"
    cfg.api_key = {"authorization": "Bearer t0ken"}
    api = KubeApi(client.ApiClient(cfg), threads=1)
    try:
        method, url, headers, body, post_params = api._client.param_serialize(
            "GET",
            "/apis/bindery.dev/v1alpha1/namespaces/a/agentspecs",
            query_params=[("limit", "500"), ("labelSelector", "x=y")],
            header_params={"Accept": "application/json"},
            auth_settings=["BearerToken"],
        )
    finally:
        api.close()
    assert method == "GET"
    assert url == (
        "https://127.0.0.1:6443/apis/bindery.dev/v1alpha1/namespaces/a/agentspecs"
        "?limit=500&labelSelector=x%3Dy"
    )
    assert headers["authorization"] == "Bearer t0ken"
    assert body is None
    assert not post_params
    assert callable(api._client.call_api)
