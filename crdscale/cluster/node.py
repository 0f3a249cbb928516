"""A test node on this machine: containerd + runc + a CNI bridge + kubelet (and kube-scheduler)
beside a :class:`~crdscale.cluster.local.LocalControlPlane`, so that real pods run here.

Everything the node owns is named after its instance and recorded in the instance's
``instance.json`` (key ``node``) before it is created, so ``crdscale down`` undoes it even
after ``kill -9`` of the process that started it:

- processes: containerd, kubelet, kube-scheduler (recorded like the control plane's); the
  shims and the pods' processes are found through the node's cgroup ``/crdscale-<instance>``
  (containerd and kubelet run in it, the kubelet's ``cgroupRoot`` puts every pod under it);
- the bridge ``crdscale<hash>`` with a free private /24 (``10.213.N.0/24``), no NAT, no
  forwarding: pods reach the host's bridge address, the API server reaches the kubelet there;
- mounts under the instance directory (containerd's root, state and network namespaces,
  the kubelet's volumes);
- the kernel settings the kubelet changes (``kernel.panic``, ``kernel.panic_on_oops``,
  ``vm.overcommit_memory``, ...): the kubelet runs in its own mount namespace where they are
  files of the node (:func:`kernel_settings_shield`), so the host's never change; their values
  are recorded anyway and written back on stop should anything have changed them.

Why each setting is there is said where it is set; docs/how-to/local-control-plane.md
("A test node on this machine") says it for users.
"""

from __future__ import annotations

import base64
import hashlib
import ipaddress
import json
import logging
import os
import re
import shlex
import shutil
import signal
import socket
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

import yaml

from crdscale.cluster import binaries, pki
from crdscale.cluster.instances import list_instances
from crdscale.cluster.process import ProcessRecord, free_ports, log_tail, terminate_process
from crdscale.cluster.versions import normalize_version
from crdscale.errors import BinaryError, ClusterError, UsageError
from crdscale.fsutil import write_atomic
from crdscale.image.containerd import import_archive
from crdscale.image.oci import ImageConfig, tar_layer, write_oci_archive
from crdscale.paths import cache_dir

if TYPE_CHECKING:
    from crdscale.cluster.clients import Cluster

log = logging.getLogger(__name__)


class ControlPlane(Protocol):
    r"""What a node needs of the control plane it joins (:class:`crdscale.cluster.local.LocalControlPlane`
    is one): a node is started and stopped by its control plane, never imports it.

    The node keeps its own record in the instance's, under ``state[STATE_KEY]``, and :meth:`save`\ s
    it before it creates anything, so that ``crdscale down`` undoes exactly what was done, even
    after ``kill -9`` of the process that started it.
    """

    name: str
    state_dir: Path
    state: dict

    @property
    def server(self) -> str: ...

    @property
    def credentials(self) -> pki.Credentials: ...

    @property
    def processes(self) -> list[ProcessRecord]: ...

    def connect(self) -> Cluster: ...

    def spawn(self, name: str, argv: list[str]) -> ProcessRecord:
        """Start ``argv`` in its own session with its log under the instance, recorded in ``state``."""
        ...

    def save(self) -> None:
        """Write ``state`` (the instance's record) atomically."""
        ...


STATE_KEY = "node"
CGROUP_ROOT = Path("/sys/fs/cgroup")
PROC_SYS = Path("/proc/sys")
# The hierarchy whose cgroup.procs lists every process of the node (shims and pods included).
TRACKING_CONTROLLER = "pids"
CNI_BIN_DIR = Path("/usr/lib/cni")
CNI_NETWORK = "crdscale"
# Private /24s the node's bridge takes one of (the first not routed here yet).
BRIDGE_SUPERNET = ipaddress.ip_network("10.213.0.0/16")
# The kubelet sets these (pkg/kubelet/cm/container_manager_linux.go setupKernelTunables) unless
# protectKernelDefaults, which instead refuses to start when they differ from its wishes (here
# kernel.panic is 1, not 10). So it sees files of the node in their place (kernel_settings_shield),
# and they are read before and written back on stop as a safety net; ip_forward too, should a CNI
# plugin turn it on.
KUBELET_SYSCTLS = (
    "kernel/panic",
    "kernel/panic_on_oops",
    "vm/overcommit_memory",
    "vm/panic_on_oom",
    "kernel/keys/root_maxkeys",
    "kernel/keys/root_maxbytes",
    "net/ipv4/ip_forward",
)
# Paths outside the instance directory that the kubelet, containerd and CNI create whatever
# their configuration says (kubelet: /var/log/containers links, the device-plugin socket;
# containerd: shim sockets under /run/containerd/s; libcni: results cache). stop() removes what
# the node put there, and the directories themselves when they did not exist before.
HOST_PATHS = ("/var/log/containers", "/var/lib/kubelet", "/var/lib/cni", "/run/containerd")
# The socket every kubelet serves device plugins on, whatever its --root-dir (pkg/kubelet/apis/
# deviceplugin: DevicePluginPath): a second kubelet on the host's paths would take it over.
KUBELET_DEVICE_PLUGIN_SOCKET = Path("/var/lib/kubelet/device-plugins/kubelet.sock")
NET_CLASS = Path("/sys/class/net")
# A node's bridge (NodeLayout.bridge) and cgroup (NodeLayout.cgroup), whichever cache started it.
_NODE_BRIDGE = re.compile(r"crdscale[0-9a-f]{6}")
_NODE_CGROUP_PREFIX = "crdscale-"
DEBIAN_PACKAGES = "containerd runc containernetworking-plugins"
NODE_READY_TIMEOUT_S = 180.0
# failCgroupV1 (needed on this cgroup v1 host from kubelet 1.35 on) exists in KubeletConfiguration
# from 1.31; tested with 1.37.1.
MIN_KUBELET_MINOR = 31
APISERVER_KUBELET_CLIENT = "crdscale-apiserver-kubelet-client"
SCHEDULER_USER = "system:kube-scheduler"


@dataclass(frozen=True)
class HostTools:
    """The Debian programs a node runs: containerd, runc, ctr, the CNI plugins, gcc (pause)."""

    containerd: Path
    runc: Path
    ctr: Path
    gcc: Path
    ip: Path


def host_tools() -> HostTools:
    """Find containerd, runc, ctr, the CNI plugins, gcc and ip, or say which package to install."""
    found, missing = {}, []
    for name in ("containerd", "runc", "ctr", "gcc", "ip"):
        path = shutil.which(name) or next(
            (f"{d}/{name}" for d in ("/usr/sbin", "/sbin", "/usr/bin") if os.access(f"{d}/{name}", os.X_OK)), None
        )
        if path:
            found[name] = Path(path)
        else:
            missing.append(name)
    missing += [f"{CNI_BIN_DIR}/{p}" for p in ("bridge", "host-local", "loopback") if not (CNI_BIN_DIR / p).is_file()]
    if missing:
        raise BinaryError(f"a test node needs {', '.join(missing)}: apt-get install -y {DEBIAN_PACKAGES} gcc iproute2")
    return HostTools(**found)


def check_host(version: str | None = None) -> None:
    """Refuse early what cannot work: a kubelet ``version`` (the control plane's) not supported
    here, not root, no cgroup v1 hierarchies, missing programs, another node running: one of this
    cache's instances, or one the host shows (:func:`other_nodes`)."""
    if version is not None:
        minor = int(normalize_version(version).lstrip("v").split(".")[1])
        if minor < MIN_KUBELET_MINOR:
            raise UsageError(
                f"a test node runs the kubelet of the control plane's version; {version} is older than "
                f"v1.{MIN_KUBELET_MINOR} (its KubeletConfiguration lacks failCgroupV1, needed on this cgroup v1 host)"
            )
    if os.geteuid() != 0:
        raise UsageError("a test node runs containerd and kubelet, which need root")
    if not (CGROUP_ROOT / TRACKING_CONTROLLER / "cgroup.procs").is_file():
        raise UsageError(f"a test node needs the cgroup v1 '{TRACKING_CONTROLLER}' hierarchy at {CGROUP_ROOT}")
    host_tools()
    # Stale ones too: their bridge, mounts and processes are there until 'crdscale down'.
    running = [i.name for i in list_instances() if i.status != "stopped" and i.has_node]
    if running:
        # The kubelet's device-plugin socket and /var/log/containers are fixed paths: one node at a time.
        raise UsageError(f"instance {running[0]} already has a node; stop it first ('crdscale down {running[0]}')")
    others = other_nodes()
    if others:
        raise UsageError(
            f"another node runs on this host ({'; '.join(others)}): one at a time (the kubelet's device-plugin "
            f"socket and /var/log/containers are fixed paths); stop it ('crdscale down' with the CRDSCALE_CACHE "
            f"that started it) first"
        )


def other_nodes() -> list[str]:
    """What on the host says a node runs here, seen from the host rather than from this cache's
    instances (a node started with another ``CRDSCALE_CACHE``, by a test run, or a real kubelet):
    a crdscale cgroup holding processes, a crdscale node bridge, a kubelet answering on the
    device-plugin socket, a kubelet process in this mount namespace (a containerised one, kind's,
    has its own paths). One line per finding; ``[]`` when the host is free."""
    found = []
    pids_root = CGROUP_ROOT / TRACKING_CONTROLLER
    for cgroup in sorted(pids_root.glob(_NODE_CGROUP_PREFIX + "*")) if pids_root.is_dir() else ():
        # A node's own processes are in its "node" child, its pods under "kubepods" (start(), the
        # kubelet's cgroupRoot); other crdscale-* cgroups are not nodes.
        pids = [p for child in ("node", "kubepods") for p in cgroup_pids(f"/{cgroup.name}/{child}")]
        if pids:
            found.append(f"cgroup /{cgroup.name} holds {len(pids)} processes")
    for link in sorted(NET_CLASS.iterdir()) if NET_CLASS.is_dir() else ():
        if _NODE_BRIDGE.fullmatch(link.name):
            found.append(f"bridge {link.name}")
    if _socket_answers(KUBELET_DEVICE_PLUGIN_SOCKET):
        found.append(f"a kubelet serves {KUBELET_DEVICE_PLUGIN_SOCKET}")
    found += [f"kubelet pid {pid}" for pid in _host_kubelets()]
    return found


def _socket_answers(path: Path) -> bool:
    """Whether a server accepts connections on the unix socket ``path`` (a stale file does not)."""
    if not path.is_socket():
        return False
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
        sock.settimeout(1.0)
        try:
            sock.connect(str(path))
        except OSError:
            return False
    return True


def _host_kubelets(proc: Path = Path("/proc")) -> list[int]:
    """Processes named ``kubelet`` that share this process's mount namespace and are in no node
    cgroup of crdscale's (those are counted by their cgroup; crdscale's kubelets have their own
    mount namespace anyway)."""
    try:
        ours = os.readlink(proc / "self" / "ns" / "mnt")
    except OSError:
        return []
    pids = []
    for entry in proc.iterdir():
        if not entry.name.isdigit():
            continue
        try:
            if (entry / "comm").read_text().strip() != "kubelet" or os.readlink(entry / "ns" / "mnt") != ours:
                continue
            cgroups = (entry / "cgroup").read_text()
        except OSError:
            continue
        if f":/{_NODE_CGROUP_PREFIX}" not in cgroups:
            pids.append(int(entry.name))
    return sorted(pids)


# ---------------------------------------------------------------- images built here


def build_static_program(source: str, out: Path, *, defines: dict[str, str] | None = None) -> Path:
    """Compile the C ``source`` into a static binary ``out`` (no libc in the image needed)."""
    out.parent.mkdir(parents=True, exist_ok=True)
    src = out.with_suffix(".c")
    write_atomic(src, source)
    flags = [f"-D{k}={v}" for k, v in (defines or {}).items()]
    proc = subprocess.run(
        [str(host_tools().gcc), "-Os", "-static", "-Wall", *flags, "-o", str(out), str(src)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    if proc.returncode != 0:
        raise BinaryError(f"gcc could not build {out.name}", details=proc.stderr[-2000:])
    return out


def pause_image(version: str) -> tuple[Path, str]:
    """The sandbox image: upstream's ``build/pause/linux/pause.c`` of k8s.io/kubernetes ``version``
    compiled statically, as an OCI archive; returns (archive, reference). Cached per version."""
    version = normalize_version(version)
    ref = f"crdscale.local/pause:{version}"
    out_dir = cache_dir() / "node-images" / f"pause-{version}"
    archive = out_dir / "pause.oci.tar"
    if archive.is_file():
        return archive, ref
    info = binaries._download_kubernetes_module(version)
    source = Path(info["Dir"]) / "build" / "pause" / "linux" / "pause.c"
    if not source.is_file():
        raise BinaryError(f"k8s.io/kubernetes {version} has no {source.relative_to(info['Dir'])}")
    binary = build_static_program(source.read_text(), out_dir / "pause", defines={"VERSION": version})
    layer = tar_layer({"pause": binary}, modes={"pause": 0o755})
    write_oci_archive(archive, [layer], config=ImageConfig(entrypoint=["/pause"]), ref=ref)
    return archive, ref


# ---------------------------------------------------------------- the node's layout


@dataclass(frozen=True)
class NodeLayout:
    """Where a node's files live (all under ``<instance>/node``) and what it is called."""

    instance_dir: Path
    instance: str

    @property
    def dir(self) -> Path:
        return self.instance_dir / "node"

    @property
    def name(self) -> str:
        return f"{self.instance}-node"

    @property
    def cgroup(self) -> str:
        """The kubelet's cgroupRoot; containerd and kubelet run in its ``node`` child."""
        return f"/crdscale-{self.instance}"

    @property
    def bridge(self) -> str:
        return "crdscale" + hashlib.sha256(self.instance.encode()).hexdigest()[:6]  # <= 15 characters

    @property
    def containerd_socket(self) -> Path:
        return self.dir / "containerd" / "containerd.sock"

    @property
    def containerd_config(self) -> Path:
        return self.dir / "containerd" / "config.toml"

    @property
    def cni_conf_dir(self) -> Path:
        return self.dir / "cni" / "net.d"

    @property
    def kubelet_dir(self) -> Path:
        return self.dir / "kubelet"

    @property
    def kubelet_config(self) -> Path:
        return self.dir / "kubelet-config.yaml"

    @property
    def kubelet_kubeconfig(self) -> Path:
        return self.dir / "kubelet.kubeconfig"

    @property
    def scheduler_kubeconfig(self) -> Path:
        return self.dir / "scheduler.kubeconfig"


def _cgroup_dirs(cgroup: str, *, unified: bool = False) -> list[Path]:
    """``cgroup`` in every cgroup v1 hierarchy mounted here, and with ``unified`` in the hybrid
    host's cgroup v2 one too (the kubelet's runc creates it there as well)."""
    if not CGROUP_ROOT.is_dir():
        return []
    return [
        d / cgroup.lstrip("/")
        for d in sorted(CGROUP_ROOT.iterdir())
        if d.is_dir() and (unified or d.name != "unified") and (d / "cgroup.procs").is_file()
    ]


def _create_cgroup(cgroup: str) -> None:
    for path in _cgroup_dirs(cgroup):
        path.mkdir(exist_ok=True)
        if path.parent.name == "cpuset" or (path / "cpuset.cpus").exists():
            # A new cpuset cgroup has no CPUs until given its parent's; no process could join it.
            for key in ("cpuset.cpus", "cpuset.mems"):
                if not (path / key).read_text().strip():
                    (path / key).write_text((path.parent / key).read_text())


def _join_cgroup(cgroup: str, pid: int) -> None:
    for path in _cgroup_dirs(cgroup):
        (path / "cgroup.procs").write_text(str(pid))


def cgroup_pids(cgroup: str) -> list[int]:
    """Every process in ``cgroup`` and below (the tracking hierarchy)."""
    top = CGROUP_ROOT / TRACKING_CONTROLLER / cgroup.lstrip("/")
    pids: set[int] = set()
    if top.is_dir():
        for procs in top.rglob("cgroup.procs"):
            try:
                pids.update(int(p) for p in procs.read_text().split())
            except (OSError, ValueError):
                continue
    return sorted(pids)


def _remove_cgroup(cgroup: str) -> list[str]:
    """rmdir ``cgroup`` and its children in every hierarchy, deepest first; what could not go."""
    left = []
    for top in _cgroup_dirs(cgroup, unified=True):
        if not top.is_dir():
            continue
        for path in sorted((p for p in top.rglob("*") if p.is_dir()), key=lambda p: len(p.parts), reverse=True):
            try:
                path.rmdir()
            except OSError:
                left.append(str(path))
        try:
            top.rmdir()
        except OSError:
            left.append(str(top))
    return left


def read_sysctls(names=KUBELET_SYSCTLS) -> dict[str, str]:
    """``name -> value`` of the kernel settings under /proc/sys that exist here."""
    found = {}
    for name in names:
        try:
            found[name] = (PROC_SYS / name).read_text().strip()
        except OSError:
            continue
    return found


def restore_sysctls(before: dict[str, str]) -> dict[str, tuple[str, str]]:
    """Write back every setting that changed since ``before``; returns ``name -> (was, now)`` restored."""
    restored = {}
    for name, value in before.items():
        now = read_sysctls([name]).get(name)
        if now is not None and now != value:
            (PROC_SYS / name).write_text(value)
            restored[name] = (value, now)
    return restored


def _routed_networks() -> list[ipaddress.IPv4Network]:
    out = subprocess.run(["ip", "-4", "-o", "route", "show", "table", "all"], capture_output=True, text=True).stdout
    out += subprocess.run(["ip", "-4", "-o", "addr"], capture_output=True, text=True).stdout
    nets = []
    for word in out.split():
        try:
            nets.append(ipaddress.ip_network(word, strict=False))
        except ValueError:
            continue
    return [n for n in nets if isinstance(n, ipaddress.IPv4Network) and n.prefixlen > 0]


def free_subnet() -> ipaddress.IPv4Network:
    """The first /24 of :data:`BRIDGE_SUPERNET` that no address or route here overlaps."""
    used = _routed_networks()
    for subnet in BRIDGE_SUPERNET.subnets(new_prefix=24):
        if subnet.network_address.packed[2] == 0:
            continue
        if not any(subnet.overlaps(n) for n in used):
            return subnet
    raise ClusterError(f"no free /24 left in {BRIDGE_SUPERNET} for a test node's bridge")


def _mounts_under(root: Path) -> list[str]:
    """Mount points at or below ``root``, deepest first (from /proc/self/mountinfo)."""
    prefix = str(root.resolve())
    found = []
    try:
        lines = Path("/proc/self/mountinfo").read_text().splitlines()
    except OSError:
        return []
    for line in lines:
        target = line.split()[4].encode().decode("unicode_escape")
        if target == prefix or target.startswith(prefix + "/"):
            found.append(target)
    return sorted(set(found), key=lambda t: t.count("/"), reverse=True)


def _run(argv: list[str], *, check: bool = True, timeout: float = 60) -> subprocess.CompletedProcess:
    proc = subprocess.run(argv, capture_output=True, text=True, timeout=timeout)
    if check and proc.returncode != 0:
        raise ClusterError(f"{' '.join(argv[:4])} failed (exit {proc.returncode})", details=proc.stderr[-2000:])
    return proc


# ---------------------------------------------------------------- configuration files


def containerd_config(layout: NodeLayout, *, sandbox_image: str, runc: Path) -> str:
    """containerd 1.6's configuration (version 2) for the node: everything under the node's
    directory, its own socket, the CNI conf of the node, the locally built sandbox image."""
    root = layout.dir / "containerd"
    return f"""\
version = 2
root = "{root / "root"}"
state = "{root / "state"}"
disabled_plugins = ["io.containerd.snapshotter.v1.btrfs", "io.containerd.snapshotter.v1.zfs",
                    "io.containerd.snapshotter.v1.devmapper", "io.containerd.snapshotter.v1.aufs"]

[grpc]
  address = "{layout.containerd_socket}"

[ttrpc]
  address = "{layout.containerd_socket}.ttrpc"

[debug]
  level = "info"

[metrics]
  address = ""

[plugins."io.containerd.internal.v1.opt"]
  path = "{root / "opt"}"

[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = "{sandbox_image}"
  # The machine lacks CAP_SYS_RESOURCE: containers may not lower their oom_score_adj below ours.
  restrict_oom_score_adj = true
  # Network namespaces under the state directory, not /var/run/netns: down finds and unmounts them.
  netns_mounts_under_state_dir = true
  disable_tcp_service = true
  stream_server_address = "127.0.0.1"
  stream_server_port = "0"
  enable_selinux = false
  disable_apparmor = true
  [plugins."io.containerd.grpc.v1.cri".containerd]
    snapshotter = "overlayfs"
    default_runtime_name = "runc"
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
        BinaryName = "{runc}"
        # runc's state under the node's, not /run/containerd/runc.
        Root = "{root / "state" / "runc"}"
        # cgroupfs, as the kubelet's cgroupDriver: there is no systemd here to ask.
        SystemdCgroup = false
  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = "{CNI_BIN_DIR}"
    conf_dir = "{layout.cni_conf_dir}"
    max_conf_num = 1
"""


def cni_conflist(layout: NodeLayout, subnet: ipaddress.IPv4Network) -> dict:
    """The bridge + host-local network: pod addresses from ``subnet`` (.2 on); the bridge holds .1.
    No gateway, NAT or forwarding (those change the host's iptables and ip_forward): pods reach
    the host at .1, the API server reaches the kubelet there."""
    hosts = list(subnet.hosts())
    return {
        "cniVersion": "0.4.0",
        "name": CNI_NETWORK,
        "plugins": [
            {
                "type": "bridge",
                "bridge": layout.bridge,
                "isGateway": False,
                "ipMasq": False,
                "hairpinMode": False,
                "ipam": {
                    "type": "host-local",
                    "ranges": [[{"subnet": str(subnet), "rangeStart": str(hosts[1]), "gateway": str(hosts[0])}]],
                    "dataDir": str(layout.dir / "cni" / "ipam"),
                },
            },
        ],
    }


def kubelet_configuration(layout: NodeLayout, creds: pki.Credentials, *, address: str, port: int, healthz_port: int):
    """The KubeletConfiguration of a test node on a shared machine (see the module docstring)."""
    return {
        "apiVersion": "kubelet.config.k8s.io/v1beta1",
        "kind": "KubeletConfiguration",
        # The host is cgroup v1 (hybrid); kubelet >= 1.35 refuses that unless told.
        "failCgroupV1": False,
        "cgroupDriver": "cgroupfs",
        "cgroupRoot": layout.cgroup,
        "cgroupsPerQOS": True,
        "enforceNodeAllocatable": ["pods"],
        "containerRuntimeEndpoint": f"unix://{layout.containerd_socket}",
        "failSwapOn": False,
        "address": address,
        "port": port,
        "readOnlyPort": 0,
        "healthzBindAddress": "127.0.0.1",
        "healthzPort": healthz_port,
        "podCIDR": "",
        "podLogsDir": str(layout.dir / "pod-logs"),
        "volumePluginDir": str(layout.dir / "volume-plugins"),
        # Anonymous off; kube-apiserver proves itself with a certificate of the instance CA and
        # is authorized by a SubjectAccessReview (it is in system:masters), so logs and exec work.
        "authentication": {
            "anonymous": {"enabled": False},
            "webhook": {"enabled": True},
            "x509": {"clientCAFile": str(creds.ca_cert)},
        },
        "authorization": {"mode": "Webhook"},
        # Thresholds for a shared machine: other people's files must not evict our pods, and
        # image garbage collection must not delete the images imported without a registry.
        "evictionHard": {
            "memory.available": "200Mi",
            "nodefs.available": "1%",
            "imagefs.available": "1%",
            "nodefs.inodesFree": "1%",
        },
        "imageGCHighThresholdPercent": 100,
        "imageGCLowThresholdPercent": 99,
        # Protecting the kernel defaults would refuse to start (kernel.panic is not 10 here); the
        # settings it changes are files of the node in its mount namespace (kernel_settings_shield).
        "protectKernelDefaults": False,
        # No KUBE-FIREWALL / KUBE-IPTABLES-HINT chains in the host's iptables.
        "makeIPTablesUtilChains": False,
        "maxPods": 32,
        "serializeImagePulls": False,
        "resolvConf": "/etc/resolv.conf",
        "rotateCertificates": False,
        "serverTLSBootstrap": False,
    }


def _client_kubeconfig(server: str, creds: pki.Credentials, user: str, cert: Path, key: Path) -> str:
    return yaml.safe_dump(
        {
            "apiVersion": "v1",
            "kind": "Config",
            "clusters": [
                {
                    "name": "crdscale",
                    "cluster": {
                        "server": server,
                        "certificate-authority-data": base64.b64encode(creds.ca_cert.read_bytes()).decode(),
                    },
                }
            ],
            "users": [{"name": user, "user": {"client-certificate": str(cert), "client-key": str(key)}}],
            "contexts": [{"name": "crdscale", "context": {"cluster": "crdscale", "user": user}}],
            "current-context": "crdscale",
        },
        sort_keys=False,
    )


# ---------------------------------------------------------------- start and stop


def apiserver_flags(creds: pki.Credentials) -> list[str]:
    """kube-apiserver's flags for a cluster with a node: the Node authorizer (kubelets read only
    their own pods' secrets), a client certificate for talking to the kubelet (logs, exec), and
    the kubelet reached at its InternalIP (the bridge address)."""
    cert, key = creds.pki_dir / "apiserver-kubelet-client.crt", creds.pki_dir / "apiserver-kubelet-client.key"
    pki.issue_client_certificate(creds, APISERVER_KUBELET_CLIENT, ("system:masters",), cert, key)
    return [
        "--authorization-mode=Node,RBAC",
        "--enable-admission-plugins=NodeRestriction",
        f"--kubelet-client-certificate={cert}",
        f"--kubelet-client-key={key}",
        "--kubelet-preferred-address-types=InternalIP",
    ]


@dataclass(frozen=True)
class NodeBinaries:
    """What a node runs, found or built before any server starts (:func:`prepare`)."""

    tools: HostTools
    kubelet: binaries.Binary
    scheduler: binaries.Binary
    pause_archive: Path
    pause_ref: str


def prepare(version: str) -> NodeBinaries:
    """Find or build the kubelet and kube-scheduler ``version`` and the pause image (minutes the
    first time, in the kube-apiserver cache directory), and check the Debian programs."""
    tools = host_tools()
    found = binaries.node_binaries(version)
    archive, ref = pause_image(version)
    return NodeBinaries(tools, found[binaries.KUBELET], found[binaries.KUBE_SCHEDULER], archive, ref)


def start(cp: ControlPlane, prepared: NodeBinaries) -> None:
    """Start the node of the running instance ``cp`` (after its kube-controller-manager): bridge,
    containerd with the pause image, kube-scheduler, kubelet; return when the Node is Ready and
    the default service account exists (pods are refused before)."""
    tools, pause_archive, pause_ref = prepared.tools, prepared.pause_archive, prepared.pause_ref
    found = {binaries.KUBELET: prepared.kubelet, binaries.KUBE_SCHEDULER: prepared.scheduler}
    layout = NodeLayout(cp.state_dir, cp.name)
    subnet = free_subnet()
    address = str(next(subnet.hosts()))
    kubelet_port, healthz_port, scheduler_port = free_ports(3)
    # Recorded before anything is created: stop() undoes exactly what this says.
    state = cp.state[STATE_KEY] = {
        "name": layout.name,
        "dir": str(layout.dir),
        "cgroup": layout.cgroup,
        "bridge": layout.bridge,
        "subnet": str(subnet),
        "address": address,
        "sysctls_before": read_sysctls(),
        "host_paths_before": {p: os.path.lexists(p) for p in HOST_PATHS},
        "containerd_socket": str(layout.containerd_socket),
        "ports": {"kubelet": kubelet_port, "kubelet_healthz": healthz_port, "kube-scheduler": scheduler_port},
        "sandbox_image": pause_ref,
        "versions": {name: b.version for name, b in found.items()},
        "binaries": {name: str(b.path) for name, b in found.items()},
    }
    cp.save()
    creds = cp.credentials
    for sub in ("containerd", "cni/net.d", "cni/ipam", "kubelet", "pod-logs", "volume-plugins"):
        (layout.dir / sub).mkdir(parents=True, exist_ok=True)

    _create_cgroup(layout.cgroup)
    _create_cgroup(layout.cgroup + "/node")
    _run(["ip", "link", "add", layout.bridge, "type", "bridge"])
    _run(["ip", "addr", "add", f"{address}/{subnet.prefixlen}", "dev", layout.bridge])
    _run(["ip", "link", "set", layout.bridge, "up"])

    write_atomic(layout.containerd_config, containerd_config(layout, sandbox_image=pause_ref, runc=tools.runc))
    write_atomic(layout.cni_conf_dir / "10-crdscale.conflist", json.dumps(cni_conflist(layout, subnet), indent=2))
    containerd = cp.spawn("containerd", [str(tools.containerd), "--config", str(layout.containerd_config)])
    _join_cgroup(layout.cgroup + "/node", containerd.pid)
    _wait_for(lambda: layout.containerd_socket.is_socket(), containerd, "containerd's socket", 60)
    import_image(cp.state, pause_archive)

    sched_cert, sched_key = layout.dir / "scheduler.crt", layout.dir / "scheduler.key"
    pki.issue_client_certificate(creds, SCHEDULER_USER, (), sched_cert, sched_key)
    write_atomic(
        layout.scheduler_kubeconfig,
        _client_kubeconfig(cp.server, creds, SCHEDULER_USER, sched_cert, sched_key),
        mode=0o600,
    )
    sched_kubeconfig = str(layout.scheduler_kubeconfig)
    scheduler = cp.spawn(
        "kube-scheduler",
        [
            str(found[binaries.KUBE_SCHEDULER].path),
            f"--kubeconfig={sched_kubeconfig}",
            f"--authentication-kubeconfig={sched_kubeconfig}",
            f"--authorization-kubeconfig={sched_kubeconfig}",
            "--bind-address=127.0.0.1",
            f"--secure-port={scheduler_port}",
            f"--cert-dir={layout.dir / 'scheduler-certs'}",
            "--leader-elect=false",
        ],
    )
    _join_cgroup(layout.cgroup + "/node", scheduler.pid)

    node_user = f"system:node:{layout.name}"
    kubelet_cert, kubelet_key = layout.dir / "kubelet-client.crt", layout.dir / "kubelet-client.key"
    pki.issue_client_certificate(creds, node_user, ("system:nodes",), kubelet_cert, kubelet_key)
    write_atomic(
        layout.kubelet_kubeconfig,
        _client_kubeconfig(cp.server, creds, node_user, kubelet_cert, kubelet_key),
        mode=0o600,
    )
    config = kubelet_configuration(layout, creds, address=address, port=kubelet_port, healthz_port=healthz_port)
    write_atomic(layout.kubelet_config, yaml.safe_dump(config, sort_keys=False))
    kubelet = cp.spawn(
        "kubelet",
        [
            *kernel_settings_shield(layout, state["sysctls_before"]),
            str(found[binaries.KUBELET].path),
            f"--config={layout.kubelet_config}",
            f"--kubeconfig={layout.kubelet_kubeconfig}",
            f"--root-dir={layout.kubelet_dir}",
            f"--cert-dir={layout.dir / 'kubelet-pki'}",
            f"--hostname-override={layout.name}",
            f"--node-ip={address}",
            "--v=2",
        ],
    )
    _join_cgroup(layout.cgroup + "/node", kubelet.pid)
    wait_node_ready(cp, layout.name, kubelet, timeout_s=NODE_READY_TIMEOUT_S)
    # Pods are refused until kube-controller-manager has made the namespace's service account.
    cluster = cp.connect()
    _wait_for(
        lambda: cluster.get("/api/v1/namespaces/default/serviceaccounts/default").status_code == 200,
        kubelet,
        "service account default/default",
        60,
    )
    state["status"] = "ready"
    cp.save()
    log.info("node %s ready (bridge %s, %s; kubelet %s)", layout.name, layout.bridge, subnet, prepared.kubelet.version)


def kernel_settings_shield(layout: NodeLayout, before: dict[str, str]) -> list[str]:
    """A command prefix that runs the kubelet in its own mount namespace where the kernel settings
    it changes (:data:`KUBELET_SYSCTLS`) are files of the node holding the host's values: it
    reads and writes those, the host's stay as they are.

    The kubelet's root directory is first made a shared bind mount of itself, so the volumes the
    kubelet mounts there in its namespace (service-account tokens, emptyDirs) propagate to the
    host's, where containerd bind-mounts them into containers. ``/proc`` is private here, so the
    files mounted over ``/proc/sys`` stay in the kubelet's namespace."""
    shield = layout.dir / "sysctl"
    script = ["set -e"]
    for name, value in before.items():
        if name == "net/ipv4/ip_forward":  # not the kubelet's; a CNI plugin would act in the host's namespace
            continue
        write_atomic(shield / name, value + "\n")
        script.append(f"mount --bind {shlex.quote(str(shield / name))} {shlex.quote(str(PROC_SYS / name))}")
    root = str(layout.kubelet_dir)
    _run(["mount", "--bind", root, root])
    _run(["mount", "--make-shared", root])
    script.append('exec "$@"')
    return ["unshare", "--mount", "--propagation", "unchanged", "--", "sh", "-c", "; ".join(script), "kubelet"]


def _wait_for(ok, record, what: str, timeout_s: float) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if ok():
            return
        if not record.alive():
            raise ClusterError(
                f"{record.name} exited during start-up (last lines of its log follow)", details=log_tail(record.log)
            )
        time.sleep(0.2)
    raise ClusterError(
        f"no {what} after {timeout_s:.0f} s (last lines of {record.name}'s log follow)", details=log_tail(record.log)
    )


def host_address(state: dict) -> str:
    """The host's address as the node's pods see it (the bridge's ``.1``): where a server on the
    host (an object store, say) listens for them. ``state`` is the instance's recorded state."""
    node = state.get(STATE_KEY)
    if not node:
        raise UsageError(f"instance {state.get('name')!r} runs no node (start one with 'crdscale up --node')")
    return node["address"]


def node_ready(node: dict) -> bool:
    """Whether a Node object's ``Ready`` condition is ``True``."""
    conditions = (node.get("status") or {}).get("conditions") or []
    return any(c.get("type") == "Ready" and c.get("status") == "True" for c in conditions)


def wait_node_ready(cp: ControlPlane, name: str, kubelet, *, timeout_s: float) -> None:
    cluster = cp.connect()

    def ready() -> bool:
        resp = cluster.get(f"/api/v1/nodes/{name}")
        return resp.status_code == 200 and node_ready(resp.json())

    _wait_for(ready, kubelet, f"Ready Node {name}", timeout_s)


def import_image(state: dict, archive: Path) -> str:
    """Import the OCI (or docker) archive ``archive`` into the node's containerd (namespace
    ``k8s.io``, the one the kubelet's pods use) by name and by digest, so pods find it as
    ``NAME:TAG`` and as ``NAME@sha256:...``; returns ctr's output (the names imported)."""
    node = state.get(STATE_KEY)
    if not node:
        raise UsageError(f"instance {state.get('name')!r} runs no node (start one with 'crdscale up --node')")
    if not Path(archive).is_file():
        raise UsageError(f"no image archive at {archive}")
    return import_archive(Path(archive), address=node["containerd_socket"], ctr=str(host_tools().ctr))


def stop(cp: ControlPlane) -> list[str]:
    """Undo the node of ``cp`` as recorded (also after ``kill -9`` of its starter): stop kubelet,
    kube-scheduler, containerd, its shims and every pod process, unmount what is mounted under
    the node, delete the bridge, remove the cgroups, restore the kernel settings. Returns what
    could not be undone (logged too)."""
    state = cp.state.get(STATE_KEY)
    if not state:
        return []
    problems: list[str] = []
    records = {p.name: p for p in cp.processes}
    for name in ("kubelet", "kube-scheduler"):
        if name in records:
            terminate_process(records[name])
    if "containerd" in records:
        terminate_process(records["containerd"], grace_s=5.0)
    # What is left in the node's cgroup: shims and the pods' processes (pause, containers).
    deadline = time.monotonic() + 15
    while (pids := cgroup_pids(state["cgroup"])) and time.monotonic() < deadline:
        for pid in pids:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        time.sleep(0.2)
    if pids:
        problems.append(f"processes still in cgroup {state['cgroup']}: {pids}")
    for target in _mounts_under(Path(state["dir"])):
        if _run(["umount", target], check=False).returncode != 0:
            if _run(["umount", "-l", target], check=False).returncode != 0:
                problems.append(f"could not unmount {target}")
    problems += _clean_host_paths(Path(state["dir"]), state.get("host_paths_before", {}), state["containerd_socket"])
    bridge = state["bridge"]
    if Path(f"/sys/class/net/{bridge}").exists():
        for link in Path(f"/sys/class/net/{bridge}/brif").glob("*"):
            _run(["ip", "link", "del", link.name], check=False)  # veths whose namespace is still held
        if _run(["ip", "link", "del", bridge], check=False).returncode != 0:
            problems.append(f"could not delete bridge {bridge}")
    problems += [f"cgroup left: {p}" for p in _remove_cgroup(state["cgroup"])]
    try:
        restored = restore_sysctls(state.get("sysctls_before", {}))
    except OSError as err:
        problems.append(f"could not restore kernel settings: {err}")
    else:
        for name, (was, now) in restored.items():
            log.info("restored %s to %s (the kubelet had set %s)", name.replace("/", "."), was, now)
    state["status"] = "stopped"
    for problem in problems:
        log.warning("node %s: %s", state.get("name"), problem)
    return problems


def _task_ids(node_dir: Path) -> list[str]:
    """The ids of the sandboxes and containers containerd ran (its task directories)."""
    tasks = node_dir / "containerd" / "state" / "io.containerd.runtime.v2.task" / "k8s.io"
    return sorted(p.name for p in tasks.iterdir()) if tasks.is_dir() else []


def shim_socket(containerd_socket: str, task_id: str) -> Path:
    """Where containerd 1.6 puts the shim socket of a task (runtime/v2/shim SocketAddress:
    ``/run/containerd/s/sha256(address/namespace/id)``, whatever its configured state dir)."""
    digest = hashlib.sha256(f"{containerd_socket}/k8s.io/{task_id}".encode()).hexdigest()
    return Path("/run/containerd/s") / digest


def _clean_host_paths(node_dir: Path, existed: dict[str, bool], containerd_socket: str) -> list[str]:
    """Remove what the node left outside its directory (see :data:`HOST_PATHS`): links to its
    pods' logs, the shims' sockets and libcni's cached results of its tasks (a killed shim or an
    unplugged sandbox leaves them), and the directories the node created."""
    problems = []
    for task_id in _task_ids(node_dir):
        shim_socket(containerd_socket, task_id).unlink(missing_ok=True)
        for cached in Path("/var/lib/cni/results").glob(f"*-{task_id}-*"):
            cached.unlink(missing_ok=True)
    prefix = str(node_dir.resolve()) + "/"
    logs = Path("/var/log/containers")
    for link in logs.glob("*.log") if logs.is_dir() else ():
        if link.is_symlink() and os.readlink(link).startswith(prefix):
            link.unlink(missing_ok=True)
    results = Path("/var/lib/cni/results")
    for cached in results.glob(f"{CNI_NETWORK}-*") if results.is_dir() else ():
        cached.unlink(missing_ok=True)
    if not existed.get("/var/lib/kubelet", True):
        for name in ("kubelet.sock", "kubelet_internal_checkpoint"):
            (Path("/var/lib/kubelet/device-plugins") / name).unlink(missing_ok=True)
    for path, was_there in existed.items():
        if was_there or not os.path.isdir(path):
            continue
        for dirpath, _dirs, _files in sorted(os.walk(path, topdown=False), key=lambda w: -w[0].count("/")):
            try:
                os.rmdir(dirpath)
            except OSError:
                pass
        if os.path.lexists(path):
            problems.append(f"{path} was created by the node and is not empty: {sorted(os.listdir(path))[:5]}")
    return problems
