"""The session library installs alone and works on every Python it supports (3.10 to 3.13).

``session/`` is built once into a wheel (from a copy, so the checkout stays clean); for each
interpreter, a fresh empty virtualenv gets that wheel and its dependencies from the package index
(pip's cache may serve them);
nothing comes from the project's own environment. A program run there in isolated mode shows
that neither kopf nor the Kubernetes client is importable, and that reading a document, noticing
a replacement (through the directory watch: its polling interval is never waited out) and
acknowledging work. Missing interpreters fail the test: this kind of machine has all four.
"""

from __future__ import annotations

import glob
import json
import os
import re
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

pytestmark = pytest.mark.floors

REPO = Path(__file__).resolve().parents[2]
VERSIONS = ("3.10", "3.11", "3.12", "3.13")

PROGRAM = textwrap.dedent(
    """
    import importlib.util, json, sys, threading, time

    from bindery_session import BindingsWatcher, acknowledge, load_bindings
    from bindery_session.testing import FakeBindings

    absent = {m: importlib.util.find_spec(m) is None for m in ("kopf", "kubernetes", "controller")}
    with FakeBindings(agent="team/alice") as fake:
        sent = fake.deliver(resources={"work": "github-issue://o/p/1"})
        read = load_bindings(fake.bindings_file)
        seen, changed, stop = [], threading.Event(), threading.Event()

        def record(document):
            seen.append(document)
            changed.set()

        watcher = BindingsWatcher(
            fake.bindings_file, interval=30, acknowledge=True, ack_path=fake.ack_file
        )
        thread = threading.Thread(target=watcher.watch, args=(record, stop), daemon=True)
        thread.start()
        assert changed.wait(10), "the current document is reported first"
        changed.clear()
        started = time.monotonic()
        replaced = fake.deliver(sent.without_work())
        noticed = changed.wait(10)
        latency = time.monotonic() - started
        applied = fake.wait_for(replaced.digest, timeout=10) if noticed else None
        stop.set()
        thread.join(10)
        print(json.dumps({
            "python": "%d.%d" % sys.version_info[:2],
            "absent": absent,
            "read": read.digest == sent.digest and read.work.uri == "github-issue://o/p/1",
            "noticed": noticed,
            "latency": latency,
            "work_after": [d.work is not None for d in seen],
            "applied": applied.state if applied else None,
        }))
    """
)


def interpreter(version: str) -> str:
    """The ``python3`` of ``version``: a pyenv build, else one on PATH."""
    roots = {os.environ.get("PYENV_ROOT", ""), str(Path.home() / ".pyenv"), "/root/.pyenv"}
    found = sorted(
        (
            p
            for root in roots
            if root
            for p in glob.glob(f"{root}/versions/{version}.*/bin/python3")
        ),
        key=lambda p: [int(n) for n in re.findall(r"\d+", Path(p).parents[1].name)],
    )
    if found:
        return found[-1]
    on_path = shutil.which(f"python{version}")
    if on_path:
        return on_path
    pytest.fail(
        f"no Python {version} on this machine (looked in <pyenv root>/versions/{version}.*/ and "
        f"for python{version} on PATH): install it (pyenv install {version}) so the session "
        "library is tested on every Python it declares"
    )


def clean_environment() -> dict[str, str]:
    """The environment without the project's virtualenv or import path."""
    drop = {"VIRTUAL_ENV", "PYTHONPATH", "PYTHONHOME", "PIP_FIND_LINKS", "PIP_NO_INDEX"}
    env = {k: v for k, v in os.environ.items() if k not in drop}
    venv_bin = str(Path(sys.prefix) / "bin")
    env["PATH"] = os.pathsep.join(p for p in env.get("PATH", "").split(os.pathsep) if p != venv_bin)
    return env


def run(args: list[str], env: dict[str, str], what: str) -> str:
    proc = subprocess.run(args, capture_output=True, text=True, env=env, check=False, timeout=300)
    assert proc.returncode == 0, f"{what} failed:\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}"
    return proc.stdout


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """session/ built once into a wheel (from a copy, so the checkout gets no build files)."""
    where = tmp_path_factory.mktemp("session-wheel")
    source = shutil.copytree(
        REPO / "session",
        where / "session",
        ignore=shutil.ignore_patterns("build", "*.egg-info", "__pycache__"),
    )
    python = interpreter(VERSIONS[0])
    pip = [python, "-m", "pip", "--disable-pip-version-check", "wheel", "--quiet", "--no-deps"]
    run([*pip, "--wheel-dir", str(where / "dist"), str(source)], clean_environment(), "pip wheel")
    (built,) = (where / "dist").glob("bindery_session-*.whl")
    return built


@pytest.mark.parametrize("version", VERSIONS)
def test_the_session_library_alone_reads_watches_and_acknowledges(
    version: str, wheel: Path, tmp_path: Path
) -> None:
    python = interpreter(version)
    env = clean_environment()
    venv = tmp_path / "venv"
    run([python, "-m", "venv", str(venv)], env, f"python {version} -m venv")
    py = str(venv / "bin" / "python")
    pip = [py, "-m", "pip", "--disable-pip-version-check", "install", "--quiet"]
    run([*pip, str(wheel)], env, f"installing the session library into a Python {version} venv")
    installed = run([py, "-m", "pip", "--disable-pip-version-check", "list"], env, "pip list")
    names = {line.split()[0].lower() for line in installed.splitlines()[2:] if line.strip()}
    assert "bindery-session" in names
    assert not names & {"kopf", "kubernetes", "aiohttp", "bindery"}, names

    out = run([py, "-I", "-c", PROGRAM], {**env, "HOME": str(tmp_path)}, "the session program")
    result = json.loads(out.strip().splitlines()[-1])
    assert result["python"] == version
    assert result["absent"] == {"kopf": True, "kubernetes": True, "controller": True}
    assert result["read"]
    assert result["noticed"], "the replacement was not noticed"
    assert result["latency"] < 5.0, "noticed by polling (interval 30 s), not the directory watch"
    assert result["work_after"] == [True, False]
    assert result["applied"] == "Applied"
