"""A real node beside the local control plane: containerd, runc, CNI and a kubelet.

Pods scheduled here run as real processes: images come from the node's own containerd (imported
from archives built by :mod:`harness.images`, no registry), each pod gets an address on a bridge
from the CNI plugins (bridge, host-local, loopback), and the kubelet mounts volumes, runs probes,
restarts containers and reports their states as it does on any cluster.

The node's address is made here: a dummy interface ``bindery0`` with ``198.18.0.1`` (RFC 2544's
benchmarking range, never routed beyond this machine), because the kubelet refuses a loopback
address and ``kubectl logs``/``exec`` reach the kubelet at the node's address. Pods reach the API
server through the ``kubernetes`` Service's address, forwarded to it by one NAT rule (what
kube-proxy would do for that one Service). The kubelet authenticates to the API server as
``system:node:<name>`` and the API server to it with a ``system:masters`` client certificate,
both issued by the control plane's CA.

Everything lives under the control plane's data directory and goes with ``down()``: the
processes (containerd's shims included), the pods' mounts and network namespaces, the links and
the NAT rule.
"""

from __future__ import annotations

import json
import os
import subprocess
import time
from collections.abc import Callable
from contextlib import suppress
from dataclasses import dataclass
from pathlib import Path

import structlog

from harness.errors import ClusterError
from harness.system import alive, free_port, terminate

log = structlog.get_logger("bindery.harness.node")

NODE_NAME = "bindery-node-0"
NODE_IP = "198.18.0.1"
POD_CIDR = "198.18.1.0/24"
NODE_LINK = "bindery0"
BRIDGE = "bindery-cni0"
KUBERNETES_SERVICE_IP = "10.0.0.1"
NAT_COMMENT = "bindery-local-kubernetes-service"
CNI_BIN_DIRS = ("/usr/lib/cni", "/opt/cni/bin")
PACKAGES = "containerd runc containernetworking-plugins iptables iproute2"


def _sh(*argv: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    proc = subprocess.run(argv, capture_output=True, text=True, check=False)
    if check and proc.returncode != 0:
        raise ClusterError(
            f"{' '.join(argv)} failed (exit {proc.returncode}): {proc.stderr.strip()}"
        )
    return proc


def _which(name: str) -> str:
    for d in [*os.environ.get("PATH", "").split(os.pathsep), "/usr/sbin", "/sbin"]:
        path = Path(d) / name
        if path.is_file() and os.access(path, os.X_OK):
            return str(path)
    return ""


def preflight() -> Path:
    """What the real node needs on this machine; the CNI plugin directory."""
    if os.geteuid() != 0:
        raise ClusterError("the real node runs containers: start it as root")
    needed = ("containerd", "containerd-shim-runc-v2", "runc", "ctr", "iptables", "ip")
    missing = [c for c in needed if not _which(c)]
    cni = next((Path(d) for d in CNI_BIN_DIRS if (Path(d) / "bridge").exists()), None)
    if cni is None:
        missing.append("the CNI plugins (bridge, host-local, loopback)")
    if missing:
        raise ClusterError(
            f"the real node needs {', '.join(missing)}; on Debian: apt-get install {PACKAGES}"
        )
    return cni  # type: ignore[return-value]


@dataclass(frozen=True)
class NodePaths:
    """Where one real node keeps its files (under the control plane's data directory)."""

    root: Path

    @property
    def containerd(self) -> Path:
        return self.root / "containerd"

    @property
    def socket(self) -> Path:
        return self.containerd / "containerd.sock"

    @property
    def kubelet(self) -> Path:
        return self.root / "kubelet"

    @property
    def kubeconfig(self) -> Path:
        return self.root / "kubelet.kubeconfig"


def containerd_config(paths: NodePaths, cni_bin: Path, pause_image: str) -> str:
    c = paths.containerd
    return f"""version = 2
root = "{c}/root"
state = "{c}/state"
disabled_plugins = ["io.containerd.snapshotter.v1.aufs", "io.containerd.snapshotter.v1.btrfs",
  "io.containerd.snapshotter.v1.zfs", "io.containerd.snapshotter.v1.devmapper",
  "io.containerd.internal.v1.tracing", "io.containerd.tracing.processor.v1.otlp"]
[grpc]
  address = "{paths.socket}"
[ttrpc]
  address = "{paths.socket}.ttrpc"
[metrics]
  address = ""
[plugins."io.containerd.internal.v1.opt"]
  path = "{c}/opt"
[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = "{pause_image}"
  # Without CAP_SYS_RESOURCE runc cannot lower a container's oom_score_adj below its own.
  restrict_oom_score_adj = true
  [plugins."io.containerd.grpc.v1.cri".containerd]
    snapshotter = "overlayfs"
    default_runtime_name = "runc"
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
        SystemdCgroup = false
  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = "{cni_bin}"
    conf_dir = "{paths.root}/cni/net.d"
"""


def cni_config(paths: NodePaths) -> dict[str, object]:
    return {
        "cniVersion": "1.0.0",
        "name": "bindery",
        "plugins": [
            {
                "type": "bridge",
                "bridge": BRIDGE,
                "isGateway": True,
                "ipMasq": False,
                "hairpinMode": True,
                "ipam": {
                    "type": "host-local",
                    "ranges": [[{"subnet": POD_CIDR}]],
                    "routes": [{"dst": "0.0.0.0/0"}],
                    "dataDir": str(paths.root / "cni" / "ipam"),
                },
            },
            {"type": "loopback"},
        ],
    }


def kubelet_config(paths: NodePaths, pki: Path, port: int, healthz_port: int) -> dict[str, object]:
    return {
        "apiVersion": "kubelet.config.k8s.io/v1beta1",
        "kind": "KubeletConfiguration",
        "address": NODE_IP,
        "port": port,
        "readOnlyPort": 0,
        "healthzBindAddress": "127.0.0.1",
        "healthzPort": healthz_port,
        "containerRuntimeEndpoint": f"unix://{paths.socket}",
        # These machines mount cgroup v1 and have no systemd managing the node.
        "cgroupDriver": "cgroupfs",
        "failCgroupV1": False,
        "cgroupRoot": "/bindery",
        "failSwapOn": False,
        "enforceNodeAllocatable": [],
        "authentication": {
            "anonymous": {"enabled": False},
            "webhook": {"enabled": True},
            "x509": {"clientCAFile": str(pki / "ca.crt")},
        },
        "authorization": {"mode": "Webhook"},
        "tlsCertFile": str(pki / "kubelet-serving.crt"),
        "tlsPrivateKeyFile": str(pki / "kubelet-serving.key"),
        "serializeImagePulls": False,
        # The images cannot be pulled again: never collect them, and evict only when truly short.
        "imageGCHighThresholdPercent": 100,
        "imageGCLowThresholdPercent": 99,
        "evictionHard": {
            "memory.available": "100Mi",
            "nodefs.available": "1%",
            "imagefs.available": "1%",
            "nodefs.inodesFree": "1%",
        },
        "resolvConf": "/etc/resolv.conf",
        "maxPods": 110,
        "podPidsLimit": 4096,
        "shutdownGracePeriod": "0s",
        "nodeStatusReportFrequency": "10s",
        "registerNode": True,
    }


def ctr(paths: NodePaths, *args: str) -> list[str]:
    """A ``ctr`` command line against this node's containerd, in the kubelet's namespace."""
    return ["ctr", "--address", str(paths.socket), "--namespace", "k8s.io", *args]


# ---------------------------------------------------------------------------- machine-wide

CLAIM = Path("/run/bindery-node.json")
"""One real node per machine: its links, NAT rule and cgroup root are machine-wide."""


def claim(state_dir: Path, api_port: int) -> None:
    """Take the machine's real-node slot for the control plane in ``state_dir``."""
    with suppress(OSError, ValueError):
        held = json.loads(CLAIM.read_text())
        if held.get("stateDir") != str(state_dir) and alive(int(held.get("pid", 0))):
            raise ClusterError(
                f"a real node is already running on this machine for the control plane in "
                f"{held.get('stateDir')}: stop it first (python -m harness cluster down "
                f"--state-dir {held.get('stateDir')})"
            )
    teardown_machine()  # whatever a killed run left behind
    held = {"stateDir": str(state_dir), "pid": os.getpid(), "apiPort": api_port}
    CLAIM.write_text(json.dumps(held))


def record_owner(pid: int) -> None:
    """The process whose life the claim follows (the API server: ``up`` itself exits)."""
    with suppress(OSError, ValueError):
        held = json.loads(CLAIM.read_text())
        held["pid"] = pid
        CLAIM.write_text(json.dumps(held))


def network_up(api_port: int) -> None:
    """The node's address, forwarding, and the ``kubernetes`` Service's NAT rule."""
    if _sh("ip", "link", "show", NODE_LINK, check=False).returncode != 0:
        # A bridge with no ports: an interface of this machine's own (no dummy module here).
        _sh("ip", "link", "add", NODE_LINK, "type", "bridge")
    _sh("ip", "addr", "replace", f"{NODE_IP}/32", "dev", NODE_LINK)
    _sh("ip", "link", "set", NODE_LINK, "up")
    Path("/proc/sys/net/ipv4/ip_forward").write_text("1\n")
    _sh(
        "iptables", "-t", "nat", "-A", "PREROUTING",
        "-d", f"{KUBERNETES_SERVICE_IP}/32", "-p", "tcp", "--dport", "443",
        "-m", "comment", "--comment", NAT_COMMENT,
        "-j", "DNAT", "--to-destination", f"{NODE_IP}:{api_port}",
    )  # fmt: skip


def teardown_machine() -> None:
    """Remove what a real node adds to the machine: NAT rules, links, CNI namespaces, cgroups."""
    for table in ("nat", "filter", "mangle"):
        listing = _sh("iptables", "-t", table, "-S", check=False).stdout
        for line in listing.splitlines():
            if NAT_COMMENT in line and line.startswith("-A "):
                _sh("iptables", "-t", table, "-D", *line.split()[1:], check=False)
        for chain in ("KUBE-KUBELET-CANARY",):
            _sh("iptables", "-t", table, "-F", chain, check=False)
            _sh("iptables", "-t", table, "-X", chain, check=False)
    for link in (BRIDGE, NODE_LINK):
        _sh("ip", "link", "del", link, check=False)
    netns = Path("/run/netns")
    for ns in sorted(netns.glob("cni-*")) if netns.is_dir() else []:
        _sh("ip", "netns", "delete", ns.name, check=False)
    remove_cgroup_root()
    with suppress(FileNotFoundError):
        CLAIM.unlink()


# ---------------------------------------------------------------------------- certificates


def node_pki(pki: Path, sign: Callable[[Path, str, str, str], None]) -> None:
    """The kubelet's client and serving certificates, and the API server's client
    certificate for the kubelet (``kubectl logs``/``exec``), from the control plane's CA."""
    node = f"/O=system:nodes/CN=system:node:{NODE_NAME}"
    sign(pki, "kubelet-client", node, "extendedKeyUsage=clientAuth\n")
    sign(
        pki,
        "kubelet-serving",
        node,
        f"subjectAltName=IP:{NODE_IP},DNS:{NODE_NAME}\nextendedKeyUsage=serverAuth\n",
    )
    sign(
        pki,
        "apiserver-kubelet-client",
        "/O=system:masters/CN=kube-apiserver-kubelet-client",
        "extendedKeyUsage=clientAuth\n",
    )


def apiserver_args(pki: Path) -> list[str]:
    """What the API server needs beside a real node: its address, the kubelet's client."""
    return [
        f"--bind-address={NODE_IP}",
        f"--advertise-address={NODE_IP}",
        f"--kubelet-client-certificate={pki / 'apiserver-kubelet-client.crt'}",
        f"--kubelet-client-key={pki / 'apiserver-kubelet-client.key'}",
        "--kubelet-preferred-address-types=InternalIP",
        "--authorization-mode=Node,RBAC",
        "--enable-admission-plugins=NodeRestriction",
    ]


def kubelet_kubeconfig(paths: NodePaths, server: str, pki: Path) -> None:
    paths.root.mkdir(parents=True, exist_ok=True)
    paths.kubeconfig.write_text(
        json.dumps(
            {
                "apiVersion": "v1",
                "kind": "Config",
                "clusters": [
                    {
                        "name": "local",
                        "cluster": {"server": server, "certificate-authority": str(pki / "ca.crt")},
                    }
                ],
                "users": [
                    {
                        "name": "kubelet",
                        "user": {
                            "client-certificate": str(pki / "kubelet-client.crt"),
                            "client-key": str(pki / "kubelet-client.key"),
                        },
                    }
                ],
                "contexts": [{"name": "local", "context": {"cluster": "local", "user": "kubelet"}}],
                "current-context": "local",
            }
        )
    )


# ---------------------------------------------------------------------------- processes


def containerd_argv(paths: NodePaths, cni_bin: Path, pause_image: str) -> list[str]:
    """Write containerd's and the CNI configuration; containerd's command line."""
    paths.containerd.mkdir(parents=True, exist_ok=True)
    net = paths.root / "cni" / "net.d"
    net.mkdir(parents=True, exist_ok=True)
    (net / "10-bindery.conflist").write_text(json.dumps(cni_config(paths), indent=2))
    config = paths.containerd / "config.toml"
    config.write_text(containerd_config(paths, cni_bin, pause_image))
    return [_which("containerd"), "--config", str(config)]


def wait_containerd(paths: NodePaths, deadline: float, alive: Callable[[], None]) -> None:
    while time.monotonic() < deadline:
        alive()
        if _sh(*ctr(paths, "version"), check=False).returncode == 0:
            return
        time.sleep(0.1)
    raise ClusterError(f"containerd did not answer on {paths.socket} in time")


def import_image(paths: NodePaths, archive: Path) -> None:
    _sh(*ctr(paths, "images", "import", "--no-unpack", str(archive)))


def kubelet_argv(paths: NodePaths, bin_dir: Path, pki: Path) -> list[str]:
    """Write the kubelet's configuration (and its cgroup root); its command line."""
    make_cgroup_root()
    config = paths.root / "kubelet-config.json"
    config.write_text(json.dumps(kubelet_config(paths, pki, free_port(), free_port()), indent=2))
    return [
        str(bin_dir / "kubelet"),
        f"--config={config}",
        f"--kubeconfig={paths.kubeconfig}",
        f"--node-ip={NODE_IP}",
        f"--hostname-override={NODE_NAME}",
        f"--root-dir={paths.kubelet}",
        "--v=1",
    ]


def stop(paths: NodePaths, pids: dict[str, int]) -> None:
    """Stop the kubelet, every container, containerd and its shims; undo the mounts and
    everything the node added to the machine. ``pids`` loses the entries it stopped."""
    terminate(pids.pop("kubelet", 0), "kubelet", grace=5.0)
    if paths.socket.exists() and alive(pids.get("containerd", 0)):
        for task in _sh(*ctr(paths, "tasks", "list", "-q"), check=False).stdout.split():
            _sh(*ctr(paths, "tasks", "kill", "--signal", "SIGKILL", task), check=False)
    terminate(pids.pop("containerd", 0), "containerd", grace=5.0)
    for pid in _pids_matching(str(paths.socket)):  # the shims outlive containerd by design
        terminate(pid, "containerd-shim", grace=1.0)
    _unmount_under(paths.root)
    teardown_machine()


def _pids_matching(needle: str) -> list[int]:
    found = []
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        with suppress(OSError):
            cmdline = (proc / "cmdline").read_bytes().replace(b"\0", b" ")
            if needle in cmdline.decode(errors="replace"):
                found.append(int(proc.name))
    return found


def _unmount_under(root: Path) -> None:
    prefix = str(root.resolve())
    mounts = []
    with suppress(OSError):
        for line in Path("/proc/self/mounts").read_text().splitlines():
            target = line.split()[1].replace("\\040", " ")
            if target == prefix or target.startswith(prefix + "/"):
                mounts.append(target)
    for target in sorted(mounts, key=len, reverse=True):
        _sh("umount", "-l", target, check=False)


CGROUP_ROOT = "bindery"
CGROUP_FS = Path("/sys/fs/cgroup")


def cgroup_hierarchies() -> list[Path]:
    """The cgroup v1 hierarchies mounted here (or the one v2 hierarchy)."""
    if (CGROUP_FS / "cgroup.controllers").exists():
        return [CGROUP_FS]
    return [
        p
        for p in sorted(CGROUP_FS.iterdir())
        if p.is_dir() and not p.is_symlink() and p.name != "unified"
    ]


def make_cgroup_root() -> None:
    """The kubelet's ``cgroupRoot`` must exist in every hierarchy before it starts."""
    for hierarchy in cgroup_hierarchies():
        path = hierarchy / CGROUP_ROOT
        path.mkdir(exist_ok=True)
        for knob in ("cpuset.cpus", "cpuset.mems"):  # a v1 cpuset child starts empty
            if (path / knob).exists() and not (path / knob).read_text().strip():
                (path / knob).write_text((hierarchy / knob).read_text())


def remove_cgroup_root() -> None:
    for hierarchy in cgroup_hierarchies():
        root = hierarchy / CGROUP_ROOT
        if not root.is_dir():
            continue
        nested = sorted((p for p in root.rglob("*") if p.is_dir()), key=lambda p: -len(p.parts))
        for path in nested:
            with suppress(OSError):
                path.rmdir()
        with suppress(OSError):
            root.rmdir()
