"""The work hold: the Lease whose existence is an agent's hold on a `work` URI."""

from __future__ import annotations

from typing import Any

from controller.domain.models import AgentObject
from controller.domain.work import Hold
from controller.k8s.builders.common import COMPONENT_LABEL, MANAGED_BY, MANAGER


def work_hold(agent: AgentObject, uri: str, *, namespace: str = "") -> dict[str, Any]:
    """A Lease whose existence is the hold on ``uri``; created only if absent.

    The name is derived from the URI, so two agents claiming the same URI race for one name and
    the API server lets exactly one create win.

    Its finalizer keeps it until its holder releases it: a namespace being deleted (or anyone
    else deleting it) can only mark it, and the holder withdraws the URI from its bindings
    before letting it go. It has no owner reference on purpose: the garbage collector would
    delete it as soon as its holder is deleted (at once under foreground deletion), possibly
    before the holder's delivered bindings stop carrying the URI. The holder's finalizer
    releases it, after withdrawing it; a hold whose holder is gone some other way is released
    by the controller once the API server confirms the holder is gone.

    It lives in ``namespace`` (the cluster work scope's hold namespace), else in its holder's.
    """
    hold = Hold(uri, agent.meta.key, agent.meta.uid, namespace=namespace or agent.meta.namespace)
    return hold.to_lease({MANAGED_BY: MANAGER, COMPONENT_LABEL: "work-hold"})
