"""Replay recorded object versions in etcd revision order and check Bindery's invariants.

Pure: takes :class:`Version` records (what the harness's watches saw) and returns a
:class:`Replay` with every violation episode found. No I/O, so the unit tests feed it synthetic
streams.

Invariants checked at every revision (after the version at that revision is applied):

* **exclusivity**: no two agents' delivered bindings documents (ConfigMap ``bindings.json``)
  carry the same URI as their ``work`` binding;
* **delivered-without-hold**: an agent's document carries work URI X only while the hold Lease
  for X exists and names that agent;
* **acknowledged-exclusivity**: no two agents' sessions have acknowledged documents that carry
  the same ``work`` URI. A session's acknowledged document is the one its record on the
  acknowledgement Lease (``bindery-ack-<agent>``) confirms (applied, or only delivered when its
  runtime does not acknowledge), while the pod named by the record's uid is the agent's session
  pod and runs (not Succeeded or Failed: the controller's own reading); its digest is mapped to
  the ConfigMap version whose ``bindings.json`` has that digest.

And over the whole stream:

* **pod replacements**: a new session pod for the same agent (same AgentSpec uid) is intended
  when its launch generation differs from the previous pod's, unintended otherwise.

The final-state checks (stuck claimants, lost updates) look at one snapshot of the namespace:
:func:`final_state`.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from controller.domain import acknowledgement as ack
from controller.domain import names
from controller.domain.delivery import BINDINGS_FILE, delivered_work_uris
from controller.domain.work import hold_name
from controller.k8s.builders import (
    AGENT_LABEL,
    COMPONENT_LABEL,
    HOLDER_UID_ANNOTATION,
    LAUNCH_GENERATION_ANNOTATION,
    URI_ANNOTATION,
    session_pod_of,
)

Body = dict[str, Any]

CONFIG_MAP, LEASE, AGENT, POD, STATEFUL_SET = (
    "ConfigMap",
    "Lease",
    "AgentSpec",
    "Pod",
    "StatefulSet",
)
KINDS = (CONFIG_MAP, LEASE, AGENT, POD, STATEFUL_SET)
DELETED = "DELETED"
REVISION_LABEL = "controller-revision-hash"


@dataclass(frozen=True)
class Version:
    """One version of one object as a watch delivered it (``DELETED``: the object is gone)."""

    kind: str
    event: str
    """ADDED, MODIFIED or DELETED (a deletion inferred from a relist is DELETED too)."""
    rv: int
    """The object's resourceVersion: the etcd revision of this write."""
    body: Body
    received: float = 0.0
    """Seconds since the run started, when the harness received it."""

    @property
    def name(self) -> str:
        return str(self.metadata.get("name", ""))

    @property
    def metadata(self) -> Body:
        md: Body = self.body.get("metadata") or {}
        return md


@dataclass
class Episode:
    """A violation that started at one revision and (maybe) ended at a later one."""

    invariant: str
    key: tuple[str, ...]
    start_rv: int
    start_at: float
    end_rv: int | None = None
    end_at: float | None = None
    detail: str = ""

    def describe(self) -> str:
        end = (
            f"rv {self.end_rv} (+{self.end_at - self.start_at:.2f} s)"
            if self.end_rv is not None and self.end_at is not None
            else "the end of the recording"
        )
        return (
            f"{self.invariant}: {self.detail} from rv {self.start_rv} "
            f"(t={self.start_at:.2f} s) to {end}"
        )


@dataclass
class Replacement:
    agent: str
    agent_uid: str
    old_pod: str
    new_pod: str
    old_generation: str
    new_generation: str
    rv: int
    old_revision: str = ""
    new_revision: str = ""
    old_workload: str = ""
    new_workload: str = ""

    @property
    def intended(self) -> bool:
        return self.old_generation != self.new_generation

    @property
    def in_place(self) -> bool:
        """The same workload recreated its pod from the same template revision at the same launch
        generation: nobody wrote the template, someone deleted the pod (e.g. the fake node)."""
        return (
            not self.intended
            and bool(self.old_revision)
            and (self.old_revision, self.old_workload) == (self.new_revision, self.new_workload)
        )


@dataclass
class Replay:
    versions: int = 0
    by_kind: Counter[str] = field(default_factory=Counter)
    episodes: list[Episode] = field(default_factory=list)
    replacements: list[Replacement] = field(default_factory=list)
    relaunch_raises: int = 0
    """Raises of spec.relaunchGeneration seen on agents that have a runtime."""
    workload_creations: Counter[str] = field(default_factory=Counter)
    """StatefulSet creations per agent uid (more than one: the controller recreated it)."""
    acknowledgements: int = 0
    """Versions of acknowledgement Leases that carry a session pod's record."""
    unknown_digests: set[str] = field(default_factory=set)
    """Digests acknowledged that no recorded ConfigMap version had (a recording gap): such an
    acknowledged document is taken to carry no work URI."""

    def of(self, invariant: str) -> list[Episode]:
        return [e for e in self.episodes if e.invariant == invariant]

    @property
    def unintended(self) -> list[Replacement]:
        """Same launch generation, and a template write or a new workload in between."""
        return [r for r in self.replacements if not r.intended and not r.in_place]

    @property
    def in_place(self) -> list[Replacement]:
        return [r for r in self.replacements if r.in_place]

    @property
    def workload_recreations(self) -> int:
        return sum(n - 1 for n in self.workload_creations.values() if n > 1)


EXCLUSIVITY = "exclusivity"
WITHOUT_HOLD = "delivered-without-hold"
ACKNOWLEDGED_EXCLUSIVITY = "acknowledged-exclusivity"


def _agent_of_config_map(body: Body) -> str | None:
    md = body.get("metadata") or {}
    labels = md.get("labels") or {}
    name = str(md.get("name", ""))
    if labels.get(COMPONENT_LABEL) != "bindings" and not name.endswith("-bindings"):
        return None
    return str(labels.get(AGENT_LABEL) or name.removesuffix("-bindings"))


def _owner_uid(body: Body, kind: str) -> str:
    for ref in (body.get("metadata") or {}).get("ownerReferences") or []:
        if ref.get("kind") == kind:
            return str(ref.get("uid", ""))
    return ""


class _Windows:
    """Open episodes per key: a key active now and not before opens one; inactive closes it."""

    def __init__(self, invariant: str, out: list[Episode]) -> None:
        self.invariant = invariant
        self.out = out
        self.open: dict[tuple[str, ...], Episode] = {}

    def update(self, active: dict[tuple[str, ...], str], rv: int, at: float) -> None:
        for key, detail in active.items():
            if key not in self.open:
                ep = Episode(self.invariant, key, rv, at, detail=detail)
                self.open[key] = ep
                self.out.append(ep)
        for key in [k for k in self.open if k not in active]:
            ep = self.open.pop(key)
            ep.end_rv, ep.end_at = rv, at


def acknowledged_digest(record: ack.Acknowledgement) -> str:
    """The document a session is taken to use, by its record: the one the record confirms
    (:meth:`~controller.domain.acknowledgement.Acknowledgement.confirms`): applied, when its
    runtime acknowledges; else the one delivered to its file."""
    return record.applied_digest if record.acknowledges else record.delivered_digest


@dataclass(frozen=True)
class _Document:
    """A bindings document as first recorded: its work URIs, ConfigMap and revision."""

    uris: frozenset[str]
    config_map: str
    rv: int


@dataclass(frozen=True)
class _SessionPod:
    agent: str
    name: str
    running: bool


class _Replayer:
    """The namespace as of one revision, and what has been found so far."""

    def __init__(self) -> None:
        self.result = Replay()
        self.delivered: dict[str, tuple[str, frozenset[str]]] = {}  # cm name -> (agent, uris)
        self.holds: dict[str, tuple[str, str, str]] = {}  # lease -> (uri, holder, holder uid)
        self.exclusive = _Windows(EXCLUSIVITY, self.result.episodes)
        self.without_hold = _Windows(WITHOUT_HOLD, self.result.episodes)
        self.sts_owner: dict[str, str] = {}  # statefulset uid -> agent uid
        self.sts_seen: set[str] = set()
        self.pods_seen: set[str] = set()
        self.last_pod: dict[
            str, tuple[str, str, str, str]
        ] = {}  # agent uid -> (pod, gen, rev, sts)
        self.relaunch: dict[str, int] = {}  # agent uid -> last seen relaunchGeneration
        self.documents: dict[str, _Document] = {}  # digest -> the document
        self.acked: dict[str, tuple[ack.Acknowledgement, int]] = {}  # agent -> (record, rv)
        self.session_pods: dict[str, _SessionPod] = {}  # pod uid -> its agent and state
        self.pod_uids: dict[str, str] = {}  # session pod name -> uid
        self.acknowledged = _Windows(ACKNOWLEDGED_EXCLUSIVITY, self.result.episodes)

    def apply(self, v: Version) -> None:
        self.result.versions += 1
        self.result.by_kind[v.kind] += 1
        handler = {
            CONFIG_MAP: self._config_map,
            LEASE: self._lease,
            AGENT: self._agent,
            STATEFUL_SET: self._stateful_set,
            POD: self._pod,
        }.get(v.kind)
        if handler is not None and handler(v):
            _check(self.delivered, self.holds, self.exclusive, self.without_hold, v)
        if v.kind in (CONFIG_MAP, LEASE, POD):
            self._check_acknowledged(v)

    def _config_map(self, v: Version) -> bool:
        agent = _agent_of_config_map(v.body)
        if agent is None:
            return False
        if v.event == DELETED:
            self.delivered.pop(v.name, None)
        else:
            doc = (v.body.get("data") or {}).get(BINDINGS_FILE, "")
            uris = frozenset(delivered_work_uris(doc))
            self.delivered[v.name] = (agent, uris)
            if isinstance(doc, str) and doc:
                self.documents.setdefault(ack.digest(doc), _Document(uris, v.name, v.rv))
        return True

    def _lease(self, v: Version) -> bool:
        annotations = v.metadata.get("annotations") or {}
        if v.name.startswith(names.ACK_LEASE_PREFIX):
            self._acknowledgement(v, annotations)
            return False
        if v.event == DELETED:
            return self.holds.pop(v.name, None) is not None
        if URI_ANNOTATION not in annotations:
            return False
        holder = str((v.body.get("spec") or {}).get("holderIdentity", ""))
        self.holds[v.name] = (
            str(annotations[URI_ANNOTATION]),
            holder,
            str(annotations.get(HOLDER_UID_ANNOTATION, "")),
        )
        return True

    def _agent(self, v: Version) -> bool:
        spec = v.body.get("spec") or {}
        uid = str(v.metadata.get("uid", ""))
        gen = int(spec.get("relaunchGeneration") or 0)
        if v.event != DELETED and spec.get("runtime"):
            if uid in self.relaunch and gen > self.relaunch[uid]:
                self.result.relaunch_raises += 1
            self.relaunch[uid] = gen
        return False

    def _stateful_set(self, v: Version) -> bool:
        uid = str(v.metadata.get("uid", ""))
        owner = _owner_uid(v.body, AGENT)
        if owner:
            self.sts_owner[uid] = owner
        if v.event != DELETED and uid not in self.sts_seen:
            self.sts_seen.add(uid)
            self.result.workload_creations[owner or f"orphan:{v.name}"] += 1
        return False

    def _acknowledgement(self, v: Version, annotations: dict[str, str]) -> None:
        agent = v.name.removeprefix(names.ACK_LEASE_PREFIX)
        record = ack.Acknowledgement.from_annotations(annotations)
        if v.event == DELETED or not record.pod_uid:
            self.acked.pop(agent, None)
            return
        self.acked[agent] = (record, v.rv)
        self.result.acknowledgements += 1

    def _session_pod(self, v: Version) -> None:
        """Follow the state of each pod labelled as an agent's session (whoever owns it)."""
        # A deletion inferred from a relist names the pod, not its uid.
        uid = str(v.metadata.get("uid") or self.pod_uids.get(v.name, ""))
        agent = str((v.metadata.get("labels") or {}).get(AGENT_LABEL, ""))
        if v.event == DELETED:
            self.session_pods.pop(uid, None)
            self.pod_uids.pop(v.name, None)
        elif agent and session_pod_of(v.body, agent):
            phase = (v.body.get("status") or {}).get("phase")
            running = phase not in ("Succeeded", "Failed")
            self.session_pods[uid] = _SessionPod(agent, v.name, running)
            self.pod_uids[v.name] = uid

    def _check_acknowledged(self, v: Version) -> None:
        """No two sessions' acknowledged documents carry the same work URI."""
        by_uri: dict[str, list[str]] = {}
        for agent, (record, rv) in sorted(self.acked.items()):
            pod = self.session_pods.get(record.pod_uid)
            digest = acknowledged_digest(record)
            if pod is None or pod.agent != agent or not pod.running or not digest:
                continue
            doc = self.documents.get(digest)
            if doc is None:
                self.result.unknown_digests.add(digest)
                continue
            for uri in doc.uris:
                by_uri.setdefault(uri, []).append(
                    f"{agent} (pod {pod.name} uid {record.pod_uid}, {digest[:15]}... first "
                    f"written to {doc.config_map} at rv {doc.rv}, acknowledged on "
                    f"{names.ack_lease_name(agent)} at rv {rv})"
                )
        shared = {
            (uri, *(w.split(" ", 1)[0] for w in who)): (
                f"{uri} in the documents acknowledged by {' and '.join(who)}"
            )
            for uri, who in by_uri.items()
            if len(who) > 1
        }
        self.acknowledged.update(shared, v.rv, v.received)

    def _pod(self, v: Version) -> bool:
        self._session_pod(v)
        md = v.metadata
        uid = str(md.get("uid", ""))
        if v.event == DELETED or uid in self.pods_seen:
            return False
        self.pods_seen.add(uid)
        workload = _owner_uid(v.body, STATEFUL_SET)
        agent_uid = self.sts_owner.get(workload, "")
        if not agent_uid:
            return False
        generation = str((md.get("annotations") or {}).get(LAUNCH_GENERATION_ANNOTATION, ""))
        revision = str((md.get("labels") or {}).get(REVISION_LABEL, ""))
        pod_id = f"{v.name}/{uid}"
        if agent_uid in self.last_pod:
            old_id, old_gen, old_revision, old_workload = self.last_pod[agent_uid]
            self.result.replacements.append(
                Replacement(
                    agent=str((md.get("labels") or {}).get(AGENT_LABEL, v.name)),
                    agent_uid=agent_uid,
                    old_pod=old_id,
                    new_pod=pod_id,
                    old_generation=old_gen,
                    new_generation=generation,
                    rv=v.rv,
                    old_revision=old_revision,
                    new_revision=revision,
                    old_workload=old_workload,
                    new_workload=workload,
                )
            )
        self.last_pod[agent_uid] = (pod_id, generation, revision, workload)
        return False


def replay(versions: Iterable[Version]) -> Replay:
    """Apply ``versions`` in revision order and collect every violation episode."""
    replayer = _Replayer()
    for v in sorted(versions, key=lambda v: v.rv):
        replayer.apply(v)
    return replayer.result


def _check(
    delivered: dict[str, tuple[str, frozenset[str]]],
    holds: dict[str, tuple[str, str, str]],
    exclusive: _Windows,
    without_hold: _Windows,
    v: Version,
) -> None:
    by_uri: dict[str, list[str]] = {}
    missing: dict[tuple[str, ...], str] = {}
    for agent, uris in delivered.values():
        for uri in uris:
            by_uri.setdefault(uri, []).append(agent)
            hold = holds.get(hold_name(uri))
            holder = hold[1].rsplit("/", 1)[-1] if hold else None
            if holder != agent:
                missing[(agent, uri)] = f"{agent}'s delivered document carries {uri} while " + (
                    f"the hold names {hold[1]}" if hold else "no hold exists"
                )
    shared = {
        (uri, *sorted(agents)): f"{uri} delivered as work to {', '.join(sorted(agents))}"
        for uri, agents in by_uri.items()
        if len(agents) > 1
    }
    exclusive.update(shared, v.rv, v.received)
    without_hold.update(missing, v.rv, v.received)


# ------------------------------------------------------------------------- final state


@dataclass
class FinalState:
    """What one snapshot of the namespace says about convergence."""

    stuck: list[str] = field(default_factory=list)
    """URIs with claimants that can hold them and no holder among them."""
    lost: list[str] = field(default_factory=list)
    """Agents whose status does not describe their current spec."""
    inconsistent: list[str] = field(default_factory=list)
    """Other mismatches: state vs hold, stale holds, delivered documents vs holds."""

    @property
    def converged(self) -> bool:
        return not (self.stuck or self.lost or self.inconsistent)

    def summary(self) -> str:
        parts = self.stuck[:5] + self.lost[:5] + self.inconsistent[:5]
        return "; ".join(parts)


def spec_work_uri(agent: Body) -> str | None:
    for binding in (agent.get("spec") or {}).get("resources") or []:
        if binding.get("name") == "work":
            return str(binding.get("uri"))
    return None


def final_state(agents: list[Body], leases: list[Body], config_maps: list[Body]) -> FinalState:
    """Check one snapshot: every claimed URI has a claimant holder, every status is current."""
    out = FinalState()
    live = {a["metadata"]["name"]: a for a in agents if not a["metadata"].get("deletionTimestamp")}
    holds: dict[str, str] = {}  # uri -> holder name
    for lease in leases:
        annotations = lease["metadata"].get("annotations") or {}
        if URI_ANNOTATION in annotations:
            holder = str((lease.get("spec") or {}).get("holderIdentity", ""))
            holds[str(annotations[URI_ANNOTATION])] = holder.rsplit("/", 1)[-1]
    claimants: dict[str, list[str]] = {}
    for name, agent in sorted(live.items()):
        uri = _check_status(out, name, agent, holds)
        if uri is not None:
            claimants.setdefault(uri, []).append(name)
    for uri, wanting in sorted(claimants.items()):
        if holds.get(uri) not in wanting:
            out.stuck.append(
                f"{uri}: {len(wanting)} claimant(s) ({', '.join(wanting[:5])}) but the hold names "
                f"{holds.get(uri) or 'nobody'}"
            )
    for uri, holder in sorted(holds.items()):
        if uri not in claimants and spec_work_uri(live.get(holder) or {}) != uri:
            out.inconsistent.append(f"stale hold on {uri} names {holder}, who does not want it")
    for cm in config_maps:
        agent_name = _agent_of_config_map(cm)
        for uri in delivered_work_uris((cm.get("data") or {}).get(BINDINGS_FILE, "")):
            if agent_name is not None and holds.get(uri) != agent_name:
                out.inconsistent.append(
                    f"{cm['metadata']['name']} delivers {uri}, held by {holds.get(uri)}"
                )
    return out


def _check_status(out: FinalState, name: str, agent: Body, holds: dict[str, str]) -> str | None:
    """Record what is wrong with one agent's status; return its URI if it is a claimant."""
    uri = spec_work_uri(agent)
    status = agent.get("status") or {}
    work = status.get("work") or {}
    generation = agent["metadata"].get("generation")
    if status.get("observedGeneration") != generation:
        # A pass that failed says why on the object (reason ReconcileFailed) without claiming
        # the generation: not converged, and the reason goes with the finding.
        ready: Body = next(
            (c for c in status.get("conditions") or [] if c.get("type") == "Ready"), {}
        )
        why = (
            f" ({ready.get('reason')}: {str(ready.get('message', ''))[:200]})"
            if ready.get("reason") == "ReconcileFailed"
            else ""
        )
        out.lost.append(
            f"{name}: observedGeneration {status.get('observedGeneration')} "
            f"!= generation {generation}{why}"
        )
        return None
    if (work.get("uri") or None) != uri:
        out.lost.append(f"{name}: status.work.uri {work.get('uri')} != spec work {uri}")
        return None
    state = status.get("state")
    if uri is None:
        # Without work an agent is Idle, or Suspended if its runtime has an idle policy.
        suspends = bool(((agent.get("spec") or {}).get("runtime") or {}).get("idle"))
        if state not in ("Idle", "Error") and not (state == "Suspended" and suspends):
            out.inconsistent.append(f"{name}: no work but state {state}")
        return None
    if state == "Error":
        return None  # cannot hold: not a claimant
    holds_it = holds.get(uri) == name
    if state == "Working" and not holds_it:
        out.inconsistent.append(f"{name}: Working on {uri} but the hold names {holds.get(uri)}")
    if state == "Waiting" and holds_it:
        out.inconsistent.append(f"{name}: Waiting for {uri} but holds it")
    return uri
