"""Run the Argo CD health script the chart ships, exactly as shipped, in a real Lua 5.1.

Argo CD runs health scripts with gopher-lua (Lua 5.1): ``lupa.lua51`` is the reference Lua of
that version, so a script that uses anything newer fails here as it would there. Argo CD sets the
global ``obj`` to the object and takes the table the script returns.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from lupa import lua51

REPO_ROOT = Path(__file__).resolve().parents[1]
HEALTH_SCRIPT = REPO_ROOT / "helm" / "bindery" / "argocd" / "health.lua"
ARGO_CD_VALUES = REPO_ROOT / "helm" / "bindery" / "argocd" / "argo-cd-values.yaml"
KINDS = ("AgentSpec", "Tool", "Resource", "ResourceType", "ResourceGrant")
LuaSyntaxError = lua51.LuaSyntaxError
HEALTH_STATUSES = {"Healthy", "Progressing", "Degraded", "Suspended", "Missing", "Unknown"}


def argo_health(obj: dict[str, Any], script: str | None = None) -> dict[str, str]:
    """``{"status", "message"}`` as Argo CD would compute them for ``obj``."""
    lua = lua51.LuaRuntime(unpack_returned_tuples=False)
    lua.globals().obj = lua.table_from(obj, recursive=True)
    hs = lua.execute(HEALTH_SCRIPT.read_text() if script is None else script)
    assert hs is not None, "the health script returned nothing"
    status, message = hs["status"], hs["message"]
    assert status in HEALTH_STATUSES, f"not an Argo CD health status: {status!r}"
    return {"status": str(status), "message": str(message or "")}
