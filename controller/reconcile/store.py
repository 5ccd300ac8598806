"""The controller's view of the cluster: the latest version of each object, one freshness rule.

Watch events and the responses to the controller's own writes both arrive here, in any order:
a write's response can trail the watch event of a later change, and a stale event can trail an
object's deletion. One rule decides for both paths: a version is stored only if it is newer than
the stored one (etcd resourceVersions are numbers), and nothing of an incarnation (uid) that was
seen deleted comes back. Storing never enqueues anything; the intake decides what a change affects.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Mapping
from typing import Any

from controller.k8s.api import CONFIG_MAPS, ENDPOINTS, Endpoint
from controller.reconcile.compact import compact, status_of

__all__ = ["FROZEN", "Body", "Store", "Tombstones", "key_of", "newer", "resource_version", "uid_of"]

Body = dict[str, Any]

FROZEN: Mapping[Endpoint, str] = {
    **dict.fromkeys(ENDPOINTS.values(), "status"),
    CONFIG_MAPS: "data",
}
"""The field each kind keeps frozen in the store (compressed JSON, see :func:`compact`): the
status of Bindery's kinds and the document of a bindings ConfigMap. The controller writes each
whole and reads it whole (a pass's old status, the comparison before a write), and as a tree of
dicts and strings an agent's status or document takes several times its JSON."""


def resource_version(body: Body | None) -> str:
    return str(((body or {}).get("metadata") or {}).get("resourceVersion", ""))


def uid_of(body: Body | None) -> str:
    return str(((body or {}).get("metadata") or {}).get("uid", ""))


def key_of(body: Body) -> str:
    """``namespace/name``, or ``name`` for a cluster-scoped object."""
    md = body.get("metadata") or {}
    ns, name = md.get("namespace") or "", md.get("name", "")
    return f"{ns}/{name}" if ns else name


def newer(incoming: Body, stored: Body | None) -> bool:
    """The freshness rule: ``incoming`` is a later version than ``stored``."""
    if stored is None:
        return True
    try:
        return int(resource_version(incoming)) > int(resource_version(stored))
    except ValueError:  # not a number: trust the newest arrival, as the API server sent it
        return resource_version(incoming) != resource_version(stored)


class Tombstones:
    """A bounded set of uids, oldest forgotten first."""

    def __init__(self, capacity: int) -> None:
        self._uids: OrderedDict[str, None] = OrderedDict()
        self._capacity = capacity

    def add(self, uid: str) -> None:
        self._uids[uid] = None
        self._uids.move_to_end(uid)
        while len(self._uids) > self._capacity:
            self._uids.popitem(last=False)

    def __contains__(self, uid: object) -> bool:
        return uid in self._uids


class Store:
    """Latest observed bodies by endpoint and key, from watch events and write responses alike."""

    def __init__(
        self, tombstone_capacity: int = 100_000, frozen: Mapping[Endpoint, str] = FROZEN
    ) -> None:
        self._objects: dict[Endpoint, dict[str, Body]] = {}
        self.frozen = frozen
        """The field each kind keeps frozen (see :func:`compact`)."""
        self.tombstones = Tombstones(tombstone_capacity)
        """uids of incarnations seen deleted, so late events cannot bring them back."""

    def of(self, endpoint: Endpoint) -> dict[str, Body]:
        """Every stored body of ``endpoint``, by key (a live view: do not mutate)."""
        return self._objects.setdefault(endpoint, {})

    def get(self, endpoint: Endpoint, key: str) -> Body | None:
        """The stored body (its compact form: the status through :func:`status_of`)."""
        return self.of(endpoint).get(key)

    def status(self, endpoint: Endpoint, key: str) -> Body:
        """The stored object's status (``{}`` if it has none or is not stored)."""
        return status_of(self.get(endpoint, key))

    def put(self, endpoint: Endpoint, body: Body) -> Body | None:
        """Store ``body`` if it is newer than the stored version; return what it replaced.

        Returns the body itself when the store did not change (an older or equal version, or an
        incarnation already seen deleted), so callers tell the cases apart with ``is``.
        """
        uid = uid_of(body)
        if uid and uid in self.tombstones:
            return body
        cache = self.of(endpoint)
        key = key_of(body)
        stored = cache.get(key)
        if not newer(body, stored):
            return body
        cache[key] = compact(body, frozen=self.frozen.get(endpoint, ""))
        return stored

    def delete(self, endpoint: Endpoint, body: Body) -> Body | None:
        """Forget the incarnation ``body`` names (never a newer one of the same name).

        Returns the removed body, or None when that incarnation was not stored.
        """
        uid = uid_of(body)
        if uid:
            self.tombstones.add(uid)
        cache = self.of(endpoint)
        key = key_of(body)
        stored = cache.get(key)
        if stored is None or (uid and uid_of(stored) and uid_of(stored) != uid):
            return None
        del cache[key]
        return stored

    def drop(self, endpoint: Endpoint, key: str) -> None:
        """Forget ``key`` without a body (the API server said it is gone)."""
        stored = self.of(endpoint).pop(key, None)
        if stored is not None and uid_of(stored):
            self.tombstones.add(uid_of(stored))
