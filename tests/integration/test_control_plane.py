"""The local control plane is a real Kubernetes API: generation, status subresource, watches, GC."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import threading
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client, watch

from controller.k8s import api
from controller.k8s.api import ApiError, KubeApi
from tests.support import REPO_ROOT, Cluster, wait_for

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


def readme_shell_setup() -> str:
    """README's shell-setup block: the commands a user types in a new shell beside `make run`."""
    blocks = (REPO_ROOT / "README.md").read_text().split("```sh\n")[1:]
    (block,) = [b.split("```")[0] for b in blocks if "source .venv/bin/activate" in b]
    return block


def test_readme_shell_setup_works_from_a_fresh_shell_and_down_leaves_no_process(
    tmp_path: Path,
) -> None:
    """The harness's `cluster up`, README's shell setup typed verbatim into a new login shell at
    a checkout's root (no PYTHONPATH, no KUBECONFIG), then `cluster down` as the hint says, with
    nothing left over."""
    checkout = tmp_path / "checkout"
    checkout.mkdir()
    for name in (".venv", "harness", "crds"):  # a checkout's root, with its own state dir
        (checkout / name).symlink_to(REPO_ROOT / name)
    home = tmp_path / "home"
    home.mkdir()
    env = {
        k: v
        for k, v in os.environ.items()
        if k not in ("PYTHONPATH", "KUBECONFIG", "VIRTUAL_ENV", "KUBERNETES_SERVICE_HOST")
    }
    env["HOME"] = str(home)

    def shell(script: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            ["bash", "-lc", script],
            cwd=checkout,
            env=env,
            capture_output=True,
            text=True,
            timeout=180,
            check=False,
        )

    # Started as `make cluster` starts it (the login shell's PATH may lack the Go toolchain that
    # the build script asks for, although every binary is built already).
    up = subprocess.run(
        [f"{checkout}/.venv/bin/python", "-m", "harness", "cluster", "up", "--no-nodes"],
        cwd=checkout,
        env={**env, "HOME": os.environ.get("HOME", str(home))},
        capture_output=True,
        text=True,
        timeout=180,
        check=False,
    )
    assert up.returncode == 0, up.stderr[-3000:]
    assert 'eval "$(python -m harness cluster env)"' in up.stdout
    assert "python -m harness cluster down" in up.stdout
    state_dir = checkout / ".cache" / "cluster"
    state = json.loads((state_dir / "state.json").read_text())
    pids = state["pids"]
    try:
        assert set(pids) == {"etcd", "kube-apiserver", "kube-controller-manager"}
        crds = shell(
            'eval "$(.venv/bin/python -m harness cluster env)" && '
            "kubectl apply --server-side -f crds/ >/dev/null && "
            "kubectl wait --for=condition=Established -f crds/ --timeout=60s"
        )
        assert crds.returncode == 0, crds.stderr
        # The `bindery` category is served once discovery has caught up with the new CRDs.
        setup = wait_for(
            lambda: (p := shell(readme_shell_setup())).returncode == 0 and p,
            timeout=60,
            interval=1,
            what="README's shell setup to list the bindery category",
        )
        assert "No resources found" in setup.stderr, setup.stderr
        namespaces = shell(f"{readme_shell_setup()}\nkubectl get ns -o name")
        assert "namespace/default" in namespaces.stdout.split(), namespaces.stderr
        assert (
            f"{(state_dir / 'kubeconfig').resolve()}"
            in shell('eval "$(.venv/bin/python -m harness cluster env)"; echo "$KUBECONFIG"').stdout
        )
    finally:
        down = shell("source .venv/bin/activate && python -m harness cluster down")
    assert down.returncode == 0, down.stderr
    for pid in pids.values():
        with pytest.raises(ProcessLookupError):
            os.kill(pid, 0)
    assert not Path(state["data_dir"]).exists()
    assert not (state_dir / "state.json").exists()
    gone = shell("source .venv/bin/activate && python -m harness cluster env")
    assert gone.returncode == 1
    assert "no local control plane is recorded in .cache/cluster" in gone.stderr
