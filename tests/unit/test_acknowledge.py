"""Acknowledging bindings documents from the session: the file the delivery sidecar reads, the
watcher acknowledging for the runtime, and ``bindery ack`` (real files under tmp_path)."""

from __future__ import annotations

import hashlib
import json
import os
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from controller.domain.acknowledgement import (
    ACK_ENV,
    ACK_FILE,
    ACK_MOUNT,
    APPLIED,
    REFUSED,
    STARTED,
    seconds_since,
)
from controller.session import (
    DEFAULT_ACK_FILE,
    AcknowledgeError,
    Bindings,
    ack_path,
    acknowledge,
    announce,
    load_bindings,
    refuse,
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
