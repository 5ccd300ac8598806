"""The bindings ConfigMap: the agent's resolved bindings as one JSON file, and where the session
reads it."""

from __future__ import annotations

from typing import Any

from bindery_session.wire import BINDINGS_ENV, BINDINGS_FILE, BINDINGS_MOUNT

from controller.domain import rules
from controller.domain.models import AgentObject
from controller.domain.names import bindings_config_map_name
from controller.k8s.builders.common import agent_labels, owner_reference

__all__ = [
    "BINDINGS_ENV",
    "BINDINGS_MOUNT",
    "BINDINGS_VOLUME",
    "bindings_config_map",
    "bindings_config_map_name",
]

BINDINGS_VOLUME = rules.BINDINGS_VOLUME


def bindings_config_map(agent: AgentObject, rendered: str) -> dict[str, Any]:
    """The ConfigMap that carries the agent's resolved bindings as one JSON file."""
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {
            "name": bindings_config_map_name(agent.meta.name),
            "namespace": agent.meta.namespace,
            "labels": agent_labels(agent, "bindings"),
            "ownerReferences": [owner_reference(agent)],
        },
        "data": {BINDINGS_FILE: rendered},
    }
