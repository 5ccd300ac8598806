"""A reference across namespaces, checked against the target namespace's ResourceGrants.

Resolution asks here whenever a Tool's static slot, an agent's parameter value or an agent's
resource selector reaches a Resource of another namespace. Every ask is recorded in ``reach``
(the target namespaces consulted), so that a change to a grant there, or to the referrer's
Namespace labels, re-resolves exactly the referrers that asked (see
:class:`~controller.domain.grant_index.GrantIndex`).

The refusal is made before anything is said about the target: the same message whether or not
it exists, so a namespace learns nothing of another's Resources without a grant.
"""

from __future__ import annotations

from controller.domain.grants import GrantUse, Referrer, Target, refusal
from controller.domain.models import ResourceObject
from controller.domain.registry_view import RegistryView


def granted(
    view: RegistryView,
    referrer: str,
    key: str,
    resource: ResourceObject | None,
    *,
    use: GrantUse,
    reach: set[str],
) -> str | None:
    """The key (``namespace/name``) of the grant that lets namespace ``referrer`` bind the
    Resource ``key`` (``resource`` when it exists) by ``use``; None when no grant does."""
    namespace, _, name = key.rpartition("/")
    reach.add(namespace)
    labels = resource.meta.labels if resource is not None else {}
    grant = view.grant_for(referrer, Target(namespace, name, labels), use)
    return None if grant is None else grant.meta.key


def refused(referrer: str, key: str, use: GrantUse) -> tuple[str, str]:
    """Why ``referrer`` may not bind ``key`` by ``use``, and the grant that would allow it."""
    namespace, _, name = key.rpartition("/")
    return refusal(Referrer(referrer, {}), Target(namespace, name, {}), use)
