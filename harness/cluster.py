"""A real, local Kubernetes control plane for development and tests: no Docker, no cluster.

etcd, kube-apiserver, kube-controller-manager, kube-scheduler and a node run as child processes
with a throwaway data directory: kwok's fake node by default (pods reach Running, no process
starts: for scale tests and benchmarks), or with ``kubelet=True`` a real node (containerd, runc,
CNI and a kubelet, see :mod:`harness.node`) whose pods are real processes; the API server then
listens on the node's address instead of loopback.
The binaries are built from the Go module proxy by the harness's build script
(``harness/tools/build.sh``, or ``$BINDERY_BUILD_SCRIPT``) into a cache outside the repository
(``~/.cache/bindery``) and reused afterwards. The newest supported Kubernetes minor by default;
``k8s_version`` (or ``$BINDERY_K8S_VERSION``), e.g. ``"1.33"``, picks another one the script
builds (``build.sh --versions`` lists them).

The state of a running control plane (pids, ports, paths) lives in ``<state_dir>/state.json`` so
``python -m harness cluster down`` in another process can stop exactly what ``up`` started.
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import ssl
import subprocess
import tempfile
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import structlog

from harness import kwok_stages, node
from harness.errors import ClusterError
from harness.node import KUBERNETES_SERVICE_IP, NODE_IP
from harness.system import alive, free_port, terminate

log = structlog.get_logger("bindery.cluster")

BUILD_SCRIPT_ENV = "BINDERY_BUILD_SCRIPT"
K8S_VERSION_ENV = "BINDERY_K8S_VERSION"
"""The Kubernetes minor of the local control plane and node (e.g. ``1.33``); empty: the newest."""
SHIPPED_BUILD_SCRIPT = Path(__file__).resolve().parent / "tools" / "build.sh"
"""The build script that ships with the harness (beside this module, not the product)."""
ADMIN_TOKEN = "bindery-admin-token"  # noqa: S105 - a throwaway local cluster's admin token
KWOK_NODE = "kwok-node-0"
STORAGE_CLASS = "standard"
"""The local control plane's default StorageClass (the host-path provisioner's)."""

AUDIT_POLICY = """\
apiVersion: audit.k8s.io/v1
kind: Policy
omitStages: ["RequestReceived"]
rules:
  - level: Metadata
    verbs: ["create", "update", "patch", "delete", "deletecollection"]
  - level: None
"""


@dataclass
class ClusterState:
    """What a running local control plane consists of; persisted as ``state.json``."""

    state_dir: str
    data_dir: str
    kubeconfig: str
    server: str
    bin_dir: str
    pids: dict[str, int] = field(default_factory=dict)
    audit_log: str = ""
    node_root: str = ""
    """The real node's directory (empty without one): ``down`` stops what runs there."""
    k8s_version: str = ""
    """The API server's own version (``gitVersion`` of ``/version``), e.g. ``v1.37.2``."""

    def save(self) -> None:
        Path(self.state_dir, "state.json").write_text(json.dumps(asdict(self), indent=2))

    @classmethod
    def load(cls, state_dir: Path) -> ClusterState | None:
        path = state_dir / "state.json"
        if not path.exists():
            return None
        return cls(**json.loads(path.read_text()))


def build_script() -> Path:
    """``$BINDERY_BUILD_SCRIPT`` if set, else the build script that ships with the harness."""
    override = os.environ.get(BUILD_SCRIPT_ENV)
    return Path(override) if override else SHIPPED_BUILD_SCRIPT


def requested_k8s_version() -> str:
    """The Kubernetes minor asked for through ``$BINDERY_K8S_VERSION`` (empty: the newest)."""
    return os.environ.get(K8S_VERSION_ENV, "").strip()


def minor_of(version: str) -> str:
    """``1.33`` of ``v1.33.13``, ``1.33.2`` or ``1.33``."""
    return ".".join(version.strip().lstrip("v").split(".")[:2])


def ensure_binaries(k8s_version: str = "") -> Path:
    """Build (or reuse) the control-plane binaries of ``k8s_version`` (a minor such as ``1.33``;
    empty: ``$BINDERY_K8S_VERSION``, else the newest) and return their directory.

    ``BINDERY_BIN_DIR`` points at prebuilt binaries and skips the build.
    """
    override = os.environ.get("BINDERY_BIN_DIR")
    if override:
        return Path(override)
    if shutil.which("go") is None:
        raise ClusterError(
            "the Go toolchain is not on PATH: it builds the local control plane "
            "(etcd, kube-apiserver, kubectl...). Install Go >= 1.26, or set BINDERY_BIN_DIR "
            "to a directory that holds those binaries."
        )
    script = build_script()
    if not script.exists():
        raise ClusterError(
            f"the control-plane build script {script} is missing: set {BUILD_SCRIPT_ENV} to "
            "harness/tools/build.sh of a Bindery source checkout, or BINDERY_BIN_DIR to a "
            "directory with etcd, kube-apiserver and kubectl."
        )
    version = k8s_version or requested_k8s_version()
    argv = ["bash", str(script), *(["--k8s", version] if version else [])]
    proc = subprocess.run(argv, stdout=subprocess.PIPE, text=True, check=False)
    if proc.returncode != 0:
        raise ClusterError(
            f"building the control plane{f' of Kubernetes {version}' if version else ''} with "
            f"{script} failed (exit {proc.returncode}); its output is above. Check the Go "
            f"toolchain, access to the Go module proxy, and {K8S_VERSION_ENV} "
            f"(`bash {script} --versions` lists the minors it builds)."
        )
    return Path(proc.stdout.strip().splitlines()[-1])


def cache_root() -> Path:
    """Where built binaries and images are kept (``$BINDERY_CACHE``, else the XDG cache)."""
    explicit = os.environ.get("BINDERY_CACHE")
    if explicit:
        return Path(explicit)
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "bindery"


def check_port_free(port: int) -> None:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        try:
            s.bind(("127.0.0.1", port))
        except OSError as exc:
            raise ClusterError(
                f"port 127.0.0.1:{port} is already in use; stop what listens there "
                "or choose another port"
            ) from exc


def _openssl(*args: str) -> None:
    proc = subprocess.run(["openssl", *args], capture_output=True, text=True, check=False)
    if proc.returncode != 0:
        raise ClusterError(f"openssl {args[0]} failed: {proc.stderr.strip()}")


def sign_certificate(pki: Path, name: str, subject: str, extensions: str) -> None:
    """``<name>.key`` and ``<name>.crt`` for ``subject``, signed by the local CA."""
    key, csr, ext = pki / f"{name}.key", pki / f"{name}.csr", pki / f"{name}.ext"
    _openssl("genrsa", "-out", str(key), "2048")
    _openssl("req", "-new", "-key", str(key), "-subj", subject, "-out", str(csr))
    ext.write_text(extensions)
    _openssl(
        "x509", "-req", "-in", str(csr), "-CA", str(pki / "ca.crt"), "-CAkey", str(pki / "ca.key"),
        "-CAcreateserial", "-days", "3650", "-extfile", str(ext), "-out", str(pki / f"{name}.crt"),
    )  # fmt: skip


def make_pki(pki: Path) -> None:
    """A CA, the API server's serving certificate, and a service-account key."""
    if shutil.which("openssl") is None:
        raise ClusterError("openssl is not on PATH: it makes the local cluster's certificates")
    pki.mkdir(parents=True, exist_ok=True)
    _openssl("genrsa", "-out", str(pki / "ca.key"), "2048")
    _openssl(
        "req",
        "-x509",
        "-new",
        "-key",
        str(pki / "ca.key"),
        "-days",
        "3650",
        "-subj",
        "/CN=bindery-local-ca",
        "-out",
        str(pki / "ca.crt"),
    )
    sign_certificate(
        pki,
        "apiserver",
        "/CN=kube-apiserver",
        # The node's address and the kubernetes Service's: pods on a real node reach it there.
        "subjectAltName=IP:127.0.0.1,DNS:localhost,DNS:kubernetes.default.svc,"
        f"IP:{NODE_IP},IP:{KUBERNETES_SERVICE_IP}\nextendedKeyUsage=serverAuth\n",
    )
    _openssl("genrsa", "-out", str(pki / "sa.key"), "2048")


def write_kubeconfig(path: Path, server: str, ca: Path, user: str = "admin") -> None:
    config = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [
            {
                "name": "bindery-local",
                "cluster": {"server": server, "certificate-authority": str(ca)},
            }
        ],
        "users": [{"name": user, "user": {"token": ADMIN_TOKEN}}],
        "contexts": [
            {
                "name": "bindery-local",
                "context": {"cluster": "bindery-local", "user": user, "namespace": "default"},
            }
        ],
        "current-context": "bindery-local",
    }
    path.write_text(json.dumps(config, indent=2))


def _tail(path: Path, lines: int = 25) -> str:
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
    except OSError:
        return "(no log)"


class LocalCluster:
    """Start and stop a local control plane whose files live under ``state_dir``."""

    def __init__(
        self,
        state_dir: Path,
        *,
        audit: bool = False,
        nodes: bool = True,
        kubelet: bool = False,
        api_port: int | None = None,
        k8s_version: str = "",
    ) -> None:
        self.state_dir = state_dir
        self.k8s_version = k8s_version
        """The Kubernetes minor to run (e.g. ``1.33``); empty: ``$BINDERY_K8S_VERSION``, else
        the newest the build script builds."""
        self.audit = audit
        self.nodes = nodes
        self.kubelet = kubelet
        """A real node (containerd, runc, a kubelet) instead of kwok's fake one."""
        self.api_port = api_port
        self._procs: dict[str, subprocess.Popen[bytes]] = {}
        self.state: ClusterState | None = None

    @property
    def _state(self) -> ClusterState:
        if self.state is None:
            raise ClusterError("the local control plane has not been started")
        return self.state

    # ---------------------------------------------------------------- lifecycle

    def up(self, timeout: float = 90.0) -> ClusterState:
        existing = ClusterState.load(self.state_dir)
        if existing and alive(existing.pids.get("kube-apiserver", 0)):
            raise ClusterError(
                f"a local control plane is already running from {self.state_dir} "
                f"(server {existing.server}); run 'python -m harness cluster down' first"
            )
        bin_dir = ensure_binaries(self.k8s_version)
        cni_bin = node.preflight() if self.kubelet else None
        images = self._node_images() if self.kubelet else []
        etcd_port, api_port = free_port(), self.api_port or free_port()
        check_port_free(api_port)
        self.state_dir.mkdir(parents=True, exist_ok=True)
        base = Path("/dev/shm") if Path("/dev/shm").is_dir() else None  # noqa: S108
        data_dir = Path(tempfile.mkdtemp(prefix="bindery-cluster-", dir=base))
        server = f"https://{NODE_IP if self.kubelet else '127.0.0.1'}:{api_port}"
        kubeconfig = self.state_dir / "kubeconfig"
        self.state = ClusterState(
            state_dir=str(self.state_dir),
            data_dir=str(data_dir),
            kubeconfig=str(kubeconfig),
            server=server,
            bin_dir=str(bin_dir),
        )
        try:
            pki = data_dir / "pki"
            make_pki(pki)
            write_kubeconfig(kubeconfig, server, pki / "ca.crt")
            if self.kubelet:
                node.claim(self.state_dir, api_port)
                self._state.node_root = str(data_dir / "node")
                node.network_up(api_port)
                node.node_pki(pki, sign_certificate)
            self._start_etcd(bin_dir, data_dir, etcd_port)
            self._wait_etcd(etcd_port, deadline=time.monotonic() + timeout)
            self._start_apiserver(bin_dir, data_dir, pki, etcd_port, api_port)
            self._wait_ready(server, pki / "ca.crt", deadline=time.monotonic() + timeout)
            self._state.k8s_version = self._server_version(server, pki / "ca.crt")
            self._start_controllers(bin_dir, data_dir, pki, kubeconfig)
            if cni_bin is not None:
                self._start_node(bin_dir, pki, cni_bin, images, time.monotonic() + timeout)
        except BaseException:
            self.down()
            raise
        self._state.save()
        return self._state

    def down(self) -> None:
        """Stop every process this control plane started and remove its data directory."""
        state = self.state or ClusterState.load(self.state_dir)
        pids = dict(state.pids) if state else {}
        for name, proc in self._procs.items():
            pids.setdefault(name, proc.pid)
        if state and state.node_root:  # its containers first, while the API server still runs
            node.stop(node.NodePaths(Path(state.node_root)), pids)
        # Stop in reverse start order: controllers first, etcd last.
        for name, pid in reversed(list(pids.items())):
            terminate(pid, name)
        for proc in self._procs.values():
            with suppress(Exception):
                proc.wait(timeout=1)
        self._procs.clear()
        if state:
            shutil.rmtree(state.data_dir, ignore_errors=True)
            with suppress(FileNotFoundError):
                Path(state.state_dir, "state.json").unlink()
        self.state = None

    # ---------------------------------------------------------------- processes

    def _spawn(self, name: str, argv: list[str]) -> None:
        logs = Path(self._state.state_dir) / "logs"
        logs.mkdir(exist_ok=True)
        with open(logs / f"{name}.log", "wb") as out:
            proc = subprocess.Popen(
                argv,
                stdout=out,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                start_new_session=True,
            )
        self._procs[name] = proc
        self._state.pids[name] = proc.pid
        self._state.save()
        time.sleep(0.05)
        if proc.poll() is not None:
            raise ClusterError(
                f"{name} exited at once with code {proc.returncode}; last lines of its log "
                f"{logs / (name + '.log')}:\n{_tail(logs / (name + '.log'))}"
            )

    def _check_alive(self, name: str) -> None:
        proc = self._procs.get(name)
        if proc is not None and proc.poll() is not None:
            log_path = Path(self._state.state_dir) / "logs" / f"{name}.log"
            raise ClusterError(
                f"{name} exited with code {proc.returncode} during start-up; last lines of "
                f"{log_path}:\n{_tail(log_path)}"
            )

    def _start_etcd(self, bin_dir: Path, data_dir: Path, port: int) -> None:
        url = f"http://127.0.0.1:{port}"
        self._spawn(
            "etcd",
            [
                str(bin_dir / "etcd"),
                "--data-dir",
                str(data_dir / "etcd"),
                "--listen-client-urls",
                url,
                "--advertise-client-urls",
                url,
                "--listen-peer-urls",
                "http://127.0.0.1:0",
                "--unsafe-no-fsync",
                "--log-level",
                "warn",
                "--quota-backend-bytes",
                "8589934592",
            ],
        )

    def _wait_etcd(self, port: int, deadline: float) -> None:
        while time.monotonic() < deadline:
            self._check_alive("etcd")
            with (
                suppress(OSError),
                urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=1) as resp,
            ):
                if json.loads(resp.read()).get("health") == "true":
                    return
            time.sleep(0.1)
        raise ClusterError(f"etcd did not become healthy on 127.0.0.1:{port} in time")

    def _start_apiserver(
        self, bin_dir: Path, data_dir: Path, pki: Path, etcd_port: int, api_port: int
    ) -> None:
        tokens = data_dir / "tokens.csv"
        tokens.write_text(f'{ADMIN_TOKEN},admin,admin,"system:masters"\n')
        argv = [
            str(bin_dir / "kube-apiserver"),
            f"--etcd-servers=http://127.0.0.1:{etcd_port}",
            f"--secure-port={api_port}",
            "--bind-address=127.0.0.1",
            "--advertise-address=127.0.0.1",
            f"--tls-cert-file={pki / 'apiserver.crt'}",
            f"--tls-private-key-file={pki / 'apiserver.key'}",
            f"--client-ca-file={pki / 'ca.crt'}",
            f"--token-auth-file={tokens}",
            "--service-cluster-ip-range=10.0.0.0/24",
            "--allow-privileged=true",
            "--authorization-mode=RBAC",
            f"--service-account-issuer=https://127.0.0.1:{api_port}/",
            f"--service-account-key-file={pki / 'sa.key'}",
            f"--service-account-signing-key-file={pki / 'sa.key'}",
            f"--cert-dir={data_dir / 'apiserver-certs'}",
            "--disable-admission-plugins=ServiceAccount",
            "--enable-priority-and-fairness=false",
            "--max-requests-inflight=2000",
            "--max-mutating-requests-inflight=1000",
            # Nothing behind the `kubernetes` Service on loopback: from 1.37 on, the endpoint
            # reconciler refuses a loopback advertise address rather than publish it.
            "--endpoint-reconciler-type=none",
        ]
        if self.kubelet:
            overridden = (
                "--bind-address",
                "--advertise-address",
                "--authorization-mode",
                "--endpoint-reconciler-type",  # pods reach the API server at the node's address
            )
            argv = [a for a in argv if not a.startswith(overridden)] + node.apiserver_args(pki)
            # Real pods name their ServiceAccount: let the API server default and check it.
            argv = [a for a in argv if a != "--disable-admission-plugins=ServiceAccount"]
        if self.audit:
            policy = data_dir / "audit-policy.yaml"
            policy.write_text(AUDIT_POLICY)
            self._state.audit_log = str(Path(self._state.state_dir) / "audit.log")
            argv += [
                f"--audit-policy-file={policy}",
                f"--audit-log-path={self._state.audit_log}",
                "--audit-log-format=json",
                "--audit-log-mode=blocking",
            ]
        self._spawn("kube-apiserver", argv)

    def _wait_ready(self, server: str, ca: Path, deadline: float) -> None:
        ctx = ssl.create_default_context(cafile=str(ca))
        req = urllib.request.Request(  # noqa: S310 - our own https://127.0.0.1 server
            f"{server}/readyz", headers={"Authorization": f"Bearer {ADMIN_TOKEN}"}
        )
        last = ""
        while time.monotonic() < deadline:
            self._check_alive("kube-apiserver")
            try:
                with urllib.request.urlopen(req, context=ctx, timeout=2) as resp:  # noqa: S310
                    if resp.status == 200:
                        return
            except (OSError, urllib.error.URLError) as exc:
                last = str(exc)
            time.sleep(0.2)
        raise ClusterError(f"kube-apiserver at {server} was not ready in time (last: {last})")

    def _server_version(self, server: str, ca: Path) -> str:
        """``gitVersion`` of the API server's ``/version``; refuses another minor than asked."""
        ctx = ssl.create_default_context(cafile=str(ca))
        req = urllib.request.Request(  # noqa: S310 - our own https server
            f"{server}/version", headers={"Authorization": f"Bearer {ADMIN_TOKEN}"}
        )
        with urllib.request.urlopen(req, context=ctx, timeout=5) as resp:  # noqa: S310
            version = str(json.loads(resp.read()).get("gitVersion", ""))
        wanted = self.k8s_version or requested_k8s_version()
        if wanted and minor_of(version) != minor_of(wanted):
            raise ClusterError(
                f"asked for Kubernetes {wanted}, but the API server built in "
                f"{self._state.bin_dir} reports {version!r}: remove that directory and build again"
            )
        return version

    def _start_controllers(
        self, bin_dir: Path, data_dir: Path, pki: Path, kubeconfig: Path
    ) -> None:
        self._spawn(
            "kube-controller-manager",
            [
                str(bin_dir / "kube-controller-manager"),
                f"--kubeconfig={kubeconfig}",
                f"--service-account-private-key-file={pki / 'sa.key'}",
                f"--root-ca-file={pki / 'ca.crt'}",
                "--controllers=*",
                "--leader-elect=false",
                "--secure-port=0",
                "--use-service-account-credentials=false",
                "--concurrent-gc-syncs=10",
                "--kube-api-qps=200",
                "--kube-api-burst=400",
                # PersistentVolumes for claims of the default class: a directory on this host
                # (/tmp/hostpath_pv/<uuid>), which is the real node's host too.
                "--enable-hostpath-provisioner=true",
            ],
        )
        self._create_storage_class(kubeconfig)
        if not (self.nodes or self.kubelet):
            return
        self._spawn(
            "kube-scheduler",
            [
                str(bin_dir / "kube-scheduler"),
                f"--kubeconfig={kubeconfig}",
                "--leader-elect=false",
                "--secure-port=0",
                f"--authentication-kubeconfig={kubeconfig}",
                f"--authorization-kubeconfig={kubeconfig}",
            ],
        )
        if self.kubelet:
            return  # the real node's pods must be real processes: no fake node beside it
        self._spawn(
            "kwok",
            [
                str(bin_dir / "kwok"),
                f"--kubeconfig={kubeconfig}",
                f"--config={kwok_stages.write_config(bin_dir, data_dir)}",
                "--manage-all-nodes=false",
                "--manage-nodes-with-annotation-selector=kwok.x-k8s.io/node=fake",
                "--manage-nodes-with-label-selector=",
                "--disregard-status-with-annotation-selector=kwok.x-k8s.io/status=custom",
                "--disregard-status-with-label-selector=",
                "--node-lease-duration-seconds=40",
            ],
        )
        self._create_fake_node(kubeconfig)

    # ---------------------------------------------------------------- the real node

    @staticmethod
    def _node_images() -> list[Path]:
        """The pause image and the project's own, built (or found cached) before anything runs."""
        from harness import images  # noqa: PLC0415 - builds need debootstrap/buildah: load late
        from harness.process import source_root  # noqa: PLC0415

        return [images.pause_image().archive, images.project_image(source_root()).archive]

    def _start_node(
        self, bin_dir: Path, pki: Path, cni_bin: Path, images: list[Path], deadline: float
    ) -> None:
        from harness.images import PAUSE_IMAGE  # noqa: PLC0415

        paths = node.NodePaths(Path(self._state.node_root))
        node.kubelet_kubeconfig(paths, self._state.server, pki)
        self._spawn("containerd", node.containerd_argv(paths, cni_bin, PAUSE_IMAGE))
        node.wait_containerd(paths, deadline, lambda: self._check_alive("containerd"))
        for archive in images:
            node.import_image(paths, archive)
        self._spawn("kubelet", node.kubelet_argv(paths, bin_dir, pki))
        node.record_owner(self._state.pids["kube-apiserver"])
        kubeconfig = Path(self._state.kubeconfig)
        while time.monotonic() < deadline:
            self._check_alive("kubelet")
            got = kubectl(
                bin_dir, kubeconfig, "get", "node", node.NODE_NAME, "-o",
                "jsonpath={.status.conditions[?(@.type=='Ready')].status}", check=False,
            )  # fmt: skip
            if got.stdout.strip() == "True":
                return
            time.sleep(0.5)
        log_path = Path(self._state.state_dir) / "logs" / "kubelet.log"
        raise ClusterError(
            f"the real node {node.NODE_NAME} did not become Ready in time; last lines of "
            f"{log_path}:\n{_tail(log_path)}"
        )

    def _create_storage_class(self, kubeconfig: Path) -> None:
        """The default StorageClass ``standard``: kube-controller-manager's host-path provisioner
        (single node, no expansion), binding at once, so a claim is Bound on kwok's fake node
        too; its directories are deleted with their claims."""
        storage_class = {
            "apiVersion": "storage.k8s.io/v1",
            "kind": "StorageClass",
            "metadata": {
                "name": STORAGE_CLASS,
                "annotations": {"storageclass.kubernetes.io/is-default-class": "true"},
            },
            "provisioner": "kubernetes.io/host-path",
            "reclaimPolicy": "Delete",
            "volumeBindingMode": "Immediate",
        }
        kubectl(
            Path(self._state.bin_dir), kubeconfig, "apply", "-f", "-",
            input=json.dumps(storage_class),
        )  # fmt: skip

    def _create_fake_node(self, kubeconfig: Path) -> None:
        """A kwok-managed node that accepts any pod, so Deployments' pods reach Running."""
        node = {
            "apiVersion": "v1",
            "kind": "Node",
            "metadata": {
                "name": KWOK_NODE,
                "annotations": {"node.alpha.kubernetes.io/ttl": "0", "kwok.x-k8s.io/node": "fake"},
                "labels": {"type": "kwok", "kubernetes.io/hostname": KWOK_NODE},
            },
            "status": {
                "allocatable": {"cpu": "64", "memory": "256Gi", "pods": "1000"},
                "capacity": {"cpu": "64", "memory": "256Gi", "pods": "1000"},
            },
        }
        kubectl(Path(self._state.bin_dir), kubeconfig, "apply", "-f", "-", input=json.dumps(node))


def kubectl(
    bin_dir: Path, kubeconfig: Path, *args: str, input: str | None = None, check: bool = True
) -> subprocess.CompletedProcess[str]:
    """Run the control plane's own kubectl against ``kubeconfig``."""
    proc = subprocess.run(
        [str(bin_dir / "kubectl"), f"--kubeconfig={kubeconfig}", *args],
        input=input,
        capture_output=True,
        text=True,
        check=False,
    )
    if check and proc.returncode != 0:
        raise ClusterError(f"kubectl {' '.join(args)} failed: {proc.stderr.strip()}")
    return proc


@contextmanager
def running_cluster(state_dir: Path, **kwargs: Any) -> Iterator[ClusterState]:
    """A local control plane for the duration of a ``with`` block."""
    cluster = LocalCluster(state_dir, **kwargs)
    state = cluster.up()
    try:
        yield state
    finally:
        cluster.down()
