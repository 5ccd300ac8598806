"""The controller's I/O seam: a few typed REST calls on the event loop.

The Kubernetes client's configuration says where the API server is and how to authenticate
(kubeconfig or in-cluster, token refresh included); the requests themselves go over aiohttp (which
kopf already runs on), so no thread pool stands between a reconcile pass and its writes. Bodies
stay plain JSON: no generated model classes, so a pass costs what the API call costs.
"""

from __future__ import annotations

import json
import os
import ssl
import time
from collections.abc import AsyncGenerator, AsyncIterator, Callable
from dataclasses import dataclass
from typing import Any
from urllib.parse import quote, urlencode

import aiohttp
import pydantic_core
from kubernetes import client, config
from kubernetes.config import kube_config
from multidict import CIMultiDict
from yarl import URL

from controller import __version__
from controller.domain.errors import ApiServerError
from controller.domain.models import GROUP, VERSION
from controller.domain.refs import Kind

JSON_PATCH = "application/json-patch+json"
MERGE_PATCH = "application/merge-patch+json"
META_LIST = "application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1,application/json"
"""Ask a LIST for metadata only."""
FIELD_MANAGER = "bindery"
USER_AGENT = f"bindery-controller/{__version__}"

AUTH_TTL = 5.0
"""Seconds a bearer token read from the client's configuration is reused."""
LIST_PAGE = 500
"""Objects per LIST page: the start-up LIST's and kopf's own listing's."""
WATCH_TIMEOUT = 300
"""Seconds after which the API server ends a watch (the watcher starts the next at once)."""


NAMESPACE_TERMINATING = "NamespaceTerminating"
"""The cause the API server gives for a create refused in a namespace being deleted
(``metav1.NamespaceTerminatingCause``, with status 403 and reason ``Forbidden``)."""


class ApiError(ApiServerError):
    """A non-2xx answer from the API server.

    ``reason`` is the API Status's machine-readable reason (``NotFound``, ``AlreadyExists``,
    ``Conflict``, ``Forbidden``, ``Invalid``, ...; ``Unreachable`` for no answer at all) and
    ``causes`` the ``details.causes[].reason`` of each cause it lists, ``fields`` the
    ``details.causes[].field`` each names (for people: which field of what was sent). Decide
    from these and ``status``; ``message`` is for people.
    """

    def __init__(self, status: int, method: str, path: str, body: dict[str, Any]) -> None:
        self.status = status
        self.method = method
        self.path = path
        self.reason = str(body.get("reason", ""))
        self.message = str(body.get("message", "")) or json.dumps(body)[:500]
        details = body.get("details")
        causes = details.get("causes") if isinstance(details, dict) else None
        self.causes: tuple[str, ...] = tuple(
            str(c.get("reason", "")) for c in causes or () if isinstance(c, dict)
        )
        self.fields: tuple[str, ...] = tuple(
            str(c["field"]) for c in causes or () if isinstance(c, dict) and c.get("field")
        )
        super().__init__(f"{method} {path}: HTTP {status} {self.reason}: {self.message}")

    @property
    def not_found(self) -> bool:
        return self.status == 404

    @property
    def namespace_terminating(self) -> bool:
        """Refused because the object's namespace is being deleted: a cause with reason
        ``NamespaceTerminating`` (nothing new can be created there)."""
        return NAMESPACE_TERMINATING in self.causes

    @property
    def conflict(self) -> bool:
        """409: the object exists already, or a resourceVersion/uid precondition failed."""
        return self.status == 409

    @property
    def unreachable(self) -> bool:
        """No HTTP answer at all (connection refused, reset, timed out)."""
        return self.status == 0

    @property
    def away(self) -> bool:
        """The API server itself is not serving: no answer, or 503 (starting, stopping)."""
        return self.status in {0, 503}

    @property
    def refused(self) -> bool:
        """The request itself was refused (invalid, too large, forbidden): sending it again
        unchanged will not help, the object or its inputs must change."""
        return 400 <= self.status < 500 and self.status not in (404, 409, 429)

    @property
    def stale(self) -> bool:
        """The write was decided from an old version: a 409, or the 422 of a failed JSON patch
        ``test`` (see :meth:`KubeApi.json_patch_at`)."""
        return self.status in (409, 422)


@dataclass(frozen=True)
class Endpoint:
    """Where a kind of object lives in the REST API."""

    group: str
    version: str
    plural: str
    namespaced: bool = True

    def path(self, namespace: str = "", name: str = "", sub: str = "") -> str:
        base = f"/api/{self.version}" if not self.group else f"/apis/{self.group}/{self.version}"
        if self.namespaced and namespace:
            base += f"/namespaces/{quote(namespace, safe='')}"
        base += f"/{self.plural}"
        if name:
            base += f"/{quote(name, safe='')}"
        if sub:
            base += f"/{sub}"
        return base


RESOURCE_TYPES = Endpoint(GROUP, VERSION, "resourcetypes", namespaced=False)
RESOURCES = Endpoint(GROUP, VERSION, "resources")
TOOLS = Endpoint(GROUP, VERSION, "tools")
AGENTS = Endpoint(GROUP, VERSION, "agentspecs")
RESOURCE_GRANTS = Endpoint(GROUP, VERSION, "resourcegrants")
NAMESPACES = Endpoint("", "v1", "namespaces", namespaced=False)
"""Watched for their labels only (a ResourceGrant's namespaceSelector reads them)."""
CONFIG_MAPS = Endpoint("", "v1", "configmaps")
STATEFUL_SETS = Endpoint("apps", "v1", "statefulsets")
LEASES = Endpoint("coordination.k8s.io", "v1", "leases")
PERSISTENT_VOLUME_CLAIMS = Endpoint("", "v1", "persistentvolumeclaims")
STORAGE_CLASSES = Endpoint("storage.k8s.io", "v1", "storageclasses", namespaced=False)
EVENTS = Endpoint("events.k8s.io", "v1", "events")
PODS = Endpoint("", "v1", "pods")
SERVICE_ACCOUNTS = Endpoint("", "v1", "serviceaccounts")
ROLES = Endpoint("rbac.authorization.k8s.io", "v1", "roles")
ROLE_BINDINGS = Endpoint("rbac.authorization.k8s.io", "v1", "rolebindings")
CORE_EVENTS = Endpoint("", "v1", "events")
"""core/v1 Events: what controllers such as the StatefulSet controller report (FailedCreate)."""

ENDPOINTS: dict[Kind, Endpoint] = {
    Kind.TYPE: RESOURCE_TYPES,
    Kind.RESOURCE: RESOURCES,
    Kind.TOOL: TOOLS,
    Kind.AGENT: AGENTS,
    Kind.GRANT: RESOURCE_GRANTS,
}
"""The endpoint of each Bindery kind."""


@dataclass(frozen=True)
class Impersonation:
    """Who requests are made as, from the kubeconfig user's ``as``, ``as-groups``, ``as-uid``
    and ``as-user-extra`` (what ``kubectl --as``/``--as-group`` set): the API server authorizes
    every request as that user, as kubectl's would be. Empty: as the credentials' own user."""

    user: str = ""
    groups: tuple[str, ...] = ()
    uid: str = ""
    extra: tuple[tuple[str, tuple[str, ...]], ...] = ()

    @classmethod
    def of_user(cls, user: dict[str, Any], name: str) -> Impersonation:
        """The impersonation a kubeconfig ``users[].user`` entry named ``name`` asks for."""
        found = cls(
            user=str(user.get("as") or ""),
            groups=tuple(str(g) for g in user.get("as-groups") or ()),
            uid=str(user.get("as-uid") or ""),
            extra=tuple(
                (str(key), tuple(str(v) for v in values or ()))
                for key, values in (user.get("as-user-extra") or {}).items()
            ),
        )
        if not found.user and (found.groups or found.uid or found.extra):
            raise config.ConfigException(
                f"kubeconfig user {name!r} impersonates groups, a uid or extra fields without "
                "a user ('as'): add 'as: USER' to it, as kubectl requires"
            )
        return found

    def headers(self) -> list[tuple[str, str]]:
        """The ``Impersonate-*`` request headers (one per group and extra value)."""
        if not self.user:
            return []
        out = [("Impersonate-User", self.user)]
        out += [("Impersonate-Group", group) for group in self.groups]
        if self.uid:
            out.append(("Impersonate-Uid", self.uid))
        out += [
            (f"Impersonate-Extra-{quote(key, safe='')}", value)
            for key, values in self.extra
            for value in values
        ]
        return out


NOBODY = Impersonation()


def kubeconfig_impersonation(path: str) -> Impersonation:
    """The impersonation of the current context's user in the kubeconfig at ``path`` (a
    ``$KUBECONFIG`` list is merged as the client merges it: the first entry of a name wins)."""
    _, current = config.list_kube_config_contexts(path)
    name = ((current or {}).get("context") or {}).get("user")
    merged = kube_config.KubeConfigMerger(path).config
    for entry in (merged.value.get("users") if merged is not None else None) or ():
        value = entry.value if isinstance(entry, kube_config.ConfigNode) else entry
        if value.get("name") == name:
            return Impersonation.of_user(value.get("user") or {}, str(name))
    return NOBODY


class ImpersonatingClient(client.ApiClient):
    """The Kubernetes client's ``ApiClient``, and who :class:`KubeApi`'s requests through it are
    made as (the client itself knows nothing of impersonation)."""

    def __init__(self, configuration: client.Configuration, impersonation: Impersonation) -> None:
        super().__init__(configuration)
        self.impersonation = impersonation


def kubeconfig_path() -> str:
    """The kubeconfig to read: ``$KUBECONFIG`` (a list, merged), else ``~/.kube/config``."""
    return os.environ.get("KUBECONFIG") or "~/.kube/config"


def load_api_client() -> ImpersonatingClient:
    """In-cluster configuration when running in a pod, else the current kubeconfig, with its
    user's impersonation. Raises the client's ``ConfigException`` (or ``OSError``)."""
    cfg = client.Configuration()
    try:
        config.load_incluster_config(client_configuration=cfg)
    except config.ConfigException:
        path = kubeconfig_path()
        config.load_kube_config(config_file=path, client_configuration=cfg)
        return ImpersonatingClient(cfg, kubeconfig_impersonation(path))
    return ImpersonatingClient(cfg, NOBODY)


def _ssl_context(cfg: client.Configuration) -> ssl.SSLContext:
    """TLS as the configuration says: its CA (or the system's), its client certificate."""
    ctx = ssl.create_default_context(cafile=cfg.ssl_ca_cert or None)
    if not cfg.verify_ssl:
        ctx.check_hostname = False
        ctx.verify_mode = ssl.CERT_NONE
    if cfg.cert_file:
        ctx.load_cert_chain(cfg.cert_file, cfg.key_file or None)
    return ctx


def decode_json(raw: bytes | str) -> Any:
    """JSON text as Python values, equal to ``json.loads``'s: parsed by pydantic-core (about
    twice as fast on Kubernetes objects, the bulk of a large start-up's listings, with one copy
    of each repeated key), and by the standard library when pydantic-core refuses the text (a
    lone surrogate escape, say), so that what it accepts is accepted as before."""
    try:
        return pydantic_core.from_json(raw)
    except ValueError:
        return json.loads(raw)


def _decoded(raw: bytes) -> dict[str, Any]:
    """A response body as a JSON object (an unreadable one as its first bytes, for people)."""
    try:
        decoded = decode_json(raw) if raw else {}
    except ValueError:
        decoded = {"message": raw[:500].decode(errors="replace")}
    return decoded if isinstance(decoded, dict) else {}


def _unmanaged(item: Any) -> None:
    """Drop an object's managedFields: the controller never reads them, and its view is smaller
    without them."""
    if isinstance(item, dict):
        (item.get("metadata") or {}).pop("managedFields", None)


def _event(line: bytes, path: str) -> tuple[str, dict[str, Any]]:
    """One line of a watch: ``(type, object)``; an ``ERROR`` event raised as :class:`ApiError`."""
    event = _decoded(line)
    kind, body = str(event.get("type", "")), event.get("object")
    if not isinstance(body, dict):
        raise ApiError(500, "WATCH", path, {"message": f"not a watch event: {line[:200]!r}"})
    if kind == "ERROR":
        raise ApiError(int(body.get("code") or 500), "WATCH", path, body)
    _unmanaged(body)
    return kind, body


class KubeApi:
    """Async JSON calls against the API server, at most ``connections`` at a time."""

    def __init__(
        self,
        api_client: client.ApiClient,
        *,
        connections: int = 16,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._config: client.Configuration = api_client.configuration
        self._impersonate = (
            api_client.impersonation.headers()
            if isinstance(api_client, ImpersonatingClient)
            else []
        )
        self._clock = clock
        self._connections = connections
        self._session: aiohttp.ClientSession | None = None
        self._watches: aiohttp.ClientSession | None = None
        self._timeout = aiohttp.ClientTimeout(sock_connect=5, sock_read=30)
        self._auth_header: dict[str, str] = {}
        self._auth_until = 0.0

    def _open(self) -> aiohttp.ClientSession:
        """The HTTP session, made on first use (it belongs to the running event loop)."""
        if self._session is None or self._session.closed:
            self._session = self._new_session(self._connections, self._timeout)
        return self._session

    def _open_watches(self) -> aiohttp.ClientSession:
        """The session watches stream over: its own connections, as many as there are watches,
        so a watch held open for minutes never waits for, or delays, a write."""
        if self._watches is None or self._watches.closed:
            self._watches = self._new_session(0, aiohttp.ClientTimeout(sock_connect=5))
        return self._watches

    def _new_session(self, limit: int, timeout: aiohttp.ClientTimeout) -> aiohttp.ClientSession:
        host = str(self._config.host)
        tls = _ssl_context(self._config) if host.startswith("https:") else False
        return aiohttp.ClientSession(
            connector=aiohttp.TCPConnector(limit=limit, ssl=tls),
            headers=CIMultiDict([("User-Agent", USER_AGENT), *self._impersonate]),
            timeout=timeout,
        )

    async def close(self) -> None:
        for session in (self._session, self._watches):
            if session is not None:
                await session.close()
        self._session = self._watches = None

    def _auth(self) -> dict[str, str]:
        """The bearer token, refreshed by the configuration when it rotates (in-cluster).

        Asked of the configuration at most every ``AUTH_TTL`` seconds: asking runs its refresh
        hook, a cost on every request otherwise, and a rotated token stays valid far longer.
        """
        now = self._clock()
        if now >= self._auth_until:
            bearer = self._config.auth_settings().get("BearerToken")
            token = bearer.get("value") if bearer else None
            self._auth_header = {str(bearer["key"]): str(token)} if bearer and token else {}
            self._auth_until = now + AUTH_TTL
        return self._auth_header

    async def request(
        self,
        method: str,
        path: str,
        body: Any = None,
        content_type: str = "application/json",
        query: list[tuple[str, str]] | None = None,
        *,
        accept: str = "application/json",
    ) -> dict[str, Any]:
        if method not in ("GET", "DELETE"):
            query = [*(query or []), ("fieldManager", FIELD_MANAGER)]
        url = f"{self._config.host}{path}"
        if query:
            url += "?" + urlencode(query)
        headers: dict[str, str] = {"Accept": accept, **self._auth()}
        data = None
        if body is not None:
            headers["Content-Type"] = content_type
            data = json.dumps(body)
        try:
            async with self._open().request(
                method,
                URL(url, encoded=True),
                data=data,
                headers=headers,
                proxy=self._config.proxy or None,
                server_hostname=self._config.tls_server_name or None,
            ) as response:
                status = response.status
                raw = await response.read()
        except (aiohttp.ClientError, TimeoutError, OSError) as exc:
            raise ApiError(
                0,
                method,
                path,
                {
                    "reason": "Unreachable",
                    "message": f"no answer from the API server ({type(exc).__name__}: {exc}); "
                    "retried with backoff",
                },
            ) from exc
        data_out = _decoded(raw)
        if not 200 <= status < 300:
            raise ApiError(status, method, path, data_out)
        for item in [data_out, *(data_out.get("items") or [])]:
            _unmanaged(item)
        return data_out

    # ------------------------------------------------------------------ verbs

    async def get(self, kind: Endpoint, namespace: str, name: str) -> dict[str, Any] | None:
        try:
            return await self.request("GET", kind.path(namespace, name))
        except ApiError as exc:
            if exc.not_found:
                return None
            raise

    async def _pages(
        self, kind: Endpoint, namespace: str, label_selector: str, page: int, accept: str
    ) -> AsyncIterator[dict[str, Any]]:
        """Each page of a LIST of ``kind``, following its ``continue`` token to the end."""
        token = ""
        while True:
            query = [("limit", str(page))]
            if label_selector:
                query.append(("labelSelector", label_selector))
            if token:
                query.append(("continue", token))
            data = await self.request("GET", kind.path(namespace), query=query, accept=accept)
            yield data
            token = (data.get("metadata") or {}).get("continue", "")
            if not token:
                return

    async def list_pages(
        self, kind: Endpoint, namespace: str = "", label_selector: str = "", page: int = LIST_PAGE
    ) -> AsyncIterator[tuple[str, list[dict[str, Any]]]]:
        """Every object of ``kind`` (in ``namespace``, or all), one page at a time: the pages
        of one consistent listing, each as ``(the listing's resourceVersion, its objects)``."""
        async for data in self._pages(kind, namespace, label_selector, page, "application/json"):
            api_version = data.get("apiVersion", "")
            kind_name = str(data.get("kind", "")).removesuffix("List")
            items = data.get("items") or []
            for item in items:
                item.setdefault("apiVersion", api_version)
                item.setdefault("kind", kind_name)
            yield str((data.get("metadata") or {}).get("resourceVersion", "")), items

    async def list_all(
        self, kind: Endpoint, namespace: str = "", label_selector: str = "", page: int = LIST_PAGE
    ) -> list[dict[str, Any]]:
        """Every object of ``kind`` (in ``namespace``, or all), fetched in pages."""
        items: list[dict[str, Any]] = []
        async for _, page_items in self.list_pages(kind, namespace, label_selector, page):
            items += page_items
        return items

    async def list_versions(
        self, kind: Endpoint, namespace: str = "", label_selector: str = "", page: int = LIST_PAGE
    ) -> tuple[str, dict[str, str]]:
        """The resourceVersion of a consistent listing and, for every object in it, its
        ``namespace/name`` key and resourceVersion (metadata only: no bodies are transferred)."""
        versions: dict[str, str] = {}
        list_rv = ""
        async for data in self._pages(kind, namespace, label_selector, page, META_LIST):
            for item in data.get("items") or []:
                md = item.get("metadata") or {}
                ns, name = md.get("namespace") or "", md.get("name", "")
                versions[f"{ns}/{name}" if ns else name] = str(md.get("resourceVersion", ""))
            list_rv = list_rv or str((data.get("metadata") or {}).get("resourceVersion", ""))
        return list_rv, versions

    async def list_page(
        self, kind: Endpoint, namespace: str, *, field_selector: str, limit: int = 50
    ) -> list[dict[str, Any]]:
        """One page of ``kind`` matching ``field_selector`` (for small, targeted reads)."""
        query = [("fieldSelector", field_selector), ("limit", str(limit))]
        data = await self.request("GET", kind.path(namespace), query=query)
        return list(data.get("items") or [])

    async def watch(
        self,
        kind: Endpoint,
        namespace: str,
        label_selector: str,
        resource_version: str,
        *,
        seconds: int = WATCH_TIMEOUT,
    ) -> AsyncGenerator[tuple[str, dict[str, Any]], None]:
        """The changes to ``kind`` (in ``namespace``, or all) after ``resource_version``, as
        ``(type, object)``: ``ADDED``, ``MODIFIED``, ``DELETED``, and ``BOOKMARK`` (an object
        carrying only a newer resourceVersion to watch from). Ends when the API server ends the
        watch (after about ``seconds``). An ``ERROR`` event is raised as
        :class:`ApiError`: status 410 when ``resource_version`` is too old to watch from (list
        again)."""
        path = kind.path(namespace)
        query = [
            ("watch", "1"),
            ("allowWatchBookmarks", "true"),
            ("resourceVersion", resource_version),
            ("timeoutSeconds", str(seconds)),
        ]
        if label_selector:
            query.append(("labelSelector", label_selector))
        url = f"{self._config.host}{path}?{urlencode(query)}"
        try:
            async with self._open_watches().get(
                URL(url, encoded=True),
                headers={"Accept": "application/json", **self._auth()},
                timeout=aiohttp.ClientTimeout(sock_connect=5, sock_read=seconds + 30),
                proxy=self._config.proxy or None,
                server_hostname=self._config.tls_server_name or None,
            ) as response:
                if response.status != 200:
                    raise ApiError(response.status, "WATCH", path, _decoded(await response.read()))
                rest = b""
                # Line by line, whatever a line's length (a ConfigMap may hold a megabyte).
                async for chunk in response.content.iter_any():
                    *lines, rest = (rest + chunk).split(b"\n")
                    for line in lines:
                        if line.strip():
                            yield _event(line, path)
        except (aiohttp.ClientError, TimeoutError, OSError) as exc:
            raise ApiError(
                0,
                "WATCH",
                path,
                {
                    "reason": "Unreachable",
                    "message": f"the watch broke off ({type(exc).__name__}: {exc}); "
                    "watched again with backoff",
                },
            ) from exc

    async def create(self, kind: Endpoint, body: dict[str, Any]) -> dict[str, Any]:
        namespace = body["metadata"].get("namespace", "")
        return await self.request("POST", kind.path(namespace), body)

    async def merge_patch(
        self, kind: Endpoint, namespace: str, name: str, patch: dict[str, Any], sub: str = ""
    ) -> dict[str, Any]:
        return await self.request("PATCH", kind.path(namespace, name, sub), patch, MERGE_PATCH)

    async def json_patch(
        self, kind: Endpoint, namespace: str, name: str, ops: list[dict[str, Any]], sub: str = ""
    ) -> dict[str, Any]:
        return await self.request("PATCH", kind.path(namespace, name, sub), ops, JSON_PATCH)

    async def json_patch_at(
        self,
        kind: Endpoint,
        namespace: str,
        name: str,
        resource_version: str,
        ops: list[dict[str, Any]],
    ) -> dict[str, Any]:
        """``ops`` applied only if the object is still at ``resource_version`` (else HTTP 422)."""
        test = {"op": "test", "path": "/metadata/resourceVersion", "value": resource_version}
        return await self.json_patch(kind, namespace, name, [test, *ops])

    async def replace_status(
        self, kind: Endpoint, namespace: str, name: str, status: dict[str, Any]
    ) -> dict[str, Any]:
        """Write the whole status (JSON patch ``add /status`` replaces it, stale keys included)."""
        return await self.json_patch(
            kind, namespace, name, [{"op": "add", "path": "/status", "value": status}], "status"
        )

    async def delete(
        self,
        kind: Endpoint,
        namespace: str,
        name: str,
        *,
        uid: str = "",
        resource_version: str = "",
    ) -> bool:
        """Delete with optional preconditions; False when it was already gone."""
        preconditions: dict[str, str] = {}
        if uid:
            preconditions["uid"] = uid
        if resource_version:
            preconditions["resourceVersion"] = resource_version
        body = {"apiVersion": "v1", "kind": "DeleteOptions", "preconditions": preconditions}
        try:
            await self.request("DELETE", kind.path(namespace, name), body)
        except ApiError as exc:
            if exc.not_found:
                return False
            raise
        return True
