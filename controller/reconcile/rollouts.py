"""The rollout tracker: every agent's side of the rollouts it takes part in, kept in memory, and
the status passes it asks for when one changes.

After each agent pass the reconciler records the agent's entry (what its resolution read, where
its session stands: :func:`~controller.domain.rollout.agent_rollout`). When an entry changes,
the objects it names, before and after, are due a status pass: each is queued after ``delay``
seconds, at most once (the queue keeps one timer per request), so a burst of acknowledgements
is a handful of status writes, not one each. The change that completes an object's rollout
(nothing left pending at its current generation) queues it at once instead: ``Delivered`` turns
True as soon as the last agent applied, not up to ``delay`` later. Whether it completes is known
without counting: per object, the tracker keeps how many dependents are settled (applied or
refused, by the generation they read; suspended) beside how many there are. An unchanged entry
queues nothing: an idle fleet writes nothing.

Nothing is persisted: every agent is reconciled after a start, which records it again. Until
each agent known at start has been recorded (:meth:`Rollouts.expect`), the tracker is *cold*
and the supporting kinds keep the rollout their status already reports, so a restart writes
only what changed; once it is warm, every supporting object is looked at once.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterable, Iterator

from controller.domain import rollout
from controller.domain.acknowledgement import DeliveryView
from controller.domain.models import AgentObject
from controller.domain.refs import Kind, Ref, Request
from controller.domain.registry import Registry
from controller.domain.results import AgentResolution
from controller.domain.rollout import AgentRollout, AgentState, Rollout
from controller.domain.status import SessionView

SourceKey = tuple[Kind, str]
SUSPENDED = None
"""The settled key of a suspended dependent: settled whatever generation it read."""


def _settled(entry: AgentRollout) -> Iterator[tuple[SourceKey, int | None]]:
    """The objects ``entry`` counts as settled for (none while it is pending), each with the
    generation it read (applied or refused it), or :data:`SUSPENDED`."""
    if entry.state is AgentState.PENDING:
        return
    suspended = entry.state is AgentState.SUSPENDED
    for source in entry.sources:
        yield (source.kind, source.key), SUSPENDED if suspended else source.generation


class Rollouts:
    """Agents' rollout entries, indexed by the objects they name."""

    def __init__(
        self,
        registry: Registry,
        wake: Callable[[Request, float], None],
        *,
        delay: float = 1.0,
        recheck: float = 10.0,
    ) -> None:
        self.registry = registry
        self.wake = wake
        """Queue a request after so many seconds (the queue's ``add_after``)."""
        self.delay = delay
        self.recheck = recheck
        self._stale: dict[SourceKey, tuple[int, frozenset[str]]] = {}
        self.on_warm: Callable[[], None] = lambda: None
        """Called once the tracker turns warm after :meth:`expect`."""
        self._entries: dict[str, AgentRollout] = {}
        self._dependents: dict[SourceKey, set[str]] = {}
        self._settled: dict[SourceKey, Counter[int | None]] = {}
        """Per object, its dependents that are not pending, by the generation they read
        (:data:`SUSPENDED` for the suspended): the rollout of generation g is complete when
        ``settled[g] + settled[SUSPENDED]`` is every dependent."""
        self._expected: set[str] | None = None

    @property
    def warm(self) -> bool:
        """Whether every agent known at start has been recorded since."""
        return self._expected is None

    def expect(self, agents: Iterable[str]) -> None:
        """A start: the rollouts are not known until each of ``agents`` is recorded again."""
        expected = set(agents) - set(self._entries)
        self._expected = expected or None

    def settle(self) -> None:
        """Count what is recorded now, even if an agent known at start never was (its passes
        keep failing): rollouts must not wait on it forever."""
        if self._expected is not None:
            self._expected = None
            self.on_warm()

    def generation(self, kind: Kind, key: str) -> int | None:
        """The registered object's generation (None: not registered)."""
        registry = self.registry
        match kind:
            case Kind.TOOL:
                obj = registry.tool(key)
                return None if obj is None else obj.meta.generation
            case Kind.RESOURCE:
                res = registry.resource(key)
                return None if res is None else res.meta.generation
            case Kind.TYPE:
                rtype = registry.resource_type(key)
                return None if rtype is None else rtype.meta.generation
            case Kind.GRANT:
                grant = registry.grant(key)
                return None if grant is None else grant.meta.generation
        return None

    def observe(
        self,
        agent: AgentObject,
        resolution: AgentResolution,
        delivery: DeliveryView,
        session: SessionView | None,
    ) -> None:
        """An agent pass ended: record what it read and where its session stands."""
        entry = rollout.agent_rollout(
            agent,
            resolution,
            delivery,
            suspended=session is not None and session.suspended,
            generation=self.generation,
        )
        self._put(agent.meta.key, entry)

    def forget(self, agent: str) -> None:
        """The agent no longer depends on anything (deleted, being deleted, or invalid)."""
        self._put(agent, None)

    def count(self, kind: Kind, key: str, generation: int) -> Rollout | None:
        """The object's rollout at ``generation``; None while the tracker is cold."""
        if not self.warm:
            return None
        entries = self._entries
        dependents = self._dependents.get((kind, key), ())
        return rollout.count(kind, key, generation, ((a, entries[a]) for a in dependents))

    def stale(self, kind: Kind, key: str, counted: Rollout) -> None:
        """``counted`` found dependents that read an older generation. Their passes are due
        anyway when the change re-resolves them; the object is looked at again in
        ``recheck`` seconds, and those still stale then are resolved again (a new generation
        whose spec reads the same to the registry re-resolves no one)."""
        source = (kind, key)
        if not counted.stale:
            self._stale.pop(source, None)
            return
        now = frozenset(counted.stale)
        before = self._stale.get(source)
        if before is not None and before[0] == counted.generation:
            for agent in sorted(now & before[1]):
                self.wake(Request(Kind.AGENT, Ref.parse(agent)), 0.0)
        self._stale[source] = (counted.generation, now)
        self.wake(Request(kind, Ref.parse(key)), self.recheck)

    def _put(self, agent: str, entry: AgentRollout | None) -> None:
        old = self._entries.get(agent)
        if old != entry:
            before = old.sources if old is not None else frozenset()
            after = entry.sources if entry is not None else frozenset()
            for source in before - after:
                self._unfile(source, agent)
            dependents = self._dependents
            for source in after - before:  # a set made only when the object has none yet
                filed = (source.kind, source.key)
                agents = dependents.get(filed)
                if agents is None:
                    agents = dependents[filed] = set()
                agents.add(agent)
            if old is not None:
                self._tally(old, -1)
            if entry is None:
                del self._entries[agent]
            else:
                self._entries[agent] = entry
                self._tally(entry, 1)
            if self.warm:
                for kind, key in {(s.kind, s.key) for s in before | after}:
                    delay = 0.0 if self._complete(kind, key) else self.delay
                    self.wake(Request(kind, Ref.parse(key)), delay)
        expected = self._expected
        if expected is not None:
            expected.discard(agent)
            if not expected:
                self._expected = None
                self.on_warm()

    def _tally(self, entry: AgentRollout, step: int) -> None:
        """Count ``entry`` in (``step`` 1) or out (-1) of its objects' settled dependents."""
        settled = self._settled
        for key, generation in _settled(entry):
            counts = settled.get(key)
            if counts is None:  # not setdefault: a Counter made per source cost most of a tally
                counts = settled[key] = Counter()
            counts[generation] += step
            if counts[generation] <= 0:
                del counts[generation]
                if not counts:
                    del settled[key]

    def _complete(self, kind: Kind, key: str) -> bool:
        """Whether nothing of the object's rollout at its current generation is pending (what
        :meth:`count` would say, without counting)."""
        generation = self.generation(kind, key)
        if generation is None:
            return False
        counts = self._settled.get((kind, key), Counter())
        dependents = len(self._dependents.get((kind, key), ()))
        return counts[generation] + counts[SUSPENDED] == dependents

    def _unfile(self, source: rollout.Source, agent: str) -> None:
        key = (source.kind, source.key)
        agents = self._dependents.get(key)
        if agents is not None:
            agents.discard(agent)
            if not agents:
                del self._dependents[key]
