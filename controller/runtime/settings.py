"""The controller process's settings: each knob written once, with its flag, environment variable,
default and help.

:class:`Settings` is the one place a knob is declared. ``bindery run``'s options are derived from
its fields (:func:`add_arguments`), and :meth:`Settings.from_args` builds it from the parsed
command line and the environment: a flag given wins, then the knob's environment variable, then
the field's default. The operator takes the object as it is. This module imports neither kopf
nor the Kubernetes client, so building the command line stays cheap.
"""

from __future__ import annotations

import argparse
import math
import os
import socket
import uuid
from collections.abc import Callable, Mapping
from dataclasses import MISSING, dataclass, field, fields
from typing import Any

from controller.domain.errors import InvalidInputError
from controller.domain.work import WorkScope
from controller.runtime.exits import Exit

FLAG = "flag"
"""The key of a field's :class:`Flag` in its metadata."""


class SettingsError(InvalidInputError):
    """An environment variable holds a value its knob cannot take (the flags are checked by
    argparse, with the same parsers)."""


def seconds(text: str) -> float:
    """A finite number of seconds."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number of seconds") from None
    if not math.isfinite(value):
        raise argparse.ArgumentTypeError(f"{text!r}: give a finite number of seconds")
    return value


def seconds_above_zero(text: str) -> float:
    value = seconds(text)
    if not value > 0:
        raise argparse.ArgumentTypeError(f"{text!r}: give a number of seconds above 0")
    return value


def seconds_or_zero(text: str) -> float:
    value = seconds(text)
    if value < 0:
        raise argparse.ArgumentTypeError(f"{text!r}: give a number of seconds, 0 or more")
    return value


def count(text: str) -> int:
    """A whole number above zero."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"{text!r}: give a whole number above 0")
    return value


def port(text: str) -> int:
    """A TCP port, or 0 for none."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a port number") from None
    if not 0 <= value <= 65535:
        raise argparse.ArgumentTypeError(f"{text!r}: give a port from 1 to 65535, or 0")
    return value


@dataclass(frozen=True)
class Flag:
    """How a knob appears on ``bindery run``'s command line."""

    names: tuple[str, ...]
    help: str
    parse: Callable[[str], Any] = str
    env: str = ""
    """The environment variable read when the flag is not given ("": none)."""
    metavar: str | None = None
    choices: tuple[str, ...] | None = None
    repeated: bool = False
    """Given once per value (``-n a -n b``); the knob is the tuple of them."""
    off_switch: str = ""
    """For a knob on by default: this flag says so explicitly, ``names`` turn it off."""


def knob(default: Any, *names: str, help: str, **flag: Any) -> Any:
    """A settings field with its command-line flag."""
    return field(default=default, metadata={FLAG: Flag(names, help, **flag)})


def _identity() -> str:
    """Pod (or host) name plus a random suffix: unique even for two processes on one host."""
    return f"{os.environ.get('POD_NAME') or socket.gethostname()}_{uuid.uuid4().hex[:8]}"


@dataclass(frozen=True)
class Settings:
    """How this controller process runs: by default, reconciling only while it holds the leader
    Lease, so a second instance waits instead of reconciling beside the first."""

    namespaces: tuple[str, ...] = knob(
        (),
        "-n",
        "--namespace",
        help="watch only this namespace (repeatable, exact names); default: all namespaces",
        repeated=True,
    )
    liveness: str = knob(
        "http://0.0.0.0:8080/healthz",
        "--liveness",
        help="liveness endpoint URL (empty to disable)",
    )
    metrics_port: int = knob(
        9090, "--metrics-port", help="Prometheus metrics port (0 to disable)", parse=port
    )
    workers: int = knob(8, "--workers", help="concurrent reconciles", parse=count)
    resync_seconds: float = knob(
        30.0,
        "--resync-seconds",
        help="how often every kind is listed (metadata only) to put right what a watch missed, "
        "such as a deletion during an API-server restart (default: 30)",
        parse=seconds_above_zero,
    )
    delivery_image: str = knob(
        "",
        "--session-delivery-image",
        help="the image of the delivery sidecar in every session pod launched from now on (the "
        "controller's own image; $BINDERY_SESSION_DELIVERY_IMAGE): a session then sees a new "
        "document within a second and acknowledges it. Empty: no sidecar; sessions read the "
        "kubelet's projection of the ConfigMap and cannot acknowledge",
        env="BINDERY_SESSION_DELIVERY_IMAGE",
    )
    unacknowledged_release: float = knob(
        120.0,
        "--unacknowledged-release-seconds",
        help="for a session that cannot acknowledge (no delivery sidecar): seconds after the "
        "document without its work URI was written before the work hold is released, reported "
        "as unverified (default: $BINDERY_UNACKNOWLEDGED_RELEASE_SECONDS, else 120: longer "
        "than the kubelet's worst sync; 0: at once, as soon as the ConfigMap is written)",
        parse=seconds_or_zero,
        env="BINDERY_UNACKNOWLEDGED_RELEASE_SECONDS",
    )
    acknowledge_timeout: float = knob(
        60.0,
        "--acknowledge-timeout-seconds",
        help="a session that can acknowledge and has not acknowledged the current document "
        "this long after it was written is Stalled (SessionNotAcknowledging) (default: 60)",
        parse=seconds_above_zero,
    )
    api_wait: float = knob(
        30.0,
        "--wait-for-api-server",
        help="at start-up, how long to keep asking an API server that does not answer before "
        f"exiting with code {Exit.UNREACHABLE.value} (default: 30; 0 exits at once)",
        parse=seconds_or_zero,
        metavar="SECONDS",
    )
    leader_election: bool = knob(
        True,
        "--standalone",
        help="reconcile without leader election: only when nothing else can run beside it "
        "(one replica with a Recreate rollout, or tests)",
        off_switch="--leader-elect",
    )
    election_namespace: str = knob(
        "",
        "--leader-election-namespace",
        help="namespace of the leader Lease (default: $POD_NAMESPACE, else the kubeconfig "
        "context's namespace, else 'default')",
        env="POD_NAMESPACE",
    )
    election_name: str = knob(
        "bindery-controller", "--leader-election-id", help="name of the leader Lease"
    )
    work_scope: WorkScope = knob(  # noqa: RUF009 - knob() is a dataclasses.field()
        WorkScope.NAMESPACE,
        "--work-scope",
        help="where a work URI has at most one holder: within each namespace (the default), "
        "or across the cluster (holds then live in --work-hold-namespace). Switching on a "
        "running installation is safe: see docs/install.md",
        parse=WorkScope,
        choices=tuple(scope.value for scope in WorkScope),
    )
    work_hold_namespace: str = knob(
        "",
        "--work-hold-namespace",
        help="with --work-scope=cluster, the namespace the work holds live in (default: the "
        "leader-election namespace); holds found there count in either scope",
        metavar="NAMESPACE",
    )
    log_level: str = knob("INFO", "--log-level", help="INFO (default), DEBUG, WARNING or ERROR")
    session_service_account: str = ""
    """The ServiceAccount sessions run as ("": one per agent): the chart sets
    ``$BINDERY_SESSION_SERVICE_ACCOUNT`` (no flag)."""
    identity: str = field(default_factory=_identity)
    """This process among its replicas (the leader Lease's holder)."""

    @classmethod
    def from_args(
        cls, args: argparse.Namespace, environ: Mapping[str, str] | None = None
    ) -> Settings:
        """The settings of a parsed ``bindery run`` (see :func:`add_arguments`): a flag given,
        else the knob's environment variable, else the default."""
        env = os.environ if environ is None else environ
        values: dict[str, Any] = {}
        for f in fields(cls):
            flag: Flag | None = f.metadata.get(FLAG)
            if flag is None:
                continue
            given = getattr(args, f.name, None)
            if given is not None:
                values[f.name] = tuple(given) if flag.repeated else given
            elif flag.env and env.get(flag.env):
                values[f.name] = _from_env(flag, env[flag.env])
        values["session_service_account"] = env.get("BINDERY_SESSION_SERVICE_ACCOUNT", "")
        return cls(**values)


def _from_env(flag: Flag, text: str) -> Any:
    try:
        return flag.parse(text)
    except (argparse.ArgumentTypeError, ValueError) as exc:
        raise SettingsError(
            f"${flag.env}={text!r} (read for {flag.names[-1]}): {exc}; set it to a valid value "
            f"or give {flag.names[-1]}"
        ) from None


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """``bindery run``'s options, one per :class:`Settings` knob (each defaults to ``None``:
    :meth:`Settings.from_args` tells a flag given from one left out)."""
    for f in fields(Settings):
        flag: Flag | None = f.metadata.get(FLAG)
        if flag is None:
            continue
        if flag.off_switch:
            group = parser.add_mutually_exclusive_group()
            group.add_argument(
                flag.off_switch,
                dest=f.name,
                action="store_const",
                const=True,
                help="the default: reconcile only while holding a coordination Lease (a "
                "second instance waits instead of reconciling beside the first)",
            )
            group.add_argument(
                *flag.names, dest=f.name, action="store_const", const=False, help=flag.help
            )
            continue
        said = "default" in flag.help or f.default in (MISSING, "", ())
        long_name = flag.names[-1].lstrip("-").upper().replace("-", "_")
        parser.add_argument(
            *flag.names,
            dest=f.name,
            type=flag.parse,
            action="append" if flag.repeated else "store",
            default=None,
            metavar=None if flag.choices else flag.metavar or long_name,
            choices=[flag.parse(c) for c in flag.choices] if flag.choices else None,
            help=flag.help if said else f"{flag.help} (default: {f.default})",
        )
