"""Command-line arguments shared by ``bindery`` and ``kubectl bindery`` (no heavy imports)."""

from __future__ import annotations

import argparse
from collections.abc import Callable
from typing import Any


def add_why_parser(sub: Any, run: Callable[[argparse.Namespace], int]) -> None:
    """``why AGENT``: for ``bindery`` and for the ``kubectl-bindery`` plugin; ``run`` runs it."""
    why = sub.add_parser(
        "why",
        help="why an agent is (not) Ready: each slot's candidates, its work hold, its launch; "
        "or, for KIND/NAME, which dependent agents have not applied an object's change",
    )
    why.add_argument(
        "agent",
        metavar="AGENT|KIND/NAME",
        help="the AgentSpec's name; or resource/NAME, tool/NAME, resourcetype/NAME or "
        "resourcegrant/NAME: the object's rollout and the dependent agents that lag, with why",
    )
    why.add_argument(
        "-n",
        "--namespace",
        default=None,
        help="the agent's namespace (default: the kubeconfig context's, else 'default')",
    )
    why.add_argument(
        "-o", "--output", choices=["text", "json"], default="text", help="text (default) or json"
    )
    why.add_argument(
        "--as",
        dest="impersonate",
        metavar="USER",
        default=None,
        help="read as this user (kubectl's --as; default: the kubeconfig user's 'as', if any)",
    )
    why.add_argument(
        "--as-group",
        dest="impersonate_groups",
        metavar="GROUP",
        action="append",
        default=None,
        help="with --as, impersonate this group too (repeatable; kubectl's --as-group)",
    )
    why.add_argument(
        "--work-scope",
        choices=["namespace", "cluster"],
        default=None,
        help="the controller's --work-scope: whose holds and claimants count for the agent's "
        "work URI (default: read from the holds; cluster when one lives outside its holder's "
        "namespace)",
    )
    why.add_argument(
        "--work-hold-namespace",
        metavar="NAMESPACE",
        default=None,
        help="the controller's --work-hold-namespace (where cluster-scope holds live)",
    )
    why.set_defaults(func=run)
