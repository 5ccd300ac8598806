"""Sessions as real processes on a real kubelet (containerd + runc): what the process sees.

Every assertion here is about a real container: its ID and restart count as the kubelet reports
them, what its process printed, what ``kubectl exec`` finds inside it. Nothing is faked: the
container states come from the kubelet watching real processes exit, run out of memory, or fail
to start.
"""

from __future__ import annotations

import json
import time
from typing import Any

import pytest

from harness import probe
from tests.integration.kube import agent, apply, get, wait_status, work
from tests.integration.sessions_helpers import apply_types, drifted, pod_name, running_pod
from tests.support import (
    Cluster,
    ControllerProcess,
    Write,
    audit_mark,
    audited_writes,
    controller_writes,
    wait_for,
)

pytestmark = [pytest.mark.node]


def container(pod: dict[str, Any], name: str = "agent") -> dict[str, Any]:
    statuses = (pod.get("status") or {}).get("containerStatuses") or []
    return next((c for c in statuses if c["name"] == name), {})


def session_pod(cluster: Cluster, namespace: str, name: str) -> dict[str, Any]:
    pod = get(cluster, "pod", namespace, pod_name(name))
    assert pod is not None, f"{name} has no session pod"
    return pod


def resource(name: str, uri: str) -> dict[str, str]:
    return {"name": name, "tag": "fs-directory", "uri": uri}


def started(cluster: Cluster, namespace: str, name: str, what: Any, timeout: float = 120) -> Any:
    """Wait for the probe in ``name``'s session to have applied a document ``what`` accepts."""
    pod = pod_name(name)
    return wait_for(
        lambda: next((a for a in probe.applied(cluster.kubectl, namespace, pod) if what(a)), None),
        timeout=timeout,
        interval=0.5,
        what=f"the process in {pod} to apply the expected bindings",
    )


@pytest.mark.compat
def test_a_binding_change_reaches_the_running_process_without_a_restart(
    cluster: Cluster, controller: ControllerProcess, namespace: str
) -> None:
    apply_types(cluster)
    spec = agent("dev", resources=[resource("notes", "file:///notes")], runtime=probe.runtime())
    apply(cluster, namespace, spec)
    running_pod(cluster, namespace, "dev", timeout=120)
    started(cluster, namespace, "dev", lambda a: a.fields["resources"] == ["notes"])
    before = session_pod(cluster, namespace, "dev")

    changed_at = time.time()
    spec["spec"]["resources"].append(resource("extra", "file:///extra"))
    apply(cluster, namespace, spec)
    seen = started(
        cluster, namespace, "dev", lambda a: "extra" in a.fields["resources"], timeout=150
    )
    after = session_pod(cluster, namespace, "dev")

    latency = seen.t - changed_at
    print(f"\nbinding change -> applied in the session process: {latency:.2f} s")
    # The kubelet's own projection waits for its pod sync (60-90 s): the sidecar delivered it.
    assert latency < 30, f"the change took {latency:.1f} s: the kubelet projected it, not Bindery"
    try:
        applied = wait_status(cluster, "agentspec", namespace, "dev", delivered(seen), timeout=30)
    except AssertionError as exc:
        raise AssertionError(f"{exc}\n{diagnosis(cluster, namespace, 'dev')}") from exc
    assert applied["status"]["delivery"]["podUID"] == before["metadata"]["uid"]
    assert after["metadata"]["uid"] == before["metadata"]["uid"], "the pod was replaced"
    assert container(after)["containerID"] == container(before)["containerID"]
    assert container(after)["restartCount"] == container(before)["restartCount"] == 0
    assert latency > 0


def delivered(line: probe.Line) -> Any:
    """Status check: the session's current pod applied the document the probe logged."""

    def check(obj: dict[str, Any]) -> bool:
        st = obj.get("status") or {}
        d = st.get("delivery") or {}
        return bool(
            d.get("digest") == line.fields["digest"] == d.get("appliedDigest")
            and any(
                c["type"] == "Ready" and c["status"] == "True" for c in st.get("conditions") or []
            )
        )

    return check


def diagnosis(cluster: Cluster, namespace: str, name: str) -> str:
    """The agent's status, its acknowledgement Lease and the sidecar's log, for a failure."""
    status = json.dumps((get(cluster, "agentspec", namespace, name) or {}).get("status"), indent=1)
    lease = get(cluster, "lease", namespace, f"bindery-ack-{name}") or {}
    sidecar = cluster.kubectl(
        "logs", "-n", namespace, pod_name(name), "-c", "bindery-delivery", check=False
    )
    return (
        f"status: {status}\nack lease: {json.dumps(lease.get('metadata', {}).get('annotations'))}"
        f"\nsidecar log:\n{sidecar.stdout[-3000:]}{sidecar.stderr[-1000:]}"
    )


def container_ids(cluster: Cluster, namespace: str, name: str) -> str:
    pod = get(cluster, "pod", namespace, pod_name(name))
    return str(container(pod or {}).get("containerID") or "")


def test_a_relaunch_and_its_revert_each_replace_the_process_once(
    cluster: Cluster, controller: ControllerProcess, namespace: str
) -> None:
    apply_types(cluster)
    spec = agent("dev", runtime=probe.runtime(), relaunch=1)
    apply(cluster, namespace, spec)
    first = running_pod(cluster, namespace, "dev", timeout=120)
    seen = {container(first)["containerID"]} - {""}
    wait_for(lambda: container_ids(cluster, namespace, "dev"), what="a container ID")
    seen.add(container_ids(cluster, namespace, "dev"))

    spec["spec"]["runtime"]["env"] = [{"name": "DRIFT", "value": "1"}]  # runtime alone
    apply(cluster, namespace, spec)
    wait_status(cluster, "agentspec", namespace, "dev", drifted, timeout=60)
    time.sleep(3)
    assert container_ids(cluster, namespace, "dev") in seen, "a runtime change alone relaunched"

    for generation in (2, 1):  # a bump, then its GitOps revert
        previous = container_ids(cluster, namespace, "dev")
        spec["spec"]["relaunchGeneration"] = generation
        apply(cluster, namespace, spec)

        def replaced(previous: str = previous) -> str:
            now = container_ids(cluster, namespace, "dev")
            pod = get(cluster, "pod", namespace, pod_name("dev")) or {}
            running = "running" in (container(pod).get("state") or {})
            return now if now and now != previous and running else ""

        seen.add(wait_for(replaced, timeout=120, interval=0.2, what="the relaunched container"))
        time.sleep(5)  # a second replacement would show here
        assert container_ids(cluster, namespace, "dev") in seen

    assert len(seen) == 3, f"containers seen: {sorted(seen)} (expected one per launch)"
    pod = session_pod(cluster, namespace, "dev")
    assert container(pod)["restartCount"] == 0


def test_a_restricted_session_runs_under_runc_with_no_token_and_no_privileges(
    cluster: Cluster, controller: ControllerProcess, namespace: str
) -> None:
    cluster.kubectl(
        "label", "namespace", namespace, "pod-security.kubernetes.io/enforce=restricted"
    )
    apply_types(cluster)
    apply(cluster, namespace, agent("dev", runtime=probe.runtime()))
    pod = running_pod(cluster, namespace, "dev", timeout=120)
    assert container(pod)["containerID"].startswith("containerd://")

    def exec_(*argv: str) -> Any:
        return cluster.kubectl(
            "exec", "-n", namespace, pod["metadata"]["name"], "-c", "agent", "--", *argv,
            check=False,
        )  # fmt: skip

    status = exec_("cat", "/proc/1/status").stdout
    fields = dict(line.split(":\t", 1) for line in status.splitlines() if ":\t" in line)
    assert fields["Uid"].split()[0] != "0", "the session runs as root"
    assert fields["NoNewPrivs"].strip() == "1"
    assert int(fields["CapEff"].strip(), 16) == 0, "the process holds capabilities"
    assert fields["Seccomp"].strip() == "2", "no seccomp filter (RuntimeDefault)"
    listing = exec_("ls", "/var/run/secrets/kubernetes.io/serviceaccount")
    assert listing.returncode != 0, f"a ServiceAccount token is mounted: {listing.stdout}"


def kubelet_reason(cluster: Cluster, namespace: str, name: str) -> tuple[str, str, int]:
    """What the kubelet says of the session container now: its waiting reason, and the reason and
    exit code of its last termination."""
    state = container(get(cluster, "pod", namespace, pod_name(name)) or {})
    waiting = (state.get("state") or {}).get("waiting") or {}
    last = (state.get("lastState") or {}).get("terminated") or {}
    return str(waiting.get("reason", "")), str(last.get("reason", "")), int(last.get("exitCode", 0))


FAILURES = {
    # The kubelet reports a crash loop as waiting CrashLoopBackOff, and at times (seen on a
    # loaded node) only as the container's last exit, terminated Error: status says either.
    "exits": (probe.runtime("import sys; sys.exit(1)"), "CrashLoopBackOff|Error"),
    "oom": (
        probe.runtime(
            "b = [bytearray(1 << 20) for _ in range(512)]",
            resources={"limits": {"memory": "64Mi"}},
        ),
        # Status says OOMKilled when the kubelet does; on cgroup v1 containerd may record a memory
        # kill as Error (exit 137) when its OOM event comes after the exit: then CrashLoopBackOff.
        "OOMKilled|CrashLoopBackOff|Error",
    ),
    "no-image": ({"image": "localhost/bindery-missing:0"}, "ImagePullBackOff|ErrImagePull"),
}


@pytest.mark.parametrize("case", sorted(FAILURES))
def test_a_failing_session_is_reported_with_the_kubelets_own_reason(
    cluster: Cluster, controller: ControllerProcess, namespace: str, case: str
) -> None:
    runtime, reason = FAILURES[case]
    apply_types(cluster)
    apply(cluster, namespace, agent("dev", runtime=runtime))
    accepted = reason.split("|")
    seen: list[str] = []

    def reported(obj: dict[str, Any]) -> bool:
        session = (obj.get("status") or {}).get("session") or {}
        seen[:] = [str(session), str(kubelet_reason(cluster, namespace, "dev"))]
        return session.get("reason") in accepted

    try:
        found = wait_status(cluster, "agentspec", namespace, "dev", reported, timeout=240)
    except AssertionError as e:
        raise AssertionError(f"{case}: status.session {seen[0:1]}, kubelet {seen[1:]}") from e
    ready = next(c for c in found["status"]["conditions"] if c["type"] == "Ready")
    assert ready["status"] == "False", f"{case}: a failing session is reported Ready"
    if case == "oom":
        waiting, last, code = kubelet_reason(cluster, namespace, "dev")
        assert code == 137, f"the session was not killed by its memory limit: {last} ({code})"
        if last == "OOMKilled" and waiting == "CrashLoopBackOff":  # the kubelet's own word
            wait_status(
                cluster,
                "agentspec",
                namespace,
                "dev",
                lambda obj: obj["status"]["session"].get("reason") == "OOMKilled",
                timeout=60,
                what="status.session.reason OOMKilled, as the kubelet reports it",
            )


@pytest.mark.compat
def test_a_work_handoff_between_two_real_sessions(
    cluster: Cluster, controller: ControllerProcess, namespace: str
) -> None:
    """A holds X; B asks for X and waits; X leaves A. Both processes log what they hold."""
    apply_types(cluster)
    uri = "github-issue://acme/app/7"
    a = agent("a", resources=[work(uri)], runtime=probe.runtime())
    b = agent("b", resources=[work(uri)], runtime=probe.runtime())
    apply(cluster, namespace, a)
    started(cluster, namespace, "a", lambda x: x.fields["work"] == uri)
    apply(cluster, namespace, b)
    started(cluster, namespace, "b", lambda x: x.fields["work"] is None)

    moved_at = time.time()
    a["spec"]["resources"] = []
    apply(cluster, namespace, a)
    got = started(cluster, namespace, "b", lambda x: x.fields["work"] == uri, timeout=180)
    started(cluster, namespace, "a", lambda x: x.t > moved_at and x.fields["work"] is None)
    until = time.time()
    a_held = probe.holding(probe.applied(cluster.kubectl, namespace, pod_name("a")), uri, until)
    b_held = probe.holding(probe.applied(cluster.kubectl, namespace, pod_name("b")), uri, until)
    both = probe.overlap(a_held, b_held)
    print(
        f"\nhandoff: spec change -> B's process applied the work {got.t - moved_at:.2f} s; "
        f"both processes held {uri} for {max(both, 0.0):.2f} s"
    )
    assert b_held, "B's process never held the work"
    assert both <= 0.0, f"both processes held {uri} at once for {both:.2f} s"


SILENT = r"""
import time
from bindery_session import announce, load_bindings

announce()  # says it acknowledges ...
load_bindings()
time.sleep(100000)  # ... and never does
"""


def controller_with(
    cluster: Cluster, namespace: str, tmp_path: Any, *args: str, env: dict[str, str] | None = None
) -> ControllerProcess:
    return ControllerProcess(
        cluster, namespace, tmp_path, args=("--standalone", *args), env=env
    ).start()


def state_of(cluster: Cluster, namespace: str, name: str) -> dict[str, Any]:
    obj = get(cluster, "agentspec", namespace, name)
    assert obj is not None
    return obj


def test_a_session_that_never_acknowledges_keeps_the_work_until_it_is_stopped(
    cluster: Cluster, crds: list[str], namespace: str, tmp_path: Any
) -> None:
    """A announced that it acknowledges, then stays silent: its hold is never released by time
    (A is Stalled, B waits); deleting A stops its session, and only then does B get the work."""
    proc = controller_with(cluster, namespace, tmp_path, "--acknowledge-timeout-seconds", "8")
    try:
        apply_types(cluster)
        uri = "github-issue://acme/app/9"
        a = agent("a", resources=[work(uri)], runtime=probe.runtime(SILENT))
        apply(cluster, namespace, a)
        running_pod(cluster, namespace, "a", timeout=120)
        apply(cluster, namespace, agent("b", resources=[work(uri)], runtime=probe.runtime()))
        started(cluster, namespace, "b", lambda x: x.fields["work"] is None)
        a["spec"]["resources"] = []
        apply(cluster, namespace, a)

        def silent(obj: dict[str, Any]) -> bool:
            conditions: list[dict[str, Any]] = obj["status"].get("conditions") or []
            ready = next((c for c in conditions if c["type"] == "Ready"), {})
            return ready.get("reason") == "SessionNotAcknowledging"

        stalled = wait_status(cluster, "agentspec", namespace, "a", silent, timeout=60)
        assert stalled["status"]["state"] == "Releasing"
        assert any(
            c["type"] == "Stalled" and c["status"] == "True"
            for c in stalled["status"]["conditions"]
        )
        time.sleep(5)  # nothing is released by time for it
        b = state_of(cluster, namespace, "b")
        assert b["status"]["work"]["held"] is False
        assert b["status"]["work"]["waitingFor"]["name"] == "a"

        deleted_at = time.time()
        cluster.kubectl("delete", "agentspec", "a", "-n", namespace, "--wait=false")
        got = started(cluster, namespace, "b", lambda x: x.fields["work"] == uri, timeout=120)
        gone = wait_for(
            lambda: get(cluster, "pod", namespace, pod_name("a")) is None,
            timeout=60,
            what="a's pod gone",
        )
        assert gone
        print(
            f"\nagent deleted mid-handoff -> the next holder applied the work: "
            f"{got.t - deleted_at:.2f} s"
        )
    finally:
        cluster.kubectl(
            "delete", "agentspec", "--all", "-n", namespace, "--timeout=60s", check=False
        )
        proc.stop()


def test_a_session_from_before_the_sidecar_is_released_after_the_grace_unverified(
    cluster: Cluster, crds: list[str], namespace: str, tmp_path: Any
) -> None:
    """A pod launched without the delivery sidecar cannot acknowledge: its hold goes only once
    the grace period after the write has passed, with a Warning event."""
    first = controller_with(
        cluster, namespace, tmp_path / "first", env={"BINDERY_SESSION_DELIVERY_IMAGE": ""}
    )
    uri = "github-issue://acme/app/10"
    apply_types(cluster)
    a = agent("a", resources=[work(uri)], runtime=probe.runtime(probe.READER))
    try:
        apply(cluster, namespace, a)
        pod = running_pod(cluster, namespace, "a", timeout=120)
        assert not pod["spec"].get("initContainers"), "launched with a sidecar"
    finally:
        first.stop()
    grace = 8.0
    proc = controller_with(
        cluster, namespace, tmp_path / "second", "--unacknowledged-release-seconds", str(grace)
    )
    try:
        apply(cluster, namespace, agent("b", resources=[work(uri)], runtime=probe.runtime()))
        started(cluster, namespace, "b", lambda x: x.fields["work"] is None)
        moved_at = time.time()
        a["spec"]["resources"] = []
        apply(cluster, namespace, a)
        got = started(cluster, namespace, "b", lambda x: x.fields["work"] == uri, timeout=120)
        waited = got.t - moved_at
        print(f"\na session without the sidecar: released after {waited:.2f} s (grace {grace} s)")
        assert waited >= grace, f"released after {waited:.1f} s, before the {grace} s grace"
        reasons = cluster.kubectl(
            "get", "events", "-n", namespace, "--field-selector", "involvedObject.name=a",
            "-o", "jsonpath={.items[*].reason}",
        ).stdout.split()  # fmt: skip
        assert "ReleasedUnacknowledged" in reasons
    finally:
        cluster.kubectl(
            "delete", "agentspec", "--all", "-n", namespace, "--timeout=60s", check=False
        )
        proc.stop()


def sidecar_writes(cluster: Cluster, namespace: str, since: float) -> list[Write]:
    """What the delivery sidecars wrote in ``namespace`` (user agent ``bindery-deliver``)."""
    return [
        Write(w.verb, w.resource, namespace, w.name, w.subresource)
        for w in audited_writes(cluster, namespace, since)
        if w.user_agent == "bindery-deliver"
    ]


def test_a_binding_change_with_a_session_costs_at_most_four_writes(
    cluster: Cluster, controller: ControllerProcess, namespace: str
) -> None:
    """The ConfigMap, one acknowledgement, and status twice (DeliveryPending, then Ready); the
    per-agent objects made at creation are counted and printed."""
    apply_types(cluster)
    created_from = audit_mark(cluster)
    spec = agent("dev", resources=[resource("notes", "file:///notes")], runtime=probe.runtime())
    apply(cluster, namespace, spec)
    first = started(cluster, namespace, "dev", lambda a: a.fields["resources"] == ["notes"])
    wait_status(cluster, "agentspec", namespace, "dev", delivered(first), timeout=60)
    creates = sorted(
        f"{w.resource}/{w.name}"
        for w in controller_writes(cluster, namespace, created_from)
        if w.verb == "create" and w.resource != "events"
    )
    print(f"\nobjects created for an agent with a session: {len(creates)}: {', '.join(creates)}")
    time.sleep(3)
    mark = audit_mark(cluster)
    spec["spec"]["resources"].append(resource("extra", "file:///extra"))
    apply(cluster, namespace, spec)
    seen = started(cluster, namespace, "dev", lambda a: "extra" in a.fields["resources"])
    wait_status(cluster, "agentspec", namespace, "dev", delivered(seen), timeout=30)
    time.sleep(3)  # anything that follows late counts too
    writes = [w for w in controller_writes(cluster, namespace, mark) if w.resource != "events"]
    writes += sidecar_writes(cluster, namespace, mark)
    shown = ", ".join(
        f"{w.verb} {w.resource}/{w.name}{'/' + w.subresource if w.subresource else ''}"
        for w in writes
    )
    print(f"writes for one binding change: {len(writes)}: {shown}")
    assert len(writes) <= 4, shown
    assert {w.resource for w in writes} >= {"configmaps", "leases", "agentspecs"}
