"""The chaos harness in the cluster work scope: agents spread over three namespaces, and the
controller told where the holds live and what to watch."""

from __future__ import annotations

import random
from typing import Any

from chaos.churn import Churn
from chaos.run import Options


def test_cluster_scope_runs_the_controller_with_its_holds_in_the_run_namespace() -> None:
    opts = Options(work_scope="cluster")
    teams = opts.teams("chaos-1")
    assert teams == ("chaos-1-b", "chaos-1-c")
    args = opts.controller_args("chaos-1", teams)
    assert "--work-scope=cluster" in args
    assert "--work-hold-namespace=chaos-1" in args
    assert [args[i + 1] for i, a in enumerate(args) if a == "--namespace"] == list(teams)
    plain = Options()
    assert plain.teams("chaos-1") == ()
    assert not any(a.startswith("--work-scope") for a in plain.controller_args("chaos-1"))


def test_churn_spreads_each_agent_name_over_the_namespaces_always_the_same_way() -> None:
    sent: list[tuple[str, str]] = []

    class Kube:
        def request(self, method: str, path: str, body: Any = None, **_: Any) -> None:
            sent.append((method, path))

    namespaces = ["chaos-1", "chaos-1-b", "chaos-1-c"]
    rng = random.Random(7)  # noqa: S311 - a seeded, reproducible churn
    churn = Churn(Kube(), "chaos-1", rng, 30, ["u://1"], namespaces=namespaces)  # type: ignore[arg-type]
    for _ in range(200):
        churn.step()
    homes: dict[str, set[str]] = {}
    for _, path in sent:
        ns = path.split("/namespaces/")[1].split("/")[0]
        name = path.rsplit("/", 1)[-1]
        if name != "agentspecs":
            homes.setdefault(name, set()).add(ns)
    assert {ns for _, p in sent for ns in namespaces if f"/namespaces/{ns}/" in p} == set(
        namespaces
    )
    assert all(len(where) == 1 for where in homes.values()), homes
