"""Prometheus metrics: reconciles, errors, duration, queue depth, and bindings by state."""

from __future__ import annotations

from prometheus_client import Counter, Gauge, Histogram

RECONCILES = Counter(
    "bindery_reconciles_total",
    "Reconcile passes, by kind and outcome (changed, unchanged, error).",
    ["kind", "outcome"],
)
RECONCILE_SECONDS = Histogram(
    "bindery_reconcile_duration_seconds",
    "Time spent in one reconcile pass, by kind.",
    ["kind"],
    buckets=(0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10),
)
API_WRITES = Counter(
    "bindery_api_writes_total",
    "Writes the controller sent to the API server, by object kind and verb.",
    ["kind", "verb"],
)
QUEUE_DEPTH = Gauge("bindery_queue_depth", "Objects waiting to be reconciled.")
AGENTS_BY_STATE = Gauge(
    "bindery_agents",
    "AgentSpecs by namespace and state (status.state: Idle, Working, Waiting, Releasing, "
    "Suspended, Pending, Error).",
    ["namespace", "state"],
)
BINDINGS_BY_STATE = Gauge(
    "bindery_bindings",
    "Resolved bindings of all agents, by namespace and state.",
    ["namespace", "state"],
)
IGNORED_HOLDS = Counter(
    "bindery_ignored_holds_total",
    "Leases that posed as work holds (wrong name or namespace, no holder uid, or handed over) "
    "and were ignored.",
)
