"""A work hold waits for the session to apply the document that withdrew the work, against the
real control plane: the session pod runs on the kwok node, its delivery sidecar and runtime are
played by the harness from the real sidecar code (:class:`harness.sessions.Sessions`)."""

from __future__ import annotations

import hashlib
import time

import pytest

from controller.domain.names import ack_lease_name
from controller.domain.work import hold_name
from harness.sessions import Sessions
from tests.integration.kube import agent, apply, get, must_get, ready, wait_status, work
from tests.integration.sessions_helpers import apply_types, runtime
from tests.support import Cluster, ControllerProcess, wait_for

pytestmark = pytest.mark.integration

URI = "github-issue://acme/handoff/7"


def document(cluster: Cluster, namespace: str, name: str) -> str:
    return str(
        must_get(cluster, "configmap", namespace, f"{name}-bindings")["data"]["bindings.json"]
    )


def digest(text: str) -> str:
    return "sha256:" + hashlib.sha256(text.encode("utf-8")).hexdigest()


def applied(cluster: Cluster, namespace: str, name: str) -> str:
    lease = get(cluster, "lease", namespace, ack_lease_name(name)) or {}
    return str(
        ((lease.get("metadata") or {}).get("annotations") or {}).get(
            "bindery.dev/applied-digest", ""
        )
    )


def test_work_given_and_withdrawn_again_waits_for_the_last_document(
    cluster: Cluster, namespace: str, delivering: ControllerProcess, sessions: Sessions
) -> None:
    """The session applied D0 (no work); the work is given (D1) and withdrawn again before the
    session applied anything more, so the bindings of D2 equal D0's. The acknowledgement of D0
    on record must not release the hold: the session may still be taking the work in. The hold
    goes once the session applied D2."""
    apply_types(cluster)
    apply(cluster, namespace, agent("a", resources=[], runtime=runtime()))
    wait_status(cluster, "agentspec", namespace, "a", ready, timeout=60)
    d0 = document(cluster, namespace, "a")
    wait_for(lambda: applied(cluster, namespace, "a") == digest(d0), what="D0 applied")

    sessions.holding.add("a")  # the runtime takes documents in, applies none for now
    apply(cluster, namespace, agent("a", resources=[work(URI)], runtime=runtime()))
    wait_for(lambda: URI in document(cluster, namespace, "a"), what="D1 (with the work) written")
    assert get(cluster, "lease", namespace, hold_name(URI)) is not None
    apply(cluster, namespace, agent("a", resources=[], runtime=runtime()))
    wait_for(lambda: URI not in document(cluster, namespace, "a"), what="D2 (no work) written")
    d2 = document(cluster, namespace, "a")
    assert digest(d2) != digest(d0), "D2 is a write of its own"
    assert applied(cluster, namespace, "a") == digest(d0)
    time.sleep(3.0)  # the old rule released at once: the acknowledgement of D0 "confirmed" D2
    assert get(cluster, "lease", namespace, hold_name(URI)) is not None, (
        "the hold was released on the acknowledgement of an earlier document"
    )
    status = must_get(cluster, "agentspec", namespace, "a")["status"]
    assert status["state"] == "Releasing"

    sessions.holding.discard("a")
    wait_for(
        lambda: get(cluster, "lease", namespace, hold_name(URI)) is None,
        timeout=30,
        what="the hold released once the session applied D2",
    )
    assert applied(cluster, namespace, "a") == digest(d2)
    wait_status(cluster, "agentspec", namespace, "a", ready, timeout=30)
