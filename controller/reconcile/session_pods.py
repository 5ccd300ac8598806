"""Reads an agent's session pods from the view, found by what they are (their namespace and
session labels, see :mod:`controller.domain.session_pods`), with what they acknowledged."""

from __future__ import annotations

from collections.abc import Collection
from typing import Any

from controller.domain import acknowledgement as ack
from controller.domain import names
from controller.domain import session_pods as sp
from controller.domain.delivery import BINDINGS_FILE
from controller.k8s import api, builders
from controller.reconcile.compact import data_of
from controller.reconcile.index import SessionPodIndex
from controller.reconcile.store import Store


class SessionPods:
    """An agent's session pods and acknowledgement record, as last observed."""

    def __init__(self, store: Store, index: SessionPodIndex) -> None:
        self.store = store
        self.index = index

    def of(self, namespace: str, agent_name: str, agent_uid: str) -> list[ack.SessionPod]:
        """The pods labelled as the session of the agent ``agent_name`` (uid ``agent_uid``) in
        ``namespace``, whoever owns them, the StatefulSet's own name first."""
        found = []
        for key in self.index.of(namespace, agent_name):
            pod = self.store.get(api.PODS, key)
            if pod is None or not builders.session_pod_of(pod, agent_name, agent_uid):
                continue
            phase = (pod.get("status") or {}).get("phase")
            found.append(
                ack.SessionPod(
                    uid=str((pod.get("metadata") or {}).get("uid", "")),
                    running=phase not in ("Succeeded", "Failed"),
                    acknowledging=builders.has_delivery_sidecar(pod),
                )
            )
        return found

    def record(self, namespace: str, agent_name: str) -> ack.Acknowledgement | None:
        """What the agent's acknowledgement Lease records (None: no Lease)."""
        lease = self.store.get(api.LEASES, names.key(namespace, names.ack_lease_name(agent_name)))
        if lease is None:
            return None
        annotations = (lease.get("metadata") or {}).get("annotations") or {}
        return ack.Acknowledgement.from_annotations(annotations)

    def document(self, namespace: str, agent_name: str) -> str:
        """The bindings document the agent's ConfigMap carries now ("" without one)."""
        config_map = self.store.get(
            api.CONFIG_MAPS, names.key(namespace, names.bindings_config_map_name(agent_name))
        )
        return str(data_of(config_map or {}).get(BINDINGS_FILE, ""))

    def let_go(
        self, namespace: str, agent_name: str, agent_uid: str, uris: Collection[str]
    ) -> bool:
        """Whether the session of an agent being deleted, or gone, has let go of ``uris`` (see
        :func:`controller.domain.session_pods.let_go`)."""
        pods = self.of(namespace, agent_name, agent_uid)
        if not any(p.running for p in pods):
            return True
        return sp.let_go(
            pods, self.record(namespace, agent_name), self.document(namespace, agent_name), uris
        )

    def workload_of(self, namespace: str, agent_name: str, agent_uid: str) -> dict[str, Any] | None:
        """The session StatefulSet of the agent of uid ``agent_uid`` as last observed, if it is
        that agent's (its controlling owner) or nobody's (orphaned): never a successor's."""
        workload = self.store.get(
            api.STATEFUL_SETS, names.key(namespace, names.session_name(agent_name))
        )
        if workload is None:
            return None
        labels = (workload.get("metadata") or {}).get("labels") or {}
        owner = builders.owner_of(workload)
        mine = owner is None or (owner[0] == "AgentSpec" and owner[2] == agent_uid)
        bindery = labels.get(builders.MANAGED_BY) == builders.MANAGER
        return (
            workload
            if mine and bindery and labels.get(builders.AGENT_LABEL) == agent_name
            else None
        )
