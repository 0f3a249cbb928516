"""A real local control plane: etcd + kube-apiserver + kube-controller-manager on
127.0.0.1, started and stopped by crdscale.

kube-controller-manager runs by default because every real cluster runs one: its
garbage collector and resource-quota controller start a metadata informer (a
LIST and a WATCH) for every resource the server discovers, every CRD included,
and so decide what each CRD costs the server when no provider runs.

Each instance lives in its own directory under ``<cache>/instances/<name>/``:
``instance.json`` (ports, PIDs, versions, status), ``pki/`` (fresh CA, serving
cert, service-account keys, admin token, the controller-manager's client and
serving certs; private files mode 0600), ``kubeconfig``,
``controller-manager.kubeconfig``, ``etcd-data/`` and ``logs/``. Processes run in their own
sessions so they outlive the CLI that started them; ``stop_instance`` finds
them again from the recorded PIDs (checked against their start time, so a
recycled PID is never killed).
"""

from __future__ import annotations

import base64
import logging
import os
import secrets
import shutil
import subprocess
import time
from collections.abc import Mapping, Sequence
from pathlib import Path

import requests
import yaml

from crdscale.cluster import binaries, patches, pki
from crdscale.cluster import node as test_node  # the node beside the control plane (up --node)
from crdscale.cluster.clients import Cluster, Credentials, RequestsTransport, connect
from crdscale.cluster.instances import INSTANCE_FILE, list_instances
from crdscale.cluster.process import (
    LOOPBACK,
    ProcessRecord,
    free_ports,
    log_tail,
    terminate_process,
)
from crdscale.cluster.versions import DEFAULT_CONTROLLERS, DEFAULT_KUBE_VERSION, normalize_version
from crdscale.errors import ClusterError, UsageError
from crdscale.fsutil import read_json, write_atomic, write_json_atomic
from crdscale.paths import instances_dir
from crdscale.proc import start_ticks
from crdscale.timeutil import utc_iso

log = logging.getLogger(__name__)

SERVICE_CLUSTER_IP_RANGE = "10.0.0.0/24"
CONTROLLER_MANAGER = "kube-controller-manager"
# kube-controller-manager's HTTPS paths anyone may read: its default three, plus /metrics so
# that Prometheus and the direct scraper need no credentials, and /debug/pprof so that a run takes
# its heap profiles without them (the port listens on loopback only).
CONTROLLER_MANAGER_OPEN_PATHS = "/healthz,/readyz,/livez,/metrics,/debug/pprof,/debug/pprof/*"


_ETCD_FLAG_SUPPORT: dict[str, bool] = {}


def _etcd_supports(binary: Path, flag: str) -> bool:
    key = f"{binary}:{flag}"
    if key not in _ETCD_FLAG_SUPPORT:
        out = subprocess.run([str(binary), "--help"], capture_output=True, text=True, timeout=20)
        _ETCD_FLAG_SUPPORT[key] = flag in (out.stdout + out.stderr)
    return _ETCD_FLAG_SUPPORT[key]


# ---------------------------------------------------------------- the control plane


class LocalControlPlane:
    """etcd + kube-apiserver on 127.0.0.1, as a context manager or via start()/stop().

    Parameters:
        version: kube-apiserver version (``"1.37.1"``); ``None`` = the pinned default.
        etcd: ``None`` (pinned etcd built from Go modules), ``"system"`` (etcd on PATH,
            e.g. Debian's 3.4), a version, or a path.
        name: instance name; default derived from the version plus a random suffix.
        apiserver_binary: use this kube-apiserver instead of finding/building one.
        kube_source: build kube-apiserver from this local Kubernetes source tree (cached per
            commit and uncommitted diff); ``version`` is then the release a tree without git
            tags is based on. ``state["built_from"]`` records what went in.
        apiserver_flags: extra ``--flag=value`` arguments for kube-apiserver.
        apiserver_env: extra environment (``GOGC``, ``GOMEMLIMIT``, ``GODEBUG`` ...).
        controller_manager: run kube-controller-manager (built from the same modules as
            kube-apiserver); ``False`` gives the control plane crdscale measured before it.
        controller_manager_controllers: its ``--controllers`` (``"*"``: its default set);
            default :data:`DEFAULT_CONTROLLERS`.
        controller_manager_flags: extra ``--flag=value`` arguments for it.
        ready_timeout_s: how long to wait for ``/readyz``.
        keep_state: keep the instance directory (logs, etcd data) after stop.
        node: also run a node here (containerd, kubelet, kube-scheduler; see
            :mod:`crdscale.cluster.node`), so pods run; needs root and Debian's containerd.

    Example::

        with LocalControlPlane(version="1.37.1") as cp:
            cluster = cp.connect()
            print(cluster.server_version())
    """

    def __init__(
        self,
        version: str | None = None,
        *,
        etcd: str | None = None,
        name: str | None = None,
        apiserver_binary: str | None = None,
        kube_source: str | None = None,
        apiserver_flags: Sequence[str] = (),
        apiserver_env: Mapping[str, str] | None = None,
        controller_manager: bool = True,
        controller_manager_controllers: Sequence[str] = DEFAULT_CONTROLLERS,
        controller_manager_flags: Sequence[str] = (),
        ready_timeout_s: float = 180.0,
        keep_state: bool = False,
        node: bool = False,
        changes: patches.BuildChanges | None = None,
        go: str = "local",
    ):
        self.requested_version = version
        # Diffs and build tags on the release (crdscale.cluster.patches), and the Go it is built with.
        self.changes = changes or None
        self.go = go or "local"
        self.etcd_spec = etcd
        self.apiserver_binary = apiserver_binary
        self.kube_source = kube_source or None  # "" (a matrix's "as released" value) means none
        self.apiserver_flags = list(apiserver_flags)
        self.apiserver_env = dict(apiserver_env or {})
        self.controller_manager = controller_manager
        self.controller_manager_controllers = list(controller_manager_controllers)
        self.controller_manager_flags = list(controller_manager_flags)
        if controller_manager and not self.controller_manager_controllers:
            raise UsageError("kube-controller-manager needs at least one controller ('*' for its default set)")
        self.ready_timeout_s = ready_timeout_s
        self.keep_state = keep_state
        self.node = node
        if node and not controller_manager:
            raise UsageError(
                "a node needs kube-controller-manager (service-account tokens, Job and ReplicaSet controllers)"
            )
        label = "src" if self.kube_source else (version or DEFAULT_KUBE_VERSION).lstrip("v").replace(".", "-")
        self.name = name or f"k{label}-{secrets.token_hex(2)}"
        self.state_dir = instances_dir() / self.name
        self.state: dict = {}
        self._cluster: Cluster | None = None

    # -- paths and facts

    @property
    def kubeconfig(self) -> Path:
        return self.state_dir / "kubeconfig"

    @property
    def server(self) -> str:
        return self.state["server"]

    @property
    def ports(self) -> dict[str, int]:
        return self.state["ports"]

    @property
    def processes(self) -> list[ProcessRecord]:
        return [ProcessRecord.from_json(p) for p in self.state.get("processes", [])]

    def process(self, name: str) -> ProcessRecord | None:
        return next((p for p in self.processes if p.name == name), None)

    @property
    def apiserver_pid(self) -> int | None:
        p = self.process("kube-apiserver")
        return p.pid if p else None

    @property
    def credentials(self) -> pki.Credentials:
        return pki.Credentials(self.state_dir / "pki")

    @property
    def controller_manager_kubeconfig(self) -> Path:
        return self.state_dir / "controller-manager.kubeconfig"

    @property
    def controller_manager_pid(self) -> int | None:
        p = self.process(CONTROLLER_MANAGER)
        return p.pid if p else None

    @property
    def controller_manager_metrics_url(self) -> str | None:
        """Its ``/metrics`` (HTTPS, certificate signed by the instance's CA), or ``None`` when
        this instance runs no kube-controller-manager."""
        port = self.state.get("ports", {}).get("controller_manager")
        return f"https://{LOOPBACK}:{port}/metrics" if port else None

    @property
    def runs_controller_manager(self) -> bool:
        if not self.state:  # not started yet
            return self.controller_manager
        # Instances recorded before crdscale ran one have no "controller_manager" entry.
        return bool(self.state.get("controller_manager", {}).get("enabled", False))

    @property
    def etcd_metrics_url(self) -> str:
        return f"http://{LOOPBACK}:{self.ports['etcd_client']}/metrics"

    @property
    def etcd_pid(self) -> int | None:
        p = self.process("etcd")
        return p.pid if p else None

    def pprof_url(self, component: str) -> str | None:
        """Where ``component`` (``etcd`` or ``kube-controller-manager``) serves ``/debug/pprof`` to anyone on
        loopback, or ``None``: this instance runs none, or started it without (before crdscale asked for it)."""
        if component == "etcd":
            on = "--enable-pprof" in self.state.get("etcd_flags", [])
            return f"http://{LOOPBACK}:{self.ports['etcd_client']}/debug/pprof" if on else None
        if component == CONTROLLER_MANAGER and self.controller_manager_metrics_url:
            flags = self.state.get("controller_manager", {}).get("flags", [])
            on = f"--authorization-always-allow-paths={CONTROLLER_MANAGER_OPEN_PATHS}" in flags
            return f"https://{LOOPBACK}:{self.ports['controller_manager']}/debug/pprof" if on else None
        return None

    @property
    def versions(self) -> dict[str, str]:
        return dict(self.state.get("versions", {}))

    def save(self) -> None:
        """Write the instance's record (``instance.json``: :attr:`state`) atomically."""
        write_json_atomic(self.state_dir / INSTANCE_FILE, self.state)

    # -- lifecycle

    def __enter__(self) -> LocalControlPlane:
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()

    def start(self) -> LocalControlPlane:
        """Resolve binaries (building them if needed), start etcd then kube-apiserver,
        wait for ``/readyz``. Raises :class:`ClusterError` with the failing log's tail."""
        if self.state_dir.exists():
            raise UsageError(
                f"instance {self.name!r} already exists ({self.state_dir}); pick another name or run 'crdscale down {self.name}'"
            )
        node_binaries = None
        if self.node:
            # The kubelet is the control plane's release (a source tree's base release).
            node_version = normalize_version(self.requested_version or DEFAULT_KUBE_VERSION)
            test_node.check_host(node_version)
            node_binaries = test_node.prepare(node_version)
        apiserver = binaries.kube_apiserver(
            self.requested_version,
            binary=self.apiserver_binary,
            source=self.kube_source,
            changes=self.changes,
            go=self.go,
        )
        kcm = None
        if self.controller_manager:
            # The same release as kube-apiserver: from the same source tree (whose base release is
            # the one asked for), else the version found (an explicit binary's may be unknown).
            same = self.requested_version if self.kube_source or apiserver.version == "unknown" else apiserver.version
            kcm = binaries.kube_controller_manager(same, source=self.kube_source, changes=self.changes, go=self.go)
        etcd = binaries.etcd(self.etcd_spec)
        self.state_dir.mkdir(parents=True)
        (self.state_dir / "logs").mkdir()
        api_port, etcd_client, etcd_peer, kcm_port = free_ports(4)
        self.state = {
            "name": self.name,
            "status": "starting",
            "created_at": utc_iso(),
            "state_dir": str(self.state_dir),
            "server": f"https://{LOOPBACK}:{api_port}",
            "kubeconfig": str(self.kubeconfig),
            "ports": {"apiserver": api_port, "etcd_client": etcd_client, "etcd_peer": etcd_peer},
            "binaries": {"kube-apiserver": str(apiserver.path), "etcd": str(etcd.path)},
            "versions": {"kube-apiserver": apiserver.version, "etcd": etcd.version},
            # Binaries built from a local source tree: the tree, commit, uncommitted diff's sha256.
            "built_from": {"kube-apiserver": apiserver.built_from} if apiserver.built_from else {},
            "apiserver_flags": self.apiserver_flags,
            "apiserver_env": self.apiserver_env,
            "controller_manager": {"enabled": kcm is not None},
            # Who is starting it: if this process dies before the servers are up, the
            # instance is stale even though no server process was recorded yet.
            "starter": ProcessRecord("starter", os.getpid(), start_ticks(os.getpid()), "").to_json(),
            "processes": [],
        }
        if kcm is not None:
            self.state["ports"]["controller_manager"] = kcm_port
            self.state["binaries"][CONTROLLER_MANAGER] = str(kcm.path)
            self.state["versions"][CONTROLLER_MANAGER] = _reported_version(kcm.path) or kcm.version
            if kcm.built_from:
                self.state["built_from"][CONTROLLER_MANAGER] = kcm.built_from
        self.save()
        try:
            creds = pki.create_credentials(self.state_dir / "pki")
            if self.node:
                self.apiserver_flags += test_node.apiserver_flags(creds)
                self.state["apiserver_flags"] = self.apiserver_flags
            self._write_kubeconfig(creds)
            self._start_etcd(etcd.path)
            self._start_apiserver(apiserver.path, creds)
            reported = self.connect().server_version()
            self.state["versions"]["kube-apiserver"] = reported
            if kcm is not None:
                self._start_controller_manager(kcm.path, creds)
            if node_binaries is not None:
                test_node.start(self, node_binaries)
            self.state["status"] = "ready"
            self.save()
        except BaseException:
            # A half-started instance is useless; its log tail travels in the error's details.
            self.keep_state = False
            self.stop()
            raise
        with_kcm = f", kube-controller-manager {self.versions[CONTROLLER_MANAGER]}" if kcm is not None else ""
        log.info(
            f"control plane {self.name} ready: kube-apiserver {reported} at {self.server}, etcd {etcd.version}{with_kcm}"
        )
        return self

    def spawn(self, name: str, argv: list[str], env: Mapping[str, str] | None = None) -> ProcessRecord:
        """Start ``argv`` in its own session (it outlives the CLI), its output in ``logs/NAME.log``,
        and record it at once, so that ``crdscale down`` stops it whatever happens next."""
        log_path = self.state_dir / "logs" / f"{name}.log"
        with open(log_path, "ab") as output:
            proc = subprocess.Popen(
                argv,
                stdout=output,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                cwd=self.state_dir,
                env=dict(os.environ, **(env or {})),
                start_new_session=True,  # survive the CLI that started it; own process group
            )
        record = ProcessRecord(name, proc.pid, start_ticks(proc.pid), str(log_path))
        # Recorded before waiting for readiness, so `crdscale down` can stop it even if
        # this process is killed right now.
        self.state["processes"].append(record.to_json())
        self.save()
        return record

    def adopt_process(self, name: str, pid: int, log: str | Path = "") -> ProcessRecord:
        """Record a process the harness started beside this instance (Prometheus, client
        programs), so that ``crdscale down`` stops it even after ``kill -9`` of its starter."""
        record = ProcessRecord(name, pid, start_ticks(pid), str(log))
        self.state["processes"].append(record.to_json())
        self.save()
        return record

    def release_process(self, pid: int) -> None:
        """Forget an adopted process that was stopped normally (so the instance is not stale)."""
        self.state["processes"] = [p for p in self.state["processes"] if int(p["pid"]) != pid]
        self.save()

    def _start_etcd(self, binary: Path) -> None:
        client = f"http://{LOOPBACK}:{self.ports['etcd_client']}"
        peer = f"http://{LOOPBACK}:{self.ports['etcd_peer']}"
        argv = [
            str(binary),
            "--name",
            "default",
            "--data-dir",
            str(self.state_dir / "etcd-data"),
            "--listen-client-urls",
            client,
            "--advertise-client-urls",
            client,
            "--listen-peer-urls",
            peer,
            "--initial-advertise-peer-urls",
            peer,
            "--initial-cluster",
            f"default={peer}",
            # Large LIST experiments must not trip etcd's default 2 GiB quota.
            "--quota-backend-bytes",
            str(8 * 1024**3),
        ]
        if _etcd_supports(binary, "--unsafe-no-fsync"):
            # Loopback experiments measure the API server, not disk fsync latency.
            argv.append("--unsafe-no-fsync")
        if _etcd_supports(binary, "--enable-pprof"):
            # /debug/pprof on the client URL: a run takes etcd's heap profile at every step.
            argv.append("--enable-pprof")
        self.state["etcd_flags"] = argv[1:]
        record = self.spawn("etcd", argv)
        self._wait(record, f"{client}/health", lambda r: r.status_code == 200 and "true" in r.text, timeout_s=60)

    def _start_apiserver(self, binary: Path, creds: pki.Credentials) -> None:
        argv = self._apiserver_argv(binary, creds, self.ports["apiserver"], self.apiserver_flags)
        record = self.spawn("kube-apiserver", argv, env=self.apiserver_env)
        self._wait_apiserver_ready(record, self.server, creds)

    def _apiserver_argv(self, binary: Path, creds: pki.Credentials, port: int, flags: Sequence[str]) -> list[str]:
        return [
            str(binary),
            f"--bind-address={LOOPBACK}",
            f"--advertise-address={LOOPBACK}",
            f"--secure-port={port}",
            f"--etcd-servers=http://{LOOPBACK}:{self.ports['etcd_client']}",
            f"--tls-cert-file={creds.serving_cert}",
            f"--tls-private-key-file={creds.serving_key}",
            f"--client-ca-file={creds.ca_cert}",
            f"--token-auth-file={creds.token_file}",
            # A list flag: given twice it is refused, so a caller's (a node's Node,RBAC) replaces it.
            *(() if any(f.startswith("--authorization-mode") for f in flags) else ("--authorization-mode=RBAC",)),
            "--service-account-issuer=https://kubernetes.default.svc.cluster.local",
            f"--service-account-key-file={creds.sa_public_key}",
            f"--service-account-signing-key-file={creds.sa_private_key}",
            f"--service-cluster-ip-range={SERVICE_CLUSTER_IP_RANGE}",
            # Without a controller-manager nothing creates service accounts or mints their tokens,
            # so the admission plugin that requires them is off (as crdscale always ran before it).
            *(() if self.runs_controller_manager else ("--disable-admission-plugins=ServiceAccount",)),
            "--allow-privileged=true",
            # The default lease reconciler refuses a loopback advertise address.
            "--endpoint-reconciler-type=none",
            "--profiling=true",
            f"--cert-dir={self.state_dir / 'pki'}",
            *flags,
        ]

    def controller_manager_argv(self, binary: Path, creds: pki.Credentials) -> list[str]:
        """kube-controller-manager's command line: as kubeadm runs it (its own client certificate
        and kubeconfig for the API, delegated authentication and authorization, one service
        account per controller, the service-account key to mint tokens with), on loopback.
        Every flag here exists from v1.24 on."""
        kubeconfig = self.controller_manager_kubeconfig
        return [
            str(binary),
            f"--kubeconfig={kubeconfig}",
            f"--authentication-kubeconfig={kubeconfig}",
            f"--authorization-kubeconfig={kubeconfig}",
            f"--authorization-always-allow-paths={CONTROLLER_MANAGER_OPEN_PATHS}",
            f"--bind-address={LOOPBACK}",
            f"--secure-port={self.ports['controller_manager']}",
            f"--tls-cert-file={creds.controller_manager_serving_cert}",
            f"--tls-private-key-file={creds.controller_manager_serving_key}",
            f"--client-ca-file={creds.ca_cert}",
            f"--root-ca-file={creds.ca_cert}",
            f"--service-account-private-key-file={creds.sa_private_key}",
            "--use-service-account-credentials=true",
            f"--cluster-signing-cert-file={creds.ca_cert}",
            f"--cluster-signing-key-file={creds.ca_key}",
            f"--controllers={','.join(self.controller_manager_controllers)}",
            # Leader election stays on (its lease renewals are real traffic), with deadlines that
            # survive a loaded machine: at the defaults (15 s lease, 10 s renew deadline) a 2-core
            # machine serving ~1,000 CRDs missed a renewal, kube-controller-manager exited and the
            # run failed.
            "--leader-elect-lease-duration=60s",
            "--leader-elect-renew-deadline=40s",
            "--profiling=true",
            *self.controller_manager_flags,
        ]

    def _start_controller_manager(self, binary: Path, creds: pki.Credentials) -> None:
        self._write_controller_manager_kubeconfig(creds)
        argv = self.controller_manager_argv(binary, creds)
        self.state["controller_manager"].update(controllers=self.controller_manager_controllers, flags=argv[1:])
        record = self.spawn(CONTROLLER_MANAGER, argv)
        session = Credentials(verify=str(creds.ca_cert)).session()  # no token: /healthz is open
        try:
            url = f"https://{LOOPBACK}:{self.ports['controller_manager']}/healthz"
            self._wait(record, url, lambda r: r.status_code == 200, timeout_s=self.ready_timeout_s, session=session)
        finally:
            session.close()

    def _wait_apiserver_ready(self, record: ProcessRecord, server: str, creds: pki.Credentials) -> None:
        session = Credentials(
            verify=str(creds.ca_cert), headers={"Authorization": f"Bearer {creds.admin_token()}"}
        ).session()
        try:
            self._wait(
                record,
                f"{server}/readyz",
                lambda r: r.status_code == 200,
                timeout_s=self.ready_timeout_s,
                session=session,
            )
        finally:
            session.close()

    def start_second_apiserver(self, name: str, flags: Sequence[str]) -> SecondApiserver:
        """Start another kube-apiserver on this instance's etcd: same binary, credentials and
        flags, plus ``flags`` (which win over the instance's own), on a free port.

        For comparing two configurations on the very same stored objects, e.g.
        ``--watch-cache=false`` to serve every LIST from etcd. The process is recorded in
        the instance (``crdscale down`` stops it too); stop it with
        :meth:`SecondApiserver.stop`, or use the returned object as a context manager.
        Returns once its ``/readyz`` answers.
        """
        if not name.startswith("kube-apiserver-"):
            raise UsageError(f"a second kube-apiserver's name starts with 'kube-apiserver-' (got {name!r})")
        if self.process(name) is not None:
            raise UsageError(f"instance {self.name!r} already runs a process named {name!r}")
        binary = Path(self.state["binaries"]["kube-apiserver"])
        # attach() does not know the flags the instance was started with; its state does.
        own_flags = self.state.get("apiserver_flags", self.apiserver_flags)
        env = self.state.get("apiserver_env", self.apiserver_env)
        creds = self.credentials
        (port,) = free_ports(1)
        server = f"https://{LOOPBACK}:{port}"
        record = self.spawn(name, self._apiserver_argv(binary, creds, port, [*own_flags, *flags]), env=env)
        second = SecondApiserver(self, record, server)
        try:
            self._wait_apiserver_ready(record, server, creds)
        except BaseException:
            second.stop()
            raise
        log.info(f"{name} ready at {server} (on {self.name}'s etcd, extra flags: {' '.join(flags)})")
        return second

    def _wait(self, record: ProcessRecord, url: str, ok, *, timeout_s: float, session=None) -> None:
        getter = session or requests
        deadline = time.monotonic() + timeout_s
        last = "no answer yet"
        while time.monotonic() < deadline:
            if not record.alive():
                raise ClusterError(
                    f"{record.name} exited during start-up (last lines of its log follow)",
                    details=log_tail(record.log),
                )
            try:
                resp = getter.get(url, timeout=5)
                if ok(resp):
                    return
                last = f"HTTP {resp.status_code}"
            except requests.RequestException as err:
                last = type(err).__name__
            time.sleep(0.3)
        raise ClusterError(
            f"{record.name} not ready after {timeout_s:.0f} s ({url}: {last}; last lines of its log follow)",
            details=log_tail(record.log),
        )

    def _write_kubeconfig(self, creds: pki.Credentials) -> None:
        cfg = {
            "apiVersion": "v1",
            "kind": "Config",
            "clusters": [
                {
                    "name": self.name,
                    "cluster": {
                        "server": self.server,
                        "certificate-authority-data": base64.b64encode(creds.ca_cert.read_bytes()).decode(),
                    },
                }
            ],
            "users": [{"name": pki.ADMIN_USER, "user": {"token": creds.admin_token()}}],
            "contexts": [{"name": self.name, "context": {"cluster": self.name, "user": pki.ADMIN_USER}}],
            "current-context": self.name,
        }
        write_atomic(self.kubeconfig, yaml.safe_dump(cfg, sort_keys=False), mode=0o600)

    def _write_controller_manager_kubeconfig(self, creds: pki.Credentials) -> None:
        cfg = {
            "apiVersion": "v1",
            "kind": "Config",
            "clusters": [
                {"name": self.name, "cluster": {"server": self.server, "certificate-authority": str(creds.ca_cert)}}
            ],
            "users": [
                {
                    "name": pki.CONTROLLER_MANAGER_USER,
                    "user": {
                        "client-certificate": str(creds.controller_manager_client_cert),
                        "client-key": str(creds.controller_manager_client_key),
                    },
                }
            ],
            "contexts": [{"name": self.name, "context": {"cluster": self.name, "user": pki.CONTROLLER_MANAGER_USER}}],
            "current-context": self.name,
        }
        write_atomic(self.controller_manager_kubeconfig, yaml.safe_dump(cfg, sort_keys=False), mode=0o600)

    def connect(self) -> Cluster:
        """A :class:`Cluster` for this instance (created once, reused)."""
        if self._cluster is None:
            self._cluster = connect(self.kubeconfig)
        return self._cluster

    def alive(self) -> dict[str, bool]:
        """Process name -> whether it is still running."""
        return {p.name: p.alive() for p in self.processes}

    def stop(self) -> None:
        """Stop exactly the processes this instance started; remove its directory unless ``keep_state``."""
        if self._cluster is not None:
            self._cluster.close()
            self._cluster = None
        if self.state.get("node"):  # before the API server: the kubelet's pods go first
            test_node.stop(self)
        # Clients of kube-apiserver first, then kube-apiservers: stopping etcd under one makes it
        # log errors for seconds, and the controller-manager would retry its watches meanwhile.
        for record in sorted(self.processes, key=_stop_order):
            terminate_process(record)
        if self.state:
            self.state["status"] = "stopped"
            if self.state_dir.exists():
                self.save()
        if not self.keep_state and self.state_dir.exists():
            shutil.rmtree(self.state_dir, ignore_errors=True)

    @classmethod
    def attach(cls, name: str) -> LocalControlPlane:
        """An object for an instance started elsewhere (e.g. by ``crdscale up``)."""
        state_file = instances_dir() / name / INSTANCE_FILE
        if not state_file.is_file():
            raise UsageError(f"no local instance named {name!r} (see 'crdscale status')")
        cp = cls(name=name)
        cp.state = read_json(state_file)
        cp.requested_version = cp.state.get("versions", {}).get("kube-apiserver")
        return cp


def _stop_order(record: ProcessRecord) -> int:
    if record.name == CONTROLLER_MANAGER:
        return 0
    return 1 if record.name.startswith("kube-apiserver") else 2


def _reported_version(binary: Path) -> str | None:
    """``v1.37.1`` from ``kube-controller-manager --version`` (``Kubernetes v1.37.1``), else ``None``."""
    try:
        out = subprocess.run([str(binary), "--version"], capture_output=True, text=True, timeout=30).stdout
    except (OSError, subprocess.SubprocessError):
        return None
    words = out.split()
    return words[-1] if words and words[-1].startswith("v") else None


class SecondApiserver:
    """A kube-apiserver started by :meth:`LocalControlPlane.start_second_apiserver` beside the
    instance's own, on the same etcd.

    Attributes:
        record: its process (name, pid, log).
        server: its URL; it accepts the instance's credentials.
    """

    def __init__(self, plane: LocalControlPlane, record: ProcessRecord, server: str):
        self.plane = plane
        self.record = record
        self.server = server

    @property
    def pid(self) -> int:
        return self.record.pid

    def connect(self, like: Cluster) -> Cluster:
        """A :class:`Cluster` for this server with the credentials of ``like`` (the instance's cluster)."""
        return Cluster(server=self.server, transport=RequestsTransport(like.credentials), credentials=like.credentials)

    def stop(self) -> None:
        """Stop it and forget it in the instance's record."""
        terminate_process(self.record)
        self.plane.release_process(self.record.pid)

    def __enter__(self) -> SecondApiserver:
        return self

    def __exit__(self, *exc) -> None:
        self.stop()


# ---------------------------------------------------------------- instances


def instance_serving(server: str) -> LocalControlPlane | None:
    """The ready local instance whose kube-apiserver is at ``server``, or ``None`` (another cluster)."""
    for info in list_instances():
        if info.status == "ready" and info.server.rstrip("/") == server.rstrip("/"):
            return LocalControlPlane.attach(info.name)
    return None


def default_kubeconfig() -> Path | None:
    """The kubeconfig of the one ready local instance, or ``None`` when none is ready.

    With several ready, which one the user meant is a guess, and a probe of the wrong control plane
    is a wrong number that looks right: refused, naming them.
    """
    ready = [info for info in list_instances() if info.status == "ready"]
    if len(ready) > 1:
        names = ", ".join(info.name for info in ready)
        raise UsageError(
            f"{len(ready)} local instances are up ({names}): pass --kubeconfig to say which "
            f"(e.g. --kubeconfig {ready[0].kubeconfig}), or stop the others with 'crdscale down NAME'"
        )
    if ready:
        log.info("using local instance %s (%s); --kubeconfig chooses another cluster", ready[0].name, ready[0].server)
        return Path(ready[0].kubeconfig)
    return None


def stop_instance(name: str) -> LocalControlPlane:
    """Stop instance ``name`` (even one whose starter was killed) and remove its directory."""
    cp = LocalControlPlane.attach(name)
    cp.stop()
    return cp
