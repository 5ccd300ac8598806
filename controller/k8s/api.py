"""The controller's I/O seam: a few typed REST calls over the Kubernetes client's transport.

Requests go through ``kubernetes.client.ApiClient`` (its configuration, auth and connection
pool) but bodies stay plain JSON: no generated model classes, so a pass costs what the API call
costs. Blocking calls run in a thread pool sized for the reconcile workers.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any, TypeVar
from urllib.parse import quote

import urllib3
from kubernetes import client, config
from kubernetes.client import rest

from controller import __version__
from controller.domain.models import GROUP, VERSION
from controller.domain.refs import Kind

JSON_PATCH = "application/json-patch+json"
MERGE_PATCH = "application/merge-patch+json"
META_LIST = "application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1,application/json"
"""Ask a LIST for metadata only."""
FIELD_MANAGER = "bindery"
USER_AGENT = f"bindery-controller/{__version__}"

T = TypeVar("T")

LIST_PAGE = 500
"""Objects per LIST page: the start-up LIST's and kopf's own listing's."""


class ApiError(Exception):
    """A non-2xx answer from the API server."""

    def __init__(self, status: int, method: str, path: str, body: dict[str, Any]) -> None:
        self.status = status
        self.method = method
        self.path = path
        self.reason = str(body.get("reason", ""))
        self.message = str(body.get("message", "")) or json.dumps(body)[:500]
        super().__init__(f"{method} {path}: HTTP {status} {self.reason}: {self.message}")

    @property
    def not_found(self) -> bool:
        return self.status == 404

    @property
    def conflict(self) -> bool:
        """409: the object exists already, or a resourceVersion/uid precondition failed."""
        return self.status == 409

    @property
    def unreachable(self) -> bool:
        """No HTTP answer at all (connection refused, reset, timed out)."""
        return self.status == 0

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
CONFIG_MAPS = Endpoint("", "v1", "configmaps")
STATEFUL_SETS = Endpoint("apps", "v1", "statefulsets")
LEASES = Endpoint("coordination.k8s.io", "v1", "leases")
EVENTS = Endpoint("events.k8s.io", "v1", "events")
PODS = Endpoint("", "v1", "pods")
CORE_EVENTS = Endpoint("", "v1", "events")
"""core/v1 Events: what controllers such as the StatefulSet controller report (FailedCreate)."""

ENDPOINTS: dict[Kind, Endpoint] = {
    Kind.TYPE: RESOURCE_TYPES,
    Kind.RESOURCE: RESOURCES,
    Kind.TOOL: TOOLS,
    Kind.AGENT: AGENTS,
}
"""The endpoint of each Bindery kind."""


def load_api_client() -> client.ApiClient:
    """In-cluster configuration when running in a pod, else the current kubeconfig."""
    cfg = client.Configuration()
    try:
        config.load_incluster_config(client_configuration=cfg)
    except config.ConfigException:
        config.load_kube_config(client_configuration=cfg)
    return client.ApiClient(cfg)


class KubeApi:
    """Async JSON calls against the API server."""

    def __init__(self, api_client: client.ApiClient, *, threads: int = 16) -> None:
        cfg = api_client.configuration
        if (cfg.connection_pool_maxsize or 0) < threads:
            # The client sized its connection pool when it was built: build it again with one
            # connection per thread, or busy threads would open and discard extra connections.
            cfg.connection_pool_maxsize = threads
            api_client.rest_client = rest.RESTClientObject(cfg)
        api_client.user_agent = USER_AGENT
        self._client = api_client
        self._pool = ThreadPoolExecutor(max_workers=threads, thread_name_prefix="bindery-api")

    def close(self) -> None:
        self._pool.shutdown(wait=False, cancel_futures=True)
        self._client.close()

    async def _run(self, fn: Callable[[], T]) -> T:
        return await asyncio.get_running_loop().run_in_executor(self._pool, fn)

    def _request_sync(
        self,
        method: str,
        path: str,
        body: Any = None,
        content_type: str = "application/json",
        query: list[tuple[str, str]] | None = None,
        *,
        accept: str = "application/json",
    ) -> dict[str, Any]:
        headers = {"Accept": accept, "Content-Type": content_type}
        query = [*(query or []), ("fieldManager", FIELD_MANAGER)] if method != "GET" else query
        if method == "DELETE":
            query = None
        # The body is plain JSON already: it goes straight to json.dumps, without the client's
        # model sanitizer walking it once more.
        method, url, headers, _, post_params = self._client.param_serialize(
            method,
            path,
            query_params=query,
            header_params=headers,
            auth_settings=["BearerToken"],
        )
        try:
            response = self._client.call_api(method, url, headers, body, post_params, (5, 30))
        except (urllib3.exceptions.HTTPError, OSError) as exc:
            raise ApiError(
                0,
                method,
                path,
                {
                    "reason": "Unreachable",
                    "message": f"no answer from the API server ({exc}); retried with backoff",
                },
            ) from exc
        raw = response.read()
        data = json.loads(raw) if raw else {}
        if not 200 <= response.status < 300:
            raise ApiError(response.status, method, path, data if isinstance(data, dict) else {})
        if not isinstance(data, dict):
            return {}
        # The controller never reads managedFields; dropping them keeps its caches small.
        for item in [data, *(data.get("items") or [])]:
            (item.get("metadata") or {}).pop("managedFields", None)
        return data

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
        return await self._run(
            lambda: self._request_sync(method, path, body, content_type, query, accept=accept)
        )

    # ------------------------------------------------------------------ verbs

    async def get(self, kind: Endpoint, namespace: str, name: str) -> dict[str, Any] | None:
        try:
            return await self.request("GET", kind.path(namespace, name))
        except ApiError as exc:
            if exc.not_found:
                return None
            raise

    async def list_all(
        self, kind: Endpoint, namespace: str = "", label_selector: str = "", page: int = LIST_PAGE
    ) -> list[dict[str, Any]]:
        """Every object of ``kind`` (in ``namespace``, or all), fetched in pages."""
        items: list[dict[str, Any]] = []
        token = ""
        while True:
            query = [("limit", str(page))]
            if label_selector:
                query.append(("labelSelector", label_selector))
            if token:
                query.append(("continue", token))
            data = await self.request("GET", kind.path(namespace), query=query)
            api_version = data.get("apiVersion", "")
            kind_name = str(data.get("kind", "")).removesuffix("List")
            for item in data.get("items") or []:
                item.setdefault("apiVersion", api_version)
                item.setdefault("kind", kind_name)
                items.append(item)
            token = (data.get("metadata") or {}).get("continue", "")
            if not token:
                return items

    async def list_versions(
        self, kind: Endpoint, namespace: str = "", label_selector: str = "", page: int = LIST_PAGE
    ) -> tuple[str, dict[str, str]]:
        """The resourceVersion of a consistent listing and, for every object in it, its
        ``namespace/name`` key and resourceVersion (metadata only: no bodies are transferred)."""
        versions: dict[str, str] = {}
        token = ""
        list_rv = ""
        while True:
            query = [("limit", str(page))]
            if label_selector:
                query.append(("labelSelector", label_selector))
            if token:
                query.append(("continue", token))
            data = await self.request("GET", kind.path(namespace), query=query, accept=META_LIST)
            for item in data.get("items") or []:
                md = item.get("metadata") or {}
                ns, name = md.get("namespace") or "", md.get("name", "")
                versions[f"{ns}/{name}" if ns else name] = str(md.get("resourceVersion", ""))
            meta = data.get("metadata") or {}
            list_rv = list_rv or str(meta.get("resourceVersion", ""))
            token = meta.get("continue", "")
            if not token:
                return list_rv, versions

    async def list_page(
        self, kind: Endpoint, namespace: str, *, field_selector: str, limit: int = 50
    ) -> list[dict[str, Any]]:
        """One page of ``kind`` matching ``field_selector`` (for small, targeted reads)."""
        query = [("fieldSelector", field_selector), ("limit", str(limit))]
        data = await self.request("GET", kind.path(namespace), query=query)
        return list(data.get("items") or [])

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
