"""The session library's wire: one model per boundary object, used by both sides.

The controller builds the bindings document as :class:`bindery_session.Bindings` and renders it;
the session validates the same model from those bytes; the sidecar reads the acknowledgement
record the library writes. The public surface of ``bindery_session`` is pinned here.
"""

from __future__ import annotations

import asyncio
import enum
import json
import sys
import threading
import time
from pathlib import Path
from typing import Any

import bindery_session
import pytest
from bindery_session import (
    AckRecord,
    Bindings,
    BindingState,
    BindingsWatcher,
    acknowledge,
    announce,
    parse_bindings,
    refuse,
)
from bindery_session import wire as session_wire
from bindery_session._inotify import open_watch
from bindery_session.files import write_atomically
from bindery_session.testing import FakeBindings
from bindery_session.wire import Access, BindingMode
from hypothesis import given, settings
from hypothesis import strategies as st

from controller.domain import acknowledgement as ack
from controller.domain import delivery, models, results
from controller.domain.models import API_VERSION, WORK_ROLE
from controller.domain.work import Hold
from controller.k8s import builders
from controller.sidecar import Sidecar
from controller.sidecar.apiserver import InCluster
from tests.unit.test_delivery import AGENT, SRC, URI, resolution
from tests.unit.test_session import KubeletVolume, documents

PUBLIC = [
    "APPLIED",
    "DEFAULT_ACK_FILE",
    "DEFAULT_BINDINGS_FILE",
    "REFUSED",
    "STARTED",
    "Access",
    "AckRecord",
    "AcknowledgeError",
    "AgentRef",
    "BindingMode",
    "BindingState",
    "Bindings",
    "BindingsError",
    "BindingsWatcher",
    "DeliveredBinding",
    "DeliveredResource",
    "DeliveredSlot",
    "DeliveredTool",
    "Fence",
    "SessionError",
    "ack_path",
    "acknowledge",
    "announce",
    "bindings_path",
    "digest",
    "load_bindings",
    "parse_bindings",
    "refuse",
]


def test_the_public_surface_is_curated() -> None:
    assert bindery_session.__all__ == PUBLIC
    public = {n for n in dir(bindery_session) if not n.startswith("_")}
    # Only the listed names and the public modules are visible; the rest lives in _modules.
    assert public - set(PUBLIC) <= {"files", "testing", "wire"}
    for name in PUBLIC:
        assert getattr(bindery_session, name) is not None


def test_errors_branch_from_one_root() -> None:
    assert issubclass(bindery_session.BindingsError, bindery_session.SessionError)
    assert issubclass(bindery_session.AcknowledgeError, bindery_session.SessionError)


# --------------------------------------------------------------------------------------------
# One model, both directions


FENCE = Hold(uri=URI, holder="team/alice", holder_uid="u", uid="lease-uid", resource_version="7")


def test_the_controller_renders_the_model_the_session_reads_back_byte_for_byte() -> None:
    built = delivery.delivered_bindings(AGENT, resolution(), deliver_work=True, fence=FENCE)
    text = built.render()
    assert text == delivery.render(
        delivery.bindings_document(AGENT, resolution(), deliver_work=True, fence=FENCE)
    )
    read = parse_bindings(text)
    assert read.model_dump() == built.model_dump()  # the same values (read also has a digest)
    assert read.render() == text
    assert read.digest == ack.digest(text) == session_wire.digest(text.encode("utf-8"))
    assert read.fence is not None
    assert (read.fence.uid, read.fence.resource_version) == ("lease-uid", "7")


def test_without_work_is_the_document_rendered_without_the_work() -> None:
    held = delivery.delivered_bindings(AGENT, resolution(), deliver_work=True)
    not_held = delivery.delivered_bindings(AGENT, resolution(), deliver_work=False)
    assert held.work_uris == {URI}
    assert held.without_work() == not_held
    assert held.without_work().work_uris == set()
    assert not_held.without_work() is not_held
    assert delivery.without_work(held.render(), "") == not_held.render()
    assert delivery.delivered_work_uris(held.render()) == {URI}
    # Other bindings and their slots stay.
    src = not_held.binding("source")
    assert src is not None
    assert src.uri == SRC


def test_the_domain_speaks_the_wire_enumerations() -> None:
    """One definition of each: what resolution produces is what the document carries."""
    assert results.SlotResult.model_fields["state"].annotation in (BindingState, "BindingState")
    assert models.ResourceSlot.model_fields["access"].annotation in (Access, "Access")
    assert bindery_session.BindingMode is BindingMode
    assert bindery_session.Access is Access
    assert (session_wire.API_VERSION, session_wire.WORK_ROLE) == (API_VERSION, WORK_ROLE)
    assert f"{BindingState.DEFERRED}" == str(BindingState.DEFERRED) == "Deferred"


def test_paths_and_states_are_the_session_librarys() -> None:
    assert builders.BINDINGS_MOUNT == session_wire.BINDINGS_MOUNT
    assert builders.BINDINGS_ENV == session_wire.BINDINGS_ENV
    assert delivery.BINDINGS_FILE == session_wire.BINDINGS_FILE
    assert (ack.ACK_MOUNT, ack.ACK_FILE, ack.ACK_ENV) == (
        session_wire.ACK_MOUNT,
        session_wire.ACK_FILE,
        session_wire.ACK_ENV,
    )
    assert (ack.STARTED, ack.APPLIED, ack.REFUSED) == ("Started", "Applied", "Refused")
    assert ack.digest is session_wire.digest


def test_an_ack_record_reads_back_what_it_wrote_and_nothing_else() -> None:
    record = AckRecord(digest="sha256:x", state="Refused", message="no", at="2026-12-01T00:00:00Z")
    line = record.line()
    assert list(json.loads(line)) == ["digest", "state", "message", "at"]
    assert AckRecord.read(line) == record
    for not_one in ("", "{", "[]", '{"digest": "x", "state": "Later"}', '{"state": "Applied"}'):
        assert AckRecord.read(not_one) is None


def test_the_atomic_writer_leaves_a_readable_file_and_no_temp(tmp_path: Path) -> None:
    target = tmp_path / "f.json"
    write_atomically(target, b"one")
    write_atomically(target, b"two")
    assert target.read_bytes() == b"two"
    assert target.stat().st_mode & 0o777 == 0o644  # the other side may run as another user
    assert [p.name for p in tmp_path.iterdir()] == ["f.json"]


# --------------------------------------------------------------------------------------------
# The sidecar reads what the library writes (its file side; the API side runs in integration)


def sidecar(fake: FakeBindings, seed: Path) -> Sidecar:
    api = InCluster(host="", port=0, token_file=Path(), ca_file=Path())
    return Sidecar(
        api=api,
        namespace="team",
        config_map="alice-bindings",
        lease="bindery-ack-alice",
        pod_name="alice-0",
        pod_uid="pod-uid",
        seed=seed,
        out=fake.bindings_file,
        ack_file=fake.ack_file,
    )


def test_the_sidecar_delivers_and_takes_in_the_runtimes_acknowledgement(tmp_path: Path) -> None:
    text = delivery.delivered_bindings(AGENT, resolution(), deliver_work=True).render()
    seed = tmp_path / "seed.json"
    seed.write_text(text)
    with FakeBindings(tmp_path / "pod") as fake:
        car = sidecar(fake, seed)
        car.seed_once()
        assert fake.bindings_file.read_text() == text
        document = bindery_session.load_bindings(fake.bindings_file)
        announce(fake.ack_file)
        car.read_ack()
        assert car._record["acknowledges"] == "true"
        acknowledge(document, fake.ack_file)
        car.read_ack()
        assert car._record["applied"] == car._record["delivered"] == ack.digest(text)
        refuse(document, "unknown tool", fake.ack_file)
        car.read_ack()
        assert (car._record["refused"], car._record["refusal"]) == (
            ack.digest(text),
            "unknown tool",
        )


# --------------------------------------------------------------------------------------------
# The fake bindings source


def test_the_fake_delivers_what_a_watcher_reads_and_reads_its_acknowledgement() -> None:
    with FakeBindings(agent="team/alice") as fake:
        sent = fake.deliver(resources={"work": "github-issue://o/p/1", "src": "file:///src"})
        assert sent.agent.key == "team/alice"
        assert sent.digest == session_wire.digest(fake.bindings_file.read_bytes())
        watcher = BindingsWatcher(fake.bindings_file, acknowledge=True, ack_path=fake.ack_file)
        got = watcher.poll()
        assert got == sent
        assert got is not None
        assert got.digest == sent.digest
        assert fake.wait_for("", state="Started").state == "Started"
        acknowledge(got, fake.ack_file)
        assert fake.wait_for(sent.digest).state == "Applied"
        withdrawn = fake.deliver(sent.without_work())
        assert withdrawn.work is None
        assert watcher.poll() == withdrawn
        with pytest.raises(TimeoutError, match="did not write Applied"):
            fake.wait_for(withdrawn.digest, timeout=0.05)
    assert not fake.directory.exists()


def test_the_fake_sets_the_environment_a_session_pod_sets(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    fake = FakeBindings(tmp_path, agent="alice")
    for name, value in fake.environ().items():
        monkeypatch.setenv(name, value)
    sent = fake.deliver(tools={"git": {"repo": "git://r"}})
    assert bindery_session.load_bindings() == sent
    git = sent.tool("git")
    assert git is not None
    assert git.slots[0].resource is not None
    assert git.slots[0].resource.uri == "git://r"
    announce()
    record = fake.acknowledgement()
    assert record is not None
    assert record.state == "Started"
    fake.close()
    assert tmp_path.exists()  # a directory it was given is not its own to remove


def test_a_document_built_by_hand_renders_canonically() -> None:
    fake = FakeBindings()
    try:
        document = fake.document({"work": "x:1"})
        assert isinstance(document, Bindings)
        assert document.render() == session_wire.render(json.loads(document.render()))
        assert document.digest == ""
    finally:
        fake.close()


# --------------------------------------------------------------------------------------------
# Noticing a replaced document: a directory watch, polling as the fallback

SLOW = 30.0
"""An interval no test waits out: a document seen sooner was seen through the directory watch."""


def watch_in_thread(watcher: BindingsWatcher) -> tuple[list[Bindings], threading.Event, Any]:
    seen: list[Bindings] = []
    changed = threading.Event()
    stop = threading.Event()

    def record(document: Bindings) -> None:
        seen.append(document)
        changed.set()

    thread = threading.Thread(target=watcher.watch, args=(record, stop), daemon=True)
    thread.start()
    assert changed.wait(5), "the current document is reported first"
    changed.clear()

    def finish() -> None:
        stop.set()
        thread.join(5)
        assert not thread.is_alive(), "a set stop ends the watch, whatever the interval"

    return seen, changed, finish


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="inotify is Linux's")
def test_a_renamed_document_is_noticed_through_the_directory_watch(tmp_path: Path) -> None:
    assert open_watch(tmp_path) is not None
    with FakeBindings(tmp_path) as fake:
        fake.deliver(resources={"src": "git://r0"})
        seen, changed, finish = watch_in_thread(BindingsWatcher(fake.bindings_file, interval=SLOW))
        try:
            for n in (1, 2):
                fake.deliver(resources={"src": f"git://r{n}"})
                assert changed.wait(5)
                changed.clear()
        finally:
            finish()
    assert [d.resources[0].uri for d in seen] == ["git://r0", "git://r1", "git://r2"]


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="inotify is Linux's")
def test_a_kubelet_swap_is_noticed_through_the_directory_watch(tmp_path: Path) -> None:
    first, second = documents(2)
    volume = KubeletVolume(tmp_path / "vol", first)
    seen, changed, finish = watch_in_thread(BindingsWatcher(volume.file, interval=SLOW))
    try:
        volume.update(second)
        assert changed.wait(5)
    finally:
        finish()
    assert [d.resources[0].uri for d in seen] == ["git://r0", "git://r1"]


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="inotify is Linux's")
async def test_the_asyncio_variant_is_woken_by_the_directory_watch(tmp_path: Path) -> None:
    first, second = documents(2)
    volume = KubeletVolume(tmp_path / "vol", first)
    stop = asyncio.Event()
    seen: list[str] = []

    async def follow() -> None:
        async for document in BindingsWatcher(volume.file, interval=SLOW).achanges(stop):
            seen.append(document.resources[0].uri)
            if len(seen) == 1:
                volume.update(second)
            else:
                stop.set()

    await asyncio.wait_for(follow(), 5)
    assert seen == ["git://r0", "git://r1"]


def test_polling_is_the_fallback(tmp_path: Path) -> None:
    with FakeBindings(tmp_path) as fake:
        fake.deliver(resources={"src": "git://r0"})
        watcher = BindingsWatcher(fake.bindings_file, interval=0.01, notify=False)
        seen, changed, finish = watch_in_thread(watcher)
        try:
            fake.deliver(resources={"src": "git://r1"})
            assert changed.wait(5)
        finally:
            finish()
    assert [d.resources[0].uri for d in seen] == ["git://r0", "git://r1"]


def test_a_missing_directory_is_polled_until_it_appears(tmp_path: Path) -> None:
    later = tmp_path / "later"
    assert open_watch(later) is None
    with FakeBindings(later) as fake:  # makes the directory after the failed watch
        fake.deliver(resources={"src": "git://r0"})
        assert BindingsWatcher(fake.bindings_file).poll() is not None


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="inotify is Linux's")
async def test_a_change_while_the_consumer_works_does_not_spin_the_event_loop(
    tmp_path: Path,
) -> None:
    first, second, third = documents(3)
    volume = KubeletVolume(tmp_path / "vol", first)
    stop = asyncio.Event()
    seen: list[str] = []
    busy = 0.0
    async for document in BindingsWatcher(volume.file, interval=SLOW).achanges(stop):
        seen.append(document.resources[0].uri)
        if len(seen) == 1:
            volume.update(second)  # pending while the body below awaits
            cpu = time.process_time()
            await asyncio.sleep(0.3)
            busy = time.process_time() - cpu
            volume.update(third)
        elif document.resources[0].uri == "git://r2":  # r1 may have been replaced already
            stop.set()
    assert seen[-1] == "git://r2"
    assert busy < 0.15, f"the event loop used {busy:.2f} s of CPU in 0.3 s while idle"


# The canonical text, byte for byte: json.dumps(indent=2, sort_keys=True, ensure_ascii=False).

_JSON_SCALARS = (
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**80), max_value=2**80)
    | st.floats(allow_nan=True, allow_infinity=True)
    | st.text(st.characters(blacklist_categories=()), max_size=12)  # surrogates and controls too
)
_JSON_VALUES = st.recursive(
    _JSON_SCALARS,
    lambda inner: (
        st.lists(inner, max_size=4)
        | st.dictionaries(st.text(max_size=6), inner, max_size=4)
        | st.tuples(inner, inner)
    ),
    max_leaves=30,
)


def _reference(value: Any) -> str:
    return json.dumps(value, indent=2, sort_keys=True, ensure_ascii=False) + "\n"


@given(st.dictionaries(st.text(max_size=8), _JSON_VALUES, max_size=6))
@settings(max_examples=400, deadline=None)
def test_render_writes_exactly_what_json_dumps_writes(document: dict[str, Any]) -> None:
    assert session_wire.render(document) == _reference(document)


class _Color(enum.StrEnum):
    RED = "red"


class _Level(enum.IntEnum):
    HIGH = 3


def test_render_writes_subclasses_and_odd_keys_as_json_dumps_does() -> None:
    """str and int subclasses as their values; a non-string key (left to json.dumps, which
    writes it as a string); a value outside JSON raises as json.dumps raises."""
    documents: list[dict[str, Any]] = [
        {"color": _Color.RED, "level": _Level.HIGH, "flag": True, "ratio": 1e16},
        {"nested": {"b": [], "a": {}, "c": [{}, []]}},
        {"keys": {2: "two", 1: "one"}},
    ]
    for document in documents:
        assert session_wire.render(document) == _reference(document)
    with pytest.raises(TypeError, match="set is not JSON serializable"):
        session_wire.render({"bad": {1, 2}})
