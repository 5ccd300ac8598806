"""Leader election on a coordination.k8s.io Lease, so several replicas run with one active.

Every replica watches and keeps its caches warm; only the one holding the Lease reconciles. The
Lease is taken and renewed with writes guarded by its resourceVersion, so the API server decides
who leads. A leader that cannot renew in time stops reconciling before its lease can expire and
exits: its pod restarts as a follower, the way client-go's leader election behaves.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime, timedelta
from typing import Any

import structlog

from controller.domain.errors import RunError
from controller.k8s.api import LEASES, ApiError, KubeApi

log = structlog.get_logger("bindery.leader")

MICRO = "%Y-%m-%dT%H:%M:%S.%fZ"


def _now() -> datetime:
    return datetime.now(UTC)


def _parse(stamp: str | None) -> datetime | None:
    if not stamp:
        return None
    try:
        return datetime.strptime(stamp, MICRO).replace(tzinfo=UTC)
    except ValueError:
        return None


def lease_expired(lease: dict[str, Any], now: datetime) -> bool:
    spec = lease.get("spec") or {}
    renewed = _parse(spec.get("renewTime")) or _parse(spec.get("acquireTime"))
    duration = int(spec.get("leaseDurationSeconds") or 0)
    return renewed is None or now > renewed + timedelta(seconds=duration)


class LeaderElector:
    def __init__(
        self,
        api: KubeApi,
        *,
        namespace: str,
        name: str,
        identity: str,
        lease_seconds: int = 15,
        renew_seconds: float = 5.0,
    ) -> None:
        self.api = api
        self.namespace = namespace
        self.name = name
        self.identity = identity
        self.lease_seconds = lease_seconds
        self.renew_seconds = renew_seconds

    def _spec(self, now: datetime, acquired: str | None, transitions: int) -> dict[str, Any]:
        stamp = now.strftime(MICRO)
        return {
            "holderIdentity": self.identity,
            "leaseDurationSeconds": self.lease_seconds,
            "acquireTime": acquired or stamp,
            "renewTime": stamp,
            "leaseTransitions": transitions,
        }

    async def try_acquire_or_renew(self) -> bool:
        """One attempt; True when this replica holds the lease afterwards."""
        now = _now()
        lease = await self.api.get(LEASES, self.namespace, self.name)
        try:
            if lease is None:
                await self.api.create(
                    LEASES,
                    {
                        "apiVersion": "coordination.k8s.io/v1",
                        "kind": "Lease",
                        "metadata": {"name": self.name, "namespace": self.namespace},
                        "spec": self._spec(now, None, 0),
                    },
                )
                return True
            spec = lease.get("spec") or {}
            mine = spec.get("holderIdentity") == self.identity
            if not mine and not lease_expired(lease, now):
                return False
            transitions = int(spec.get("leaseTransitions") or 0) + (0 if mine else 1)
            acquired = spec.get("acquireTime") if mine else None
            await self.api.json_patch_at(
                LEASES,
                self.namespace,
                self.name,
                lease["metadata"]["resourceVersion"],
                [
                    {
                        "op": "replace",
                        "path": "/spec",
                        "value": self._spec(now, acquired, transitions),
                    }
                ],
            )
        except ApiError as exc:
            if exc.stale:  # someone else wrote first
                return False
            raise
        return True

    async def release(self) -> None:
        """Give the lease up on a clean stop, so a follower leads at once instead of waiting
        for it to expire. Best effort: a lease we no longer hold is left alone."""
        try:
            lease = await self.api.get(LEASES, self.namespace, self.name)
            if lease is None or (lease.get("spec") or {}).get("holderIdentity") != self.identity:
                return
            await self.api.json_patch_at(
                LEASES,
                self.namespace,
                self.name,
                lease["metadata"]["resourceVersion"],
                [
                    {"op": "replace", "path": "/spec/holderIdentity", "value": ""},
                    {"op": "replace", "path": "/spec/leaseDurationSeconds", "value": 1},
                ],
            )
        except ApiError as exc:
            log.warning("could not release the leader lease", error=str(exc))
            return
        log.info("released the leader lease", lease=f"{self.namespace}/{self.name}")

    async def run(
        self, on_started_leading: Callable[[], Awaitable[None]], stop: asyncio.Event
    ) -> None:
        """Wait for leadership, call ``on_started_leading``, renew until stopped or lost."""
        while not stop.is_set():
            if await self._attempt():
                break
            await _sleep_or_stop(stop, self.renew_seconds)
        if stop.is_set():
            return
        log.info("became the leader", lease=f"{self.namespace}/{self.name}", id=self.identity)
        await on_started_leading()
        last_renewed = time.monotonic()
        while not stop.is_set():
            await _sleep_or_stop(stop, self.renew_seconds)
            if stop.is_set():
                return
            if await self._attempt():
                last_renewed = time.monotonic()
            elif time.monotonic() - last_renewed > self.lease_seconds - self.renew_seconds:
                raise LeadershipLostError(
                    f"could not renew lease {self.namespace}/{self.name} in time; stopping so "
                    "that only one replica reconciles (the pod restarts as a follower)"
                )

    async def _attempt(self) -> bool:
        try:
            return await self.try_acquire_or_renew()
        except ApiError as exc:
            log.warning("leader election request failed", error=str(exc))
            return False


class LeadershipLostError(RunError, RuntimeError):
    """This replica could no longer prove it leads."""


async def _sleep_or_stop(stop: asyncio.Event, seconds: float) -> None:
    try:
        await asyncio.wait_for(stop.wait(), timeout=seconds)
    except TimeoutError:
        return
