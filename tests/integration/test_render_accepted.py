"""What ``bindery render`` and ``import-tool`` produce is accepted by the real API server, and what
the server returns exports back to the same agent."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml
from pydantic import BaseModel

from controller.authoring.convert import export, render
from controller.authoring.manifests import dump_yaml
from controller.domain.models import AgentSpecSpec, ResourceSpec, ResourceTypeSpec, ToolSpec
from tests.support import Cluster
from tests.unit.test_authoring import SEED_AGENT  # the source document, verbatim

pytestmark = pytest.mark.integration

REPO = Path(__file__).resolve().parents[2]


# Every part of the extension, so the CRD schema is exercised field by field.
EXTENDED = """\
agent "everything" {
  label "app.kubernetes.io/part-of" "bindery-tests"
  annotation "example.com/note" "multi\\nline"
  resource "work" _tag="github-pull-request" uri="github-pull-request://example/project/45"
  resource "repo" _tag="git-checkout" uri="git-checkout://example/project/main"
  tool "apply-config" {
    param "output" "review-notes"
  }
  tool "comment-on-issue"
  selector {
    match-label "bindery.dev/team" "platform"
    match-expression "tier" "In" "gold" "silver"
    match-expression "archived" "DoesNotExist"
  }
  runtime image="busybox:1.36" model="example-model" {
    command "sh" "-c"
    args "while true; do sleep 3600; done"
    env "A" "1"
    env "EMPTY" ""
    instructions "Line one.\\nLine two."
  }
  relaunch-generation 2
}
"""


def _apply(cluster: Cluster, namespace: str, text: str) -> None:
    cluster.kubectl(
        "apply", "--server-side", "--force-conflicts", "-n", namespace, "-f", "-", input=text
    )


def _get(cluster: Cluster, namespace: str, kind: str, name: str) -> dict[str, Any]:
    out = cluster.kubectl("get", kind, name, "-n", namespace, "-o", "json").stdout
    result: dict[str, Any] = json.loads(out)
    return result


def _without_defaults(spec: dict[str, Any]) -> dict[str, Any]:
    """The spec as render writes it: the server fills in defaults render leaves out."""
    rendered = render([("server", export([("server", json.dumps(_manifest(spec)))]))])
    result: dict[str, Any] = rendered[0]["spec"]
    return result


def _manifest(spec: dict[str, Any]) -> dict[str, Any]:
    return {
        "apiVersion": "bindery.dev/v1alpha1",
        "kind": "AgentSpec",
        "metadata": {"name": "x"},
        "spec": spec,
    }


@pytest.mark.parametrize("source", [SEED_AGENT, EXTENDED], ids=["seed", "extension"])
def test_rendered_agent_is_accepted_and_exports_back(
    cluster: Cluster, crds: list[str], namespace: str, source: str
) -> None:
    manifests = render([("agent.kdl", source)])
    _apply(cluster, namespace, dump_yaml(manifests))
    for manifest in manifests:
        name = manifest["metadata"]["name"]
        stored = _get(cluster, namespace, "agentspecs.bindery.dev", name)
        assert _without_defaults(stored["spec"]) == manifest["spec"]
        assert stored["metadata"].get("labels") == manifest["metadata"].get("labels")

    # What the server returns (uid, managedFields, defaults, status...) exports to KDL that
    # renders the same agent.
    listing = cluster.kubectl("get", "agentspecs.bindery.dev", "-n", namespace, "-o", "yaml")
    again = render([("exported.kdl", export([("server", listing.stdout)]))])
    assert [m["spec"] for m in again] == [m["spec"] for m in manifests]
    assert {m["metadata"]["namespace"] for m in again} == {namespace}


def test_examples_apply_in_order(cluster: Cluster, crds: list[str], namespace: str) -> None:
    files = sorted((REPO / "examples/manifests").glob("*.yaml"))
    assert [f.name for f in files] == [
        "00-resourcetypes.yaml",
        "10-resources.yaml",
        "20-tools.yaml",
        "30-agents.yaml",
    ]
    for path in files:
        _apply(cluster, namespace, path.read_text())
    models: dict[str, tuple[str, type[BaseModel]]] = {
        "ResourceType": ("resourcetypes.bindery.dev", ResourceTypeSpec),
        "Resource": ("resources.bindery.dev", ResourceSpec),
        "Tool": ("tools.bindery.dev", ToolSpec),
        "AgentSpec": ("agentspecs.bindery.dev", AgentSpecSpec),
    }
    for path in files:
        for doc in yaml.safe_load_all(path.read_text()):
            if not doc:
                continue
            kind, model = models[doc["kind"]]
            stored = _get(cluster, namespace, kind, doc["metadata"]["name"])
            # Equal as specs: the server fills in the defaults the files leave out.
            assert model.model_validate(stored["spec"]) == model.model_validate(doc["spec"])
