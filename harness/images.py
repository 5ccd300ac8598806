"""Container images for the real node, built here without a registry or a Docker daemon.

Three images, each a docker-archive tar cached by the content it is made from, so a warm run
only imports them into the node's containerd:

- ``localhost/bindery-pause:dev``: the pod sandbox; a static C program (``pause.c`` beside
  this file) that holds the pod's namespaces, reaps orphans and exits on SIGTERM.
- ``localhost/bindery-python:bookworm``: the Python base the project's Dockerfile builds on,
  a Debian bookworm root filesystem made by ``debootstrap`` from the mirror this machine's apt
  uses, with this machine's CA bundle (so ``pip`` inside the build trusts what the host trusts).
- ``localhost/bindery:dev``: the project's own ``Dockerfile``, built by buildah (vfs storage,
  chroot isolation) with ``PYTHON_IMAGE`` pointed at that base.

Keys: the pause image by its source; the base by its package set and the CA bundle; the
project's image by the base key and every file the Dockerfile copies (``Dockerfile``,
``pyproject.toml``, ``README.md``, ``controller/``, ``session/``).
"""

from __future__ import annotations

import fcntl
import hashlib
import io
import json
import shutil
import subprocess
import tarfile
import tempfile
import time
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import structlog

from harness.cluster import cache_root
from harness.errors import ClusterError

log = structlog.get_logger("bindery.harness.images")

HERE = Path(__file__).resolve().parent
PAUSE_SOURCE = HERE / "pause.c"

PAUSE_IMAGE = "localhost/bindery-pause:dev"
BASE_IMAGE = "localhost/bindery-python:bookworm"
PROJECT_IMAGE = "localhost/bindery:dev"

DEBIAN_SUITE = "bookworm"
BASE_PACKAGES = ("python3", "python3-venv", "python3-pip", "python-is-python3", "ca-certificates")
HOST_CA_BUNDLE = Path("/etc/ssl/certs/ca-certificates.crt")
PROJECT_INPUTS = ("Dockerfile", "pyproject.toml", "README.md", "controller", "session")


@dataclass(frozen=True)
class Image:
    """A built image: its reference and the docker-archive that carries it."""

    ref: str
    archive: Path


def _digest(*parts: bytes) -> str:
    h = hashlib.sha256()
    for part in parts:
        h.update(hashlib.sha256(part).digest())
    return h.hexdigest()[:16]


def _files(root: Path, entries: Iterable[str]) -> Iterator[Path]:
    for entry in entries:
        path = root / entry
        if path.is_dir():
            yield from sorted(
                p for p in path.rglob("*") if p.is_file() and "__pycache__" not in p.parts
            )
        elif path.is_file():
            yield path


def _run(argv: list[str], what: str) -> None:
    proc = subprocess.run(argv, capture_output=True, text=True, check=False)
    if proc.returncode != 0:
        tail = "\n".join((proc.stdout + proc.stderr).strip().splitlines()[-30:])
        raise ClusterError(f"{what} failed (exit {proc.returncode}): {' '.join(argv)}\n{tail}")


def _require(*commands: str) -> None:
    missing = [c for c in commands if shutil.which(c) is None]
    if missing:
        raise ClusterError(
            f"building the real node's images needs {', '.join(missing)} on PATH; on Debian: "
            "apt-get install debootstrap buildah gcc libc6-dev"
        )


@contextmanager
def _locked(path: Path) -> Iterator[None]:
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        yield


def write_docker_archive(out: Path, ref: str, layer: Path, config: dict[str, object]) -> None:
    """A one-layer image as a docker-archive (``manifest.json``, config, ``layer.tar``)."""
    diff = hashlib.sha256(layer.read_bytes()).hexdigest()
    body = json.dumps(
        {
            "architecture": "amd64",
            "os": "linux",
            "config": config,
            "rootfs": {"type": "layers", "diff_ids": [f"sha256:{diff}"]},
            "history": [{"created_by": "bindery harness"}],
        },
        sort_keys=True,
    ).encode()
    config_name = f"{hashlib.sha256(body).hexdigest()}.json"
    layers = [f"{diff}/layer.tar"]
    manifest = json.dumps([{"Config": config_name, "RepoTags": [ref], "Layers": layers}])
    tmp = out.with_suffix(".tmp")
    with tarfile.open(tmp, "w") as tar:
        for name, data in ((config_name, body), ("manifest.json", manifest.encode())):
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
        tar.add(layer, arcname=f"{diff}/layer.tar")
    tmp.replace(out)


def _apt_mirror() -> str:
    """The Debian mirror this machine's apt uses (deb822 or one-line sources)."""
    sources = Path("/etc/apt/sources.list.d/debian.sources")
    if sources.exists():
        for line in sources.read_text().splitlines():
            if line.startswith("URIs:"):
                return line.split()[1]
    legacy = Path("/etc/apt/sources.list")
    if legacy.exists():
        for line in legacy.read_text().splitlines():
            parts = line.split()
            if len(parts) >= 3 and parts[0] == "deb":
                return parts[2] if parts[1].startswith("[") else parts[1]
    raise ClusterError(
        "no Debian mirror found in /etc/apt/sources.list.d/debian.sources or "
        "/etc/apt/sources.list: debootstrap needs one to make the Python base image"
    )


def images_dir() -> Path:
    return cache_root() / "images"


def pause_image() -> Image:
    key = _digest(PAUSE_SOURCE.read_bytes())
    out = images_dir() / f"pause-{key}.tar"
    with _locked(images_dir() / ".pause.lock"):
        if not out.exists():
            _require("gcc")
            with tempfile.TemporaryDirectory(prefix="bindery-pause-") as tmp:
                root = Path(tmp) / "root"
                root.mkdir()
                binary = root / "pause"
                _run(["gcc", "-static", "-Os", "-s", "-o", str(binary), str(PAUSE_SOURCE)], "gcc")
                layer = Path(tmp) / "layer.tar"
                _tar(root, layer)
                config: dict[str, object] = {"Entrypoint": ["/pause"], "User": "65535:65535"}
                write_docker_archive(out, PAUSE_IMAGE, layer, config)
    return Image(PAUSE_IMAGE, out)


def _tar(root: Path, out: Path) -> None:
    _run(["tar", "--numeric-owner", "--sort=name", "-C", str(root), "-cf", str(out), "."], "tar")


def base_image() -> Image:
    ca = HOST_CA_BUNDLE.read_bytes() if HOST_CA_BUNDLE.exists() else b""
    key = _digest(DEBIAN_SUITE.encode(), " ".join(BASE_PACKAGES).encode(), ca)
    out = images_dir() / f"python-{DEBIAN_SUITE}-{key}.tar"
    with _locked(images_dir() / ".base.lock"):
        if out.exists():
            return Image(BASE_IMAGE, out)
        _require("debootstrap", "tar")
        start = time.monotonic()
        with tempfile.TemporaryDirectory(prefix="bindery-base-", dir=images_dir()) as tmp:
            root = Path(tmp) / "rootfs"
            _run(
                [
                    "debootstrap",
                    "--variant=minbase",
                    f"--include={','.join(BASE_PACKAGES)}",
                    DEBIAN_SUITE,
                    str(root),
                    _apt_mirror(),
                ],
                "debootstrap of the Python base image",
            )
            for cache in ("var/cache/apt/archives", "var/lib/apt/lists"):
                for entry in (root / cache).glob("*"):
                    if entry.is_file():
                        entry.unlink()
            if ca:
                (root / "etc/ssl/certs/ca-certificates.crt").write_bytes(ca)
            layer = Path(tmp) / "layer.tar"
            _tar(root, layer)
            write_docker_archive(
                out,
                BASE_IMAGE,
                layer,
                {
                    "Env": [
                        "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
                        "LANG=C.UTF-8",
                    ],
                    "Cmd": ["python3"],
                },
            )
        log.info("built the Python base image", seconds=round(time.monotonic() - start, 1))
    return Image(BASE_IMAGE, out)


def release_source(commit: str, repo: Path) -> Path:
    """The repository's tree at ``commit`` (``git archive``), extracted once into the cache and
    kept by the commit's full id: an earlier release's chart, CRDs and Dockerfile."""
    proc = subprocess.run(
        ["git", "-C", str(repo), "rev-parse", "--verify", f"{commit}^{{commit}}"],
        capture_output=True, text=True, check=False,
    )  # fmt: skip
    if proc.returncode != 0:
        raise ClusterError(
            f"commit {commit} is not in the repository at {repo} ({proc.stderr.strip()}): a "
            "shallow clone lacks it; fetch the history (git fetch --unshallow)"
        )
    full = proc.stdout.strip()
    releases = cache_root() / "releases"
    out = releases / full
    with _locked(releases / ".lock"):
        if not (out / ".complete").exists():
            with tempfile.TemporaryDirectory(prefix="bindery-release-", dir=releases) as tmp:
                archive = Path(tmp) / "tree.tar"
                _run(["git", "-C", str(repo), "archive", "-o", str(archive), full], "git archive")
                tree = Path(tmp) / "tree"
                tree.mkdir()
                _run(["tar", "-C", str(tree), "-xf", str(archive)], "extracting the release")
                (tree / ".complete").write_text(full)
                shutil.rmtree(out, ignore_errors=True)
                tree.rename(out)
    return out


def project_image(source: Path, ref: str = PROJECT_IMAGE) -> Image:
    """The project's image from its Dockerfile in ``source`` (a checkout, or an earlier
    release's tree from :func:`release_source`), tagged ``ref``."""
    base = base_image()
    files = list(_files(source, PROJECT_INPUTS))
    if not (source / "Dockerfile").is_file():
        raise ClusterError(f"no Dockerfile in {source}: the project image is built from a checkout")
    h = hashlib.sha256(base.archive.name.encode())
    if ref != PROJECT_IMAGE:
        h.update(ref.encode() + b"\0")
    for path in files:
        h.update(str(path.relative_to(source)).encode() + b"\0" + path.read_bytes() + b"\0")
    out = images_dir() / f"bindery-{h.hexdigest()[:16]}.tar"
    with _locked(images_dir() / ".project.lock"):
        if out.exists():
            return Image(ref, out)
        _require("buildah")
        start = time.monotonic()
        store = images_dir()
        storage = [
            *("--root", str(store / "buildah"), "--runroot", str(store / "buildah-run")),
            *("--storage-driver", "vfs"),
        ]
        base_ref = f"docker-archive:{base.archive}"
        _run(["buildah", *storage, "pull", "-q", base_ref], "importing the base image")
        with tempfile.TemporaryDirectory(prefix="bindery-ctx-") as tmp:
            ctx = Path(tmp)
            for path in files:
                dest = ctx / path.relative_to(source)
                dest.parent.mkdir(parents=True, exist_ok=True)
                shutil.copy2(path, dest)
            _run(
                [
                    "buildah",
                    *storage,
                    "bud",
                    "--isolation",
                    "chroot",
                    "--layers=false",
                    "--build-arg",
                    f"PYTHON_IMAGE={BASE_IMAGE}",
                    "-t",
                    ref,
                    str(ctx),
                ],
                "building the project image from its Dockerfile",
            )
        tmp_out = out.with_suffix(".tmp")
        tmp_out.unlink(missing_ok=True)
        target = f"docker-archive:{tmp_out}:{ref}"
        _run(["buildah", *storage, "push", "-q", ref, target], "exporting the image")
        tmp_out.replace(out)
        log.info("built the project image", ref=ref, seconds=round(time.monotonic() - start, 1))
    return Image(ref, out)
