"""The session-side library: the delivered document, its kubelet-style updates, and resolving a
deferred parameter slot with the controller's own rules (the API reads behind a small seam here;
tests/integration/test_session_library.py runs them against the real API server)."""

from __future__ import annotations

import asyncio
import hashlib
import json
import os
import threading
from pathlib import Path
from typing import Any

import pytest
from bindery_session import (
    DEFAULT_BINDINGS_FILE,
    Bindings,
    BindingsError,
    BindingState,
    BindingsWatcher,
    DeliveredResource,
    Fence,
    bindings_path,
    load_bindings,
    parse_bindings,
)

from controller.domain.acknowledgement import digest
from controller.domain.delivery import BINDINGS_FILE, bindings_document, render
from controller.domain.models import AgentObject, ResourceObject, ResourceTypeObject
from controller.domain.registry import Registry
from controller.domain.results import BoundResource
from controller.k8s import builders
from controller.session import ResolveError, SessionResolver
from tests.unit.domain_objects import agent, registry_of, resource, rtype, slot, tool, use

TYPES = (
    rtype("vcs"),
    rtype("git-checkout", "vcs"),
    rtype("fs-directory", "git-checkout"),
    rtype("github-issue", schemes=["github-issue"]),
)
RESOURCES = (
    resource("a/src", "fs-directory", "file:///src", alias="source", attributes={"k": "v"}),
    resource("a/ticket", "github-issue", "github-issue://o/p/1"),
    resource("a/twin1", "vcs", "git://twin"),
    resource("a/twin2", "vcs", "git://twin"),
    resource("b/far", "vcs", "git://far"),
)
TOOLS = (
    tool(
        "a/git",
        slot("target", "git-checkout", "parameter"),
        slot("repo", "vcs"),
        slot("fixed", "vcs", "parameter"),
    ),
)


def world(*agents: AgentObject) -> Registry:
    return registry_of(*TYPES, *RESOURCES, *TOOLS, *agents)


DEV = agent(
    "a/dev",
    bindings=[("work", "github-issue", "github-issue://o/p/1"), ("notes", "vcs", "git://notes")],
    tools=[use("git", fixed="src")],
)


def delivered(registry: Registry, who: AgentObject = DEV, *, deliver_work: bool = True) -> str:
    return render(bindings_document(who, registry.resolve(who.meta.key), deliver_work=deliver_work))


# --------------------------------------------------------------------------------------------
# The document


def test_the_delivered_document_reads_into_typed_objects() -> None:
    bindings = parse_bindings(delivered(world(DEV)))
    assert bindings.agent.key == "a/dev"
    assert bindings.work is not None
    assert bindings.work.resource == DeliveredResource(
        uri="github-issue://o/p/1",
        type="github-issue",
        alias="work",
        name="ticket",
        namespace="a",
        uid="uid-a-ticket",
    )
    git = bindings.tool("git")
    assert git is not None
    target, repo, fixed = git.slots
    assert (target.name, target.deferred, target.resource) == ("target", True, None)
    assert repo.state is BindingState.BOUND
    assert repo.resource is not None
    assert repo.resource.uri == "git://notes"
    assert fixed.resource is not None
    assert fixed.resource.attributes == {"k": "v"}
    assert bindings.tool("nope") is None
    assert git.slot("nope") is None


def test_the_work_binding_is_absent_while_not_held() -> None:
    bindings = parse_bindings(delivered(world(DEV), deliver_work=False))
    assert bindings.work is None
    assert [b.name for b in bindings.resources] == ["notes"]


def test_unknown_fields_from_a_newer_controller_are_ignored() -> None:
    text = delivered(world(DEV)).replace('"kind": "Bindings"', '"kind": "Bindings", "new": 1')
    assert parse_bindings(text).agent.name == "dev"


def with_hold(text: str, uid: str = "lease-uid", version: str = "42") -> str:
    """The document as a controller that sends the fencing token renders it."""
    doc = json.loads(text)
    for entry in doc["resources"]:
        if entry["name"] == "work":
            entry["hold"] = {"uid": uid, "resourceVersion": version}
    return render(doc)


def test_the_work_binding_carries_the_fencing_token_of_its_hold() -> None:
    bindings = parse_bindings(with_hold(delivered(world(DEV))))
    assert bindings.fence == Fence(uid="lease-uid", resource_version="42")
    assert bindings.work is not None
    assert bindings.work.hold == bindings.fence
    notes = bindings.binding("notes")
    assert notes is not None
    assert notes.hold is None


def test_documents_without_a_fencing_token_still_read() -> None:
    held = parse_bindings(delivered(world(DEV)))
    assert held.work is not None
    assert held.fence is None
    assert parse_bindings(delivered(world(DEV), deliver_work=False)).fence is None


def test_a_document_is_identified_by_the_digest_of_its_bytes(tmp_path: Path) -> None:
    text = with_hold(delivered(world(DEV)))
    path = tmp_path / "bindings.json"
    path.write_bytes(text.encode("utf-8").replace(b"\n", b"\r\n"))  # bytes, not text, count
    expected = "sha256:" + hashlib.sha256(path.read_bytes()).hexdigest()
    assert load_bindings(path).digest == expected
    assert parse_bindings(path.read_bytes()).digest == expected
    assert parse_bindings(text).digest == digest(text)
    watcher = BindingsWatcher(path)
    polled = watcher.poll()
    assert polled is not None
    assert polled.digest == expected


def test_the_digest_is_not_part_of_the_document() -> None:
    bindings = parse_bindings(delivered(world(DEV)))
    assert bindings.digest.startswith("sha256:")
    assert "digest" not in bindings.model_dump(by_alias=True)
    assert "digest" not in bindings.model_dump_json()
    assert Bindings.model_validate(bindings.model_dump(by_alias=True)).digest == ""
    with pytest.raises((AttributeError, ValueError)):
        bindings.digest = "sha256:other"  # type: ignore[misc]
    # A "digest" key in a document (from a newer controller, say) is not taken for the identity.
    text = delivered(world(DEV)).replace('"kind": "Bindings"', '"kind": "Bindings", "digest": "x"')
    assert parse_bindings(text).digest == digest(text)


@pytest.mark.parametrize(
    ("text", "says"),
    [
        ("{", "is not JSON"),
        ("[]", "is not a Bindery bindings document"),
        ('{"kind": "ConfigMap"}', "is not a Bindery bindings document"),
        ('{"kind": "Bindings", "apiVersion": "bindery.dev/v9"}', "has apiVersion"),
        ('{"kind": "Bindings", "apiVersion": "bindery.dev/v1alpha1"}', "at agent"),
    ],
)
def test_a_document_that_is_not_one_says_what_it_is(text: str, says: str) -> None:
    with pytest.raises(BindingsError, match=says):
        parse_bindings(text, "the file x")


def test_the_path_comes_from_the_argument_the_environment_or_the_mount(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.delenv("BINDERY_BINDINGS_FILE", raising=False)
    assert bindings_path() == Path(DEFAULT_BINDINGS_FILE)
    assert f"{builders.BINDINGS_MOUNT}/{BINDINGS_FILE}" == DEFAULT_BINDINGS_FILE
    monkeypatch.setenv("BINDERY_BINDINGS_FILE", str(tmp_path / "env.json"))
    assert bindings_path() == tmp_path / "env.json"
    assert bindings_path(tmp_path / "arg.json") == tmp_path / "arg.json"
    with pytest.raises(BindingsError, match=r"cannot read the bindings file .*env\.json"):
        load_bindings()


# --------------------------------------------------------------------------------------------
# Watching: a real directory laid out as the kubelet projects a ConfigMap volume


class KubeletVolume:
    """``..<timestamp>/bindings.json``, ``..data -> ..<timestamp>``, ``bindings.json ->
    ..data/bindings.json``; :meth:`update` swaps ``..data`` as the kubelet does."""

    def __init__(self, root: Path, text: str) -> None:
        self.root = root
        self.updates = 0
        root.mkdir(exist_ok=True)
        self._write(text)
        (root / BINDINGS_FILE).symlink_to(Path("..data") / BINDINGS_FILE)

    @property
    def file(self) -> Path:
        return self.root / BINDINGS_FILE

    def _write(self, text: str) -> None:
        self.updates += 1
        stamp = f"..2026_12_01_06_30_{self.updates:02}.{os.getpid()}"
        (self.root / stamp).mkdir()
        (self.root / stamp / BINDINGS_FILE).write_text(text)
        old = os.readlink(self.root / "..data") if (self.root / "..data").is_symlink() else None
        (self.root / "..data_tmp").symlink_to(stamp)
        os.rename(self.root / "..data_tmp", self.root / "..data")  # the atomic swap
        if old is not None:
            for child in (self.root / old).iterdir():
                child.unlink()
            (self.root / old).rmdir()

    def update(self, text: str) -> None:
        self._write(text)


def documents(n: int) -> list[str]:
    registry = world()
    texts = []
    for i in range(n):
        who = agent("a/dev", bindings=[("src", "vcs", f"git://r{i}")], tools=["git"])
        registry.upsert_agent(who)
        texts.append(delivered(registry, who))
    return texts


def test_a_kubelet_swap_is_seen_once_and_an_identical_swap_not_at_all(tmp_path: Path) -> None:
    first, second = documents(2)
    volume = KubeletVolume(tmp_path / "vol", first)
    watcher = BindingsWatcher(volume.file)
    initial = watcher.poll()
    assert initial is not None
    assert initial.binding("src") is not None
    assert watcher.poll() is None

    volume.update(second)
    changed = watcher.poll()
    assert changed is not None
    src = changed.binding("src")
    assert src is not None
    assert src.uri == "git://r1"
    assert watcher.poll() is None

    volume.update(second)  # a new directory with the same bytes: nothing new to report
    assert watcher.poll() is None
    assert volume.updates == 3


def test_a_missing_or_half_written_file_is_reported_once_it_is_whole(tmp_path: Path) -> None:
    (first,) = documents(1)
    path = tmp_path / "bindings.json"
    watcher = BindingsWatcher(path)
    assert watcher.poll() is None
    path.write_text(first[: len(first) // 2])
    assert watcher.poll() is None
    path.write_text(first)
    os.utime(path, ns=(1, 1))  # a new version even if the clock did not move
    assert watcher.poll() is not None


def test_the_blocking_iterator_and_the_callback_see_each_update(tmp_path: Path) -> None:
    texts = documents(3)
    volume = KubeletVolume(tmp_path / "vol", texts[0])
    seen: list[Bindings] = []
    stop = threading.Event()
    updated = threading.Event()

    def record(document: Bindings) -> None:
        seen.append(document)
        updated.set()

    thread = threading.Thread(
        target=BindingsWatcher(volume.file, interval=0.01).watch, args=(record, stop)
    )
    thread.start()
    try:
        for text in texts[1:]:
            assert updated.wait(5)
            updated.clear()
            volume.update(text)
        assert updated.wait(5)
    finally:
        stop.set()
        thread.join(5)
    assert not thread.is_alive()
    uris = [d.resources[0].uri for d in seen]
    assert uris == ["git://r0", "git://r1", "git://r2"]


async def test_the_asyncio_variant_sees_a_swap(tmp_path: Path) -> None:
    first, second = documents(2)
    volume = KubeletVolume(tmp_path / "vol", first)
    stop = asyncio.Event()
    seen: list[str] = []
    async for document in BindingsWatcher(volume.file, interval=0.01).achanges(stop):
        seen.append(document.resources[0].uri)
        if len(seen) == 1:
            volume.update(second)
        else:
            stop.set()
    assert seen == ["git://r0", "git://r1"]


# --------------------------------------------------------------------------------------------
# Resolving a deferred slot: the controller's rules and messages


class Objects:
    """The reads a session makes, answered from domain objects (as the API server would)."""

    def __init__(self, *objects: ResourceObject | ResourceTypeObject) -> None:
        self.objects = objects
        self.type_reads: list[str] = []

    def list_resources(self, namespace: str) -> list[dict[str, Any]]:
        return [
            {"metadata": o.meta.model_dump(), "spec": o.spec.model_dump(by_alias=True)}
            for o in self.objects
            if isinstance(o, ResourceObject) and o.meta.namespace == namespace
        ]

    def get_resource_type(self, name: str) -> dict[str, Any] | None:
        self.type_reads.append(name)
        return next(
            (
                {"metadata": {"name": name}, "spec": o.spec.model_dump(by_alias=True)}
                for o in self.objects
                if isinstance(o, ResourceTypeObject) and o.meta.name == name
            ),
            None,
        )


def session_resolver(*extra: ResourceObject | ResourceTypeObject) -> SessionResolver:
    bindings = parse_bindings(delivered(world(DEV), deliver_work=False))
    return SessionResolver(bindings, Objects(*TYPES, *RESOURCES, *extra))


def controller_says(value: str) -> tuple[BoundResource | None, str]:
    """What the controller resolves for the same value set in spec.tools[].params."""
    registry = world(DEV)
    registry.upsert_agent(
        agent("a/dev", bindings=DEV_BINDINGS, tools=[use("git", fixed="src", target=value)])
    )
    target = next(s for s in registry.resolve("a/dev").slots if s.slot == "target")
    return target.resource, target.message


DEV_BINDINGS = [("notes", "vcs", "git://notes")]  # as delivered while the work is not held


@pytest.mark.parametrize("value", ["src", "a/src", "uid-a-src", "file:///src"])
def test_a_value_naming_a_compatible_resource_resolves_as_the_controller_does(value: str) -> None:
    resource_, _ = controller_says(value)
    assert resource_ is not None
    assert session_resolver().resolve("git", "target", value) == resource_
    assert resource_.alias == "source"


@pytest.mark.parametrize(
    "value", ["ticket", "nothing-by-that-name", "git://twin", "uid-b-far", "git://notes"]
)
def test_a_refused_value_gets_the_controllers_message(value: str) -> None:
    _, message = controller_says(value)
    with pytest.raises(ResolveError) as refused:
        session_resolver().resolve("git", "target", value)
    if value == "uid-b-far":  # another namespace's uid: neither finds it, neither says it exists
        assert "names no resource" in message
    assert str(refused.value) == message
    assert message.startswith("agent a/dev, tool 'git', slot 'target': ")


def test_a_value_in_another_namespace_is_refused_before_any_read() -> None:
    resolver = session_resolver()
    with pytest.raises(ResolveError) as refused:
        resolver.resolve("git", "target", "b/far")
    assert str(refused.value) == (
        "agent a/dev, tool 'git', slot 'target': its parameter value 'b/far' names a Resource in "
        "namespace 'b', and a session resolves only Resources in its own namespace 'a'. Fix: "
        "pass the name, uid or URI of a Resource in namespace 'a', or set the value in "
        "spec.tools[].params for the controller to resolve."
    )
    assert isinstance(resolver.reader, Objects)
    assert resolver.reader.type_reads == []


def test_only_the_types_resolution_reads_are_fetched() -> None:
    resolver = session_resolver(rtype("unrelated"))
    resolver.resolve("git", "target", "src")
    assert isinstance(resolver.reader, Objects)
    assert sorted(resolver.reader.type_reads) == ["fs-directory", "git-checkout", "vcs"]


@pytest.mark.parametrize(
    ("tool_name", "slot_name", "says"),
    [
        ("nope", "target", "tool 'nope' is not in its bindings (tools: 'git')"),
        ("git", "nope", "it has no slot 'nope' (slots: 'target', 'repo', 'fixed')"),
        ("git", "repo", "it is a contextual slot, which the controller binds"),
        ("git", "fixed", "its value is set in spec.tools[].params (state Bound)"),
    ],
)
def test_only_a_deferred_parameter_slot_takes_a_value(
    tool_name: str, slot_name: str, says: str
) -> None:
    with pytest.raises(ResolveError, match=r"^agent a/dev\b") as refused:
        session_resolver().resolve(tool_name, slot_name, "src")
    assert says in str(refused.value)
