"""The pod and container settings a session runtime carries, merged over the Pod Security
`restricted` defaults: security, identity, resources and scheduling."""

from __future__ import annotations

from typing import Any

from controller.domain.models import Runtime, WireModel

RESTRICTED_POD_SECURITY: dict[str, Any] = {
    "runAsNonRoot": True,
    "seccompProfile": {"type": "RuntimeDefault"},
}
"""The pod securityContext every session starts from: Pod Security ``restricted``."""

RESTRICTED_CONTAINER_SECURITY: dict[str, Any] = {
    "allowPrivilegeEscalation": False,
    "capabilities": {"drop": ["ALL"]},
}
"""The container securityContext every session starts from: Pod Security ``restricted``."""

_ESCALATING_CAPABILITIES = {"SYS_ADMIN", "CAP_SYS_ADMIN"}


def _merged(base: dict[str, Any], over: dict[str, Any]) -> dict[str, Any]:
    """``over`` merged into ``base``: mappings merge key by key, anything else replaces."""
    out = dict(base)
    for key, value in over.items():
        if isinstance(value, dict) and isinstance(out.get(key), dict):
            out[key] = _merged(out[key], value)
        else:
            out[key] = value
    return out


def wire(model: WireModel | None) -> dict[str, Any]:
    return {} if model is None else model.model_dump(mode="json", by_alias=True, exclude_none=True)


def _container_security(runtime: Runtime) -> dict[str, Any]:
    """The restricted defaults with the runtime's settings merged over them.

    ``allowPrivilegeEscalation: false`` is a default only: the API server refuses it next to
    ``privileged: true`` or an added SYS_ADMIN, so it is left out there unless the user set it.
    """
    user = wire(runtime.container_security_context)
    base = dict(RESTRICTED_CONTAINER_SECURITY)
    added = set((user.get("capabilities") or {}).get("add") or [])
    if user.get("privileged") or added & _ESCALATING_CAPABILITIES:
        del base["allowPrivilegeEscalation"]
    return _merged(base, user)


def container_settings(runtime: Runtime) -> dict[str, Any]:
    out: dict[str, Any] = {"securityContext": _container_security(runtime)}
    if resources := {k: v for k, v in wire(runtime.resources).items() if v}:
        out["resources"] = resources
    return out


def pod_settings(runtime: Runtime, service_account: str) -> dict[str, Any]:
    """Pod-level settings: security, identity and scheduling.

    The ServiceAccount is the runtime's, else the installation's (``service_account``). Its
    token is mounted only when one of them names a ServiceAccount (and then as that
    ServiceAccount says, unless the runtime says otherwise); a session that names none runs as
    the namespace's ``default`` ServiceAccount with no token, so it holds no API credentials.
    """
    out: dict[str, Any] = {
        "securityContext": _merged(RESTRICTED_POD_SECURITY, wire(runtime.security_context))
    }
    account = runtime.service_account_name or service_account
    if account:
        out["serviceAccountName"] = account
    automount = runtime.automount_service_account_token
    if automount is None and not account:
        automount = False
    if automount is not None:
        out["automountServiceAccountToken"] = automount
    if runtime.node_selector:
        out["nodeSelector"] = dict(runtime.node_selector)
    if runtime.tolerations:
        out["tolerations"] = [
            t.model_dump(mode="json", by_alias=True, exclude_none=True) for t in runtime.tolerations
        ]
    if runtime.image_pull_secrets:
        out["imagePullSecrets"] = [{"name": r.name} for r in runtime.image_pull_secrets]
    return out
