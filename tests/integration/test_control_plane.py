"""The local control plane is a real Kubernetes API: generation, status subresource, watches, GC."""

from __future__ import annotations

import asyncio
import json
import os
import socket
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client, watch

from controller.k8s import api
from controller.k8s.api import ApiError, KubeApi
from tests.support import Cluster, wait_for

pytestmark = pytest.mark.integration

GROUP, VERSION, PLURAL = "probe.bindery.dev", "v1", "widgets"

WIDGET_CRD: dict[str, Any] = {
    "apiVersion": "apiextensions.k8s.io/v1",
    "kind": "CustomResourceDefinition",
    "metadata": {"name": f"{PLURAL}.{GROUP}"},
    "spec": {
        "group": GROUP,
        "scope": "Namespaced",
        "names": {"plural": PLURAL, "singular": "widget", "kind": "Widget"},
        "versions": [
            {
                "name": VERSION,
                "served": True,
                "storage": True,
                "subresources": {"status": {}},
                "schema": {
                    "openAPIV3Schema": {
                        "type": "object",
                        "properties": {
                            "spec": {"type": "object", "properties": {"size": {"type": "integer"}}},
                            "status": {
                                "type": "object",
                                "properties": {"seen": {"type": "integer"}},
                            },
                        },
                    }
                },
            }
        ],
    },
}


def _obj(value: object) -> dict[str, Any]:
    """The custom-objects API returns untyped JSON objects."""
    assert isinstance(value, dict)
    return value


@pytest.fixture(scope="module")
def widgets(cluster: Cluster) -> client.CustomObjectsApi:
    cluster.kubectl("apply", "-f", "-", input=json.dumps(WIDGET_CRD))
    cluster.kubectl("wait", "--for=condition=Established", f"crd/{PLURAL}.{GROUP}")
    return client.CustomObjectsApi(cluster.api_client())


def test_generation_status_subresource_and_watch(
    widgets: client.CustomObjectsApi, namespace: str
) -> None:
    seen: list[tuple[str, int]] = []
    started = threading.Event()

    def watch_widgets() -> None:
        w = watch.Watch()
        started.set()
        for event in w.stream(
            widgets.list_namespaced_custom_object,
            GROUP,
            VERSION,
            namespace,
            PLURAL,
            timeout_seconds=20,
        ):
            obj = event["object"]
            seen.append((event["type"], obj["metadata"]["generation"]))
            if len(seen) >= 4:
                w.stop()

    watcher = threading.Thread(target=watch_widgets, daemon=True)
    watcher.start()
    started.wait()

    body = {
        "apiVersion": f"{GROUP}/{VERSION}",
        "kind": "Widget",
        "metadata": {"name": "w1"},
        "spec": {"size": 1},
    }
    created = _obj(widgets.create_namespaced_custom_object(GROUP, VERSION, namespace, PLURAL, body))
    assert created["metadata"]["generation"] == 1

    # The status subresource ignores spec and leaves generation alone.
    patched = _obj(
        widgets.patch_namespaced_custom_object_status(
            GROUP, VERSION, namespace, PLURAL, "w1", {"status": {"seen": 1}, "spec": {"size": 99}}
        )
    )
    assert patched["status"] == {"seen": 1}
    assert patched["spec"] == {"size": 1}
    assert patched["metadata"]["generation"] == 1

    # A label-only change does not bump generation; a spec change does.
    labelled = _obj(
        widgets.patch_namespaced_custom_object(
            GROUP, VERSION, namespace, PLURAL, "w1", {"metadata": {"labels": {"a": "b"}}}
        )
    )
    assert labelled["metadata"]["generation"] == 1
    resized = _obj(
        widgets.patch_namespaced_custom_object(
            GROUP, VERSION, namespace, PLURAL, "w1", {"spec": {"size": 2}}
        )
    )
    assert resized["metadata"]["generation"] == 2

    watcher.join(timeout=20)
    assert seen == [("ADDED", 1), ("MODIFIED", 1), ("MODIFIED", 1), ("MODIFIED", 2)]


def test_garbage_collector_deletes_owned_objects(cluster: Cluster, namespace: str) -> None:
    core = client.CoreV1Api(cluster.api_client())
    owner = core.create_namespaced_config_map(
        namespace, client.V1ConfigMap(metadata=client.V1ObjectMeta(name="owner"))
    )
    assert owner.metadata is not None
    ref = client.V1OwnerReference(
        api_version="v1", kind="ConfigMap", name="owner", uid=owner.metadata.uid
    )
    core.create_namespaced_config_map(
        namespace,
        client.V1ConfigMap(metadata=client.V1ObjectMeta(name="owned", owner_references=[ref])),
    )
    core.delete_namespaced_config_map("owner", namespace)

    def owned_gone() -> bool:
        items = core.list_namespaced_config_map(namespace).items
        names = [c.metadata.name for c in items if c.metadata]
        return "owned" not in names

    wait_for(owned_gone, timeout=60, what="kube-controller-manager to collect the owned ConfigMap")


async def test_a_create_in_a_terminating_namespace_is_refused_with_its_cause(
    cluster: Cluster, namespace: str
) -> None:
    """The API Status the agent pass classifies by (``ApiError.namespace_terminating``): a create
    in a namespace being deleted is a 403 ``Forbidden`` whose cause is ``NamespaceTerminating``."""
    core = client.CoreV1Api(cluster.api_client())
    held = client.V1ConfigMap(
        metadata=client.V1ObjectMeta(name="held", finalizers=["bindery.dev/test-hold"])
    )
    core.create_namespaced_config_map(namespace, held)
    core.delete_namespace(namespace)  # Terminating for as long as "held" keeps its finalizer
    kube = KubeApi(cluster.api_client(), connections=1)
    refused: ApiError | None = None
    try:
        for attempt in range(50):
            try:
                body = {"metadata": {"name": f"new-{attempt}", "namespace": namespace}}
                await kube.create(api.CONFIG_MAPS, body)
            except ApiError as exc:
                refused = exc
                break
            await asyncio.sleep(0.1)
    finally:
        await kube.close()
        core.patch_namespaced_config_map("held", namespace, {"metadata": {"finalizers": None}})
    assert refused is not None, "creates in the terminating namespace were all accepted"
    assert (refused.status, refused.reason) == (403, "Forbidden")
    assert refused.causes == ("NamespaceTerminating",)
    assert refused.namespace_terminating


def test_cli_cluster_up_env_down_leaves_no_process(tmp_path: Path) -> None:
    """`bindery cluster up`, kubectl against its kubeconfig, then `down` with nothing left over."""
    state_dir = tmp_path / "state"
    cli = [sys.executable, "-m", "controller", "cluster"]
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2])}
    up = subprocess.run(
        [*cli, "up", "--no-nodes", "--state-dir", str(state_dir)],
        capture_output=True,
        text=True,
        env=env,
        check=False,
    )
    assert up.returncode == 0, up.stderr
    state = json.loads((state_dir / "state.json").read_text())
    try:
        pids = state["pids"]
        assert set(pids) == {"etcd", "kube-apiserver", "kube-controller-manager"}
        exports = subprocess.run(
            [*cli, "env", "--state-dir", str(state_dir)],
            capture_output=True,
            text=True,
            env=env,
            check=True,
        ).stdout
        assert f"export KUBECONFIG={(state_dir / 'kubeconfig').resolve()}" in exports
        got = subprocess.run(
            [
                f"{state['bin_dir']}/kubectl",
                f"--kubeconfig={state_dir / 'kubeconfig'}",
                "get",
                "ns",
                "-o",
                "name",
            ],
            capture_output=True,
            text=True,
            check=True,
        ).stdout
        assert "namespace/default" in got.split()
    finally:
        down = subprocess.run(
            [*cli, "down", "--state-dir", str(state_dir)],
            capture_output=True,
            text=True,
            env=env,
            check=False,
        )
    assert down.returncode == 0, down.stderr
    for pid in pids.values():
        with pytest.raises(ProcessLookupError):
            os.kill(pid, 0)
    assert not Path(state["data_dir"]).exists()
    assert not (state_dir / "state.json").exists()


def test_cli_cluster_up_reports_a_port_in_use(tmp_path: Path) -> None:
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2])}
        proc = subprocess.run(
            [
                sys.executable,
                "-m",
                "controller",
                "cluster",
                "up",
                "--no-nodes",
                "--port",
                str(port),
                "--state-dir",
                str(tmp_path),
            ],
            capture_output=True,
            text=True,
            env=env,
            check=False,
        )
    assert proc.returncode == 1
    assert f"port 127.0.0.1:{port} is already in use" in proc.stderr
    assert not (tmp_path / "state.json").exists()
