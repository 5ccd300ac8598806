"""``render`` and ``export``: KDL agents to AgentSpec manifests and back.

Both take every input first and print nothing unless all of it is valid: the result is returned
whole, or an :class:`AuthoringError` lists every problem with its file, line and column.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Any

from controller.authoring.errors import AuthoringError, Pos, Problems, q
from controller.authoring.kdl import read_agents, to_kdl
from controller.authoring.manifests import (
    AGENT_KIND,
    agent_manifest,
    check_agent,
    check_expressible_in_kdl,
)
from controller.authoring.yamlpos import Located, load
from controller.domain.models import AgentSpecSpec

Source = tuple[str, str]
"""(file name as shown in diagnostics, text)"""


def _checked(
    docs: Iterable[Located], problems: Problems, *, to_kdl: bool = False
) -> list[tuple[dict[str, Any], AgentSpecSpec]]:
    """Check each manifest, and that no two define the same agent (namespace and name).

    ``to_kdl``: also that KDL can say everything the manifest says.
    """
    out: list[tuple[dict[str, Any], AgentSpecSpec]] = []
    first: dict[tuple[str, str], tuple[str, Pos]] = {}
    for doc in docs:
        checked = check_agent(doc, problems)
        if checked is None:
            continue
        metadata, spec = checked
        if to_kdl and not check_expressible_in_kdl(doc, spec, problems):
            continue
        key = (metadata.get("namespace", ""), metadata["name"])
        if key in first:
            file, pos = first[key]
            problems.add(
                doc.file,
                doc.at("metadata", "name"),
                f'agent "{metadata["name"]}" is defined twice (the first is at {file}:{pos}): '
                "expected one definition per agent and namespace",
            )
            continue
        first[key] = (doc.file, doc.at("metadata", "name"))
        out.append((metadata, spec))
    return out


SCHEME_ONLY = re.compile(r"[A-Za-z][A-Za-z0-9+.-]*:")
"""A URI that is only a scheme: what KDL makes of an unquoted ``uri=github-issue://x/1`` (the
string ``github-issue:`` and a ``//`` comment). Valid, so the API server accepts it."""


def uri_warnings(docs: Iterable[Located]) -> list[str]:
    """A ``FILE:LINE:COL: warning: ...`` line for every binding URI with nothing after its
    scheme."""
    out: list[str] = []
    for doc in docs:
        spec = doc.data.get("spec") if isinstance(doc.data, dict) else None
        resources = spec.get("resources") if isinstance(spec, dict) else None
        for i, binding in enumerate(resources if isinstance(resources, list) else []):
            uri = binding.get("uri") if isinstance(binding, dict) else None
            if isinstance(uri, str) and SCHEME_ONLY.fullmatch(uri):
                pos = doc.at("spec", "resources", i, "uri")
                out.append(
                    f"{doc.file}:{pos}: warning: uri {q(uri)} of resource "
                    f"{q(binding.get('name', ''))} has nothing after its scheme; an unquoted "
                    f"uri=scheme://... is read as {q(uri)} followed by a // comment: quote it, "
                    f'e.g. uri="{uri}//..."'
                )
    return out


def render(sources: Iterable[Source], warnings: list[str] | None = None) -> list[dict[str, Any]]:
    """The AgentSpec manifests of every ``agent`` in the KDL sources, in source order.

    Suspicious but valid input is reported as warning lines appended to ``warnings``."""
    problems = Problems()
    docs: list[Located] = []
    for file, text in sources:
        try:
            docs.extend(read_agents(text, file, problems))
        except AuthoringError as exc:
            problems.extend(exc.diagnostics)
    agents = _checked(docs, problems)
    problems.raise_if_any()
    if warnings is not None:
        warnings.extend(uri_warnings(docs))
    return [agent_manifest(metadata, spec) for metadata, spec in agents]


def agent_documents(text: str, file: str) -> list[Located]:
    """The AgentSpec objects in a YAML or JSON stream; a ``List``'s items count one by one."""
    out: list[Located] = []
    for doc in load(text, file):
        data = doc.data
        if isinstance(data, dict) and data.get("kind") in ("List", f"{AGENT_KIND}List"):
            items = data.get("items")
            if isinstance(items, list):
                out.extend(doc.sub("items", i) for i in range(len(items)))
                continue
        out.append(doc)
    return out


def export(sources: Iterable[Source]) -> str:
    """KDL for every AgentSpec manifest in the YAML/JSON sources (``render --reverse``).

    Server-set metadata and ``status`` are ignored, so ``kubectl get agentspecs -o yaml`` can be
    exported as well as a file of rendered manifests.
    """
    problems = Problems()
    docs: list[Located] = []
    for file, text in sources:
        try:
            docs.extend(agent_documents(text, file))
        except AuthoringError as exc:
            problems.extend(exc.diagnostics)
    agents = _checked(docs, problems, to_kdl=True)
    problems.raise_if_any()
    return "\n".join(to_kdl(metadata, spec) for metadata, spec in agents)
