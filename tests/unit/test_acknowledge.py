"""Acknowledging bindings documents from the session: the file the delivery sidecar reads, the
watcher acknowledging for the runtime, and ``bindery ack`` (real files under tmp_path)."""

from __future__ import annotations

import asyncio
import hashlib
import json
import os
import threading
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from bindery_session import (
    DEFAULT_ACK_FILE,
    AcknowledgeError,
    Bindings,
    BindingsWatcher,
    ack_path,
    acknowledge,
    announce,
    load_bindings,
    refuse,
)

from controller.cli.exits import Exit
from controller.cli.main import main
from controller.domain.acknowledgement import (
    ACK_ENV,
    ACK_FILE,
    ACK_MOUNT,
    APPLIED,
    REFUSED,
    STARTED,
    seconds_since,
)

AGENT = {"namespace": "a", "name": "dev"}


def document(n: int) -> str:
    """A minimal bindings document, the n-th of a series (each with other bytes)."""
    return (
        json.dumps(
            {
                "apiVersion": "bindery.dev/v1alpha1",
                "kind": "Bindings",
                "agent": AGENT,
                "resources": [
                    {"name": "src", "tag": "vcs", "uri": f"git://r{n}", "state": "Bound"}
                ],
                "tools": [],
            },
            indent=2,
            sort_keys=True,
        )
        + "\n"
    )


def deliver(path: Path, text: str) -> None:
    """Replace the bindings file as the delivery sidecar does: temp file, then rename."""
    temp = path.with_name(f".{path.name}.tmp")
    temp.write_text(text)
    os.replace(temp, path)


def sha(text: str) -> str:
    return "sha256:" + hashlib.sha256(text.encode()).hexdigest()


def read_ack(path: Path) -> dict[str, Any]:
    record: dict[str, Any] = json.loads(path.read_text())
    return record


@pytest.fixture
def bindings_file(tmp_path: Path) -> Path:
    path = tmp_path / "bindings" / "bindings.json"
    path.parent.mkdir()
    deliver(path, document(0))
    return path


@pytest.fixture
def ack_file(tmp_path: Path) -> Path:
    path = tmp_path / "ack" / ACK_FILE
    path.parent.mkdir()
    return path


# --------------------------------------------------------------------------------------------
# The acknowledgement file


def test_the_path_comes_from_the_argument_the_environment_or_the_mount(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.delenv(ACK_ENV, raising=False)
    assert ack_path() == Path(DEFAULT_ACK_FILE) == Path(ACK_MOUNT) / ACK_FILE
    monkeypatch.setenv(ACK_ENV, str(tmp_path / "env.json"))
    assert ack_path() == tmp_path / "env.json"
    assert ack_path(tmp_path / "arg.json") == tmp_path / "arg.json"


def test_each_state_writes_the_exact_record(bindings_file: Path, ack_file: Path) -> None:
    bindings = load_bindings(bindings_file)
    expected = "sha256:" + hashlib.sha256(bindings_file.read_bytes()).hexdigest()
    assert bindings.digest == expected

    assert announce(ack_file) == ack_file
    record = read_ack(ack_file)
    assert list(record) == ["digest", "state", "message", "at"]
    assert {k: record[k] for k in ("digest", "state", "message")} == {
        "digest": "",
        "state": STARTED,
        "message": "",
    }

    acknowledge(bindings, ack_file)
    record = read_ack(ack_file)
    assert (record["digest"], record["state"], record["message"]) == (expected, APPLIED, "")

    refuse(bindings, "unknown tool git", ack_file)
    record = read_ack(ack_file)
    assert (record["digest"], record["state"], record["message"]) == (
        expected,
        REFUSED,
        "unknown tool git",
    )
    # RFC 3339 in UTC, readable by the controller's own parser.
    at = record["at"]
    assert at.endswith("Z")
    stamp = datetime.fromisoformat(at.replace("Z", "+00:00"))
    assert stamp.utcoffset() is not None
    assert not stamp.utcoffset()
    assert seconds_since(at, datetime.now(UTC)) < 60


def test_the_environment_names_the_file(
    monkeypatch: pytest.MonkeyPatch, bindings_file: Path, ack_file: Path
) -> None:
    monkeypatch.setenv(ACK_ENV, str(ack_file))
    acknowledge(load_bindings(bindings_file))
    assert read_ack(ack_file)["state"] == APPLIED


def test_a_write_replaces_the_file_whole_by_rename(bindings_file: Path, ack_file: Path) -> None:
    bindings = load_bindings(bindings_file)
    announce(ack_file)
    before = ack_file.read_bytes()
    with ack_file.open("rb") as reader:  # a reader that opened the old file...
        old_inode = os.fstat(reader.fileno()).st_ino
        acknowledge(bindings, ack_file)
        assert reader.read() == before  # ...still reads it whole: it was never written in place
    assert os.stat(ack_file).st_ino != old_inode  # the path names a new file
    assert read_ack(ack_file)["state"] == APPLIED
    assert sorted(p.name for p in ack_file.parent.iterdir()) == [ACK_FILE]  # no temp file left


def test_a_missing_directory_says_where_the_pod_mounts_it(tmp_path: Path) -> None:
    with pytest.raises(AcknowledgeError) as raised:
        announce(tmp_path / "nowhere" / ACK_FILE)
    message = str(raised.value)
    assert str(tmp_path / "nowhere") in message
    assert ACK_MOUNT in message
    assert ACK_ENV in message


def test_a_failed_write_leaves_no_temp_file(tmp_path: Path, bindings_file: Path) -> None:
    target = tmp_path / "ack" / ACK_FILE
    target.mkdir(parents=True)  # a directory where the file should be: the rename fails
    with pytest.raises(AcknowledgeError, match=r"cannot write the ack[a-z]* file .*ack\.json"):
        acknowledge(load_bindings(bindings_file), target)
    assert [p.name for p in target.parent.iterdir()] == [ACK_FILE]


def test_a_refusal_needs_a_reason(bindings_file: Path, ack_file: Path) -> None:
    bindings = load_bindings(bindings_file)
    for reason in ("", "  "):
        with pytest.raises(AcknowledgeError, match="needs a reason"):
            refuse(bindings, reason, ack_file)
    assert not ack_file.exists()


def test_a_document_without_a_digest_cannot_be_acknowledged(ack_file: Path) -> None:
    built = Bindings.model_validate(json.loads(document(0)))
    assert built.digest == ""
    with pytest.raises(AcknowledgeError, match="load it with load_bindings"):
        acknowledge(built, ack_file)
    with pytest.raises(AcknowledgeError, match="load it with load_bindings"):
        refuse(built, "no", ack_file)
    assert not ack_file.exists()


# --------------------------------------------------------------------------------------------
# The watcher acknowledging for the runtime


def test_the_watcher_announces_before_its_first_read(tmp_path: Path, ack_file: Path) -> None:
    path = tmp_path / "bindings.json"  # not delivered yet
    watcher = BindingsWatcher(path, acknowledge=True, ack_path=ack_file)
    assert not ack_file.exists()  # constructing it writes nothing
    assert watcher.poll() is None
    assert read_ack(ack_file)["state"] == STARTED  # announced though there was nothing to read
    announced = ack_file.stat().st_ino
    deliver(path, document(0))
    polled = watcher.poll()
    assert polled is not None
    assert ack_file.stat().st_ino == announced  # once only; poll() acknowledges nothing itself


def test_the_iterator_acknowledges_a_document_after_the_loop_body_ran(
    bindings_file: Path, ack_file: Path
) -> None:
    texts = [document(i) for i in range(3)]
    watcher = BindingsWatcher(bindings_file, interval=0.005, acknowledge=True, ack_path=ack_file)
    seen: list[tuple[str, str, str]] = []  # (document, ack state at body start, ack digest)
    stop = threading.Event()
    for bindings in watcher.changes(stop):
        i = len(seen)
        record = read_ack(ack_file)
        seen.append((bindings.digest, record["state"], record["digest"]))
        assert record["digest"] != bindings.digest  # not acknowledged while the body runs
        if i + 1 < len(texts):
            deliver(bindings_file, texts[i + 1])
        else:
            break  # leaving the loop does not acknowledge the document in hand
    assert seen == [
        (sha(texts[0]), STARTED, ""),
        (sha(texts[1]), APPLIED, sha(texts[0])),
        (sha(texts[2]), APPLIED, sha(texts[1])),
    ]
    assert read_ack(ack_file)["digest"] == sha(texts[1])


def test_the_callback_acknowledges_on_return_and_refuses_on_raise(
    bindings_file: Path, ack_file: Path
) -> None:
    watcher = BindingsWatcher(bindings_file, interval=0.005, acknowledge=True, ack_path=ack_file)
    stop = threading.Event()
    states: list[tuple[str, str, str]] = []

    def apply(bindings: Bindings) -> None:
        record = read_ack(ack_file)
        states.append((record["state"], record["digest"], record["message"]))
        if bindings.digest == sha(document(0)):
            deliver(bindings_file, document(1))
            raise ValueError("tool git is not installed")
        stop.set()  # the second document: applied once this returns

    watcher.watch(apply, stop)  # returns: the raise did not end the watch
    assert states == [
        (STARTED, "", ""),
        (REFUSED, sha(document(0)), "tool git is not installed"),
    ]
    record = read_ack(ack_file)
    assert (record["state"], record["digest"], record["message"]) == (
        APPLIED,
        sha(document(1)),
        "",
    )


def test_without_acknowledge_nothing_is_written_and_a_raise_propagates(
    bindings_file: Path, ack_file: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(ACK_ENV, str(ack_file))
    watcher = BindingsWatcher(bindings_file, interval=0.005)
    assert watcher.ack_path is None

    def apply(bindings: Bindings) -> None:
        raise ValueError("boom")

    with pytest.raises(ValueError, match="boom"):
        watcher.watch(apply)
    stop = threading.Event()
    deliver(bindings_file, document(1))
    for _ in watcher.changes(stop):
        stop.set()
    assert not ack_file.exists()


async def test_the_asyncio_iterator_acknowledges_on_the_next_pull(
    bindings_file: Path, ack_file: Path
) -> None:
    watcher = BindingsWatcher(bindings_file, interval=0.005, acknowledge=True, ack_path=ack_file)
    stop = asyncio.Event()
    seen: list[tuple[str, str]] = []
    async for bindings in watcher.achanges(stop):
        record = read_ack(ack_file)
        seen.append((record["state"], record["digest"]))
        if bindings.digest == sha(document(0)):
            deliver(bindings_file, document(1))
        else:
            stop.set()  # the loop ends by the stop: the iterator is pulled once more
    assert seen == [(STARTED, ""), (APPLIED, sha(document(0)))]
    assert read_ack(ack_file)["digest"] == sha(document(1))


def test_the_watcher_reports_a_missing_ack_directory(bindings_file: Path, tmp_path: Path) -> None:
    watcher = BindingsWatcher(bindings_file, acknowledge=True, ack_path=tmp_path / "no" / "a.json")
    with pytest.raises(AcknowledgeError, match=ACK_ENV):
        watcher.poll()


# --------------------------------------------------------------------------------------------
# bindery ack


def test_bindery_ack_acknowledges_the_current_document(
    bindings_file: Path, ack_file: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    args = ["ack", "--bindings", str(bindings_file), "--ack-file", str(ack_file)]
    assert main(args) == Exit.OK
    expected = "sha256:" + hashlib.sha256(bindings_file.read_bytes()).hexdigest()
    record = read_ack(ack_file)
    assert (record["state"], record["digest"]) == (APPLIED, expected)
    out = capsys.readouterr().out
    assert out.count("\n") == 1
    assert expected in out

    assert main([*args, "--refuse", "unknown tool git"]) == Exit.OK
    record = read_ack(ack_file)
    assert (record["state"], record["digest"], record["message"]) == (
        REFUSED,
        expected,
        "unknown tool git",
    )
    assert "unknown tool git" in capsys.readouterr().out


def test_bindery_ack_started_needs_no_bindings(
    tmp_path: Path, ack_file: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(ACK_ENV, str(ack_file))
    monkeypatch.setenv("BINDERY_BINDINGS_FILE", str(tmp_path / "none.json"))
    assert main(["ack", "--started"]) == Exit.OK
    assert read_ack(ack_file)["state"] == STARTED


def test_bindery_ack_says_what_is_wrong(
    tmp_path: Path, bindings_file: Path, ack_file: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    missing = tmp_path / "none.json"
    assert main(["ack", "--bindings", str(missing), "--ack-file", str(ack_file)]) != Exit.OK
    err = capsys.readouterr().err
    assert err.startswith("error: cannot read the bindings file")
    assert str(missing) in err
    assert "BINDERY_BINDINGS_FILE" in err

    args = ["ack", "--bindings", str(bindings_file), "--ack-file", str(ack_file)]
    assert main([*args, "--refuse", " "]) != Exit.OK
    assert "--refuse needs a reason" in capsys.readouterr().err

    nowhere = tmp_path / "nowhere" / ACK_FILE
    assert main(["ack", "--bindings", str(bindings_file), "--ack-file", str(nowhere)]) != Exit.OK
    err = capsys.readouterr().err
    assert str(nowhere.parent) in err
    assert ACK_ENV in err
    assert not ack_file.exists()
