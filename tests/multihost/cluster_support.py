"""A simulated MPI Operator cluster on one Linux machine: one network namespace per pod.

What the MPI Operator (v0.8.2, ``pkg/controller/mpi_job_controller.go``) and the kubelet do for
an MPIJob, done here from the MPIJob that ``lanenb``'s manifest builder produced (never retyped):

- pods = hosts: ``<prefix>l`` (launcher) and ``<prefix>w<i>`` network namespaces, each with one
  veth (``eth0``, 10.77.0.x/24) on a bridge that lives in its own ``<prefix>sw`` namespace (so
  nothing is created in the machine's own network namespace), and ``/etc/netns/<ns>/hosts``
  with the operator's DNS names (``<job>-worker-<i>.<job>-worker.<ns>.svc`` and the short forms the
  pods' DNS search path resolves);
- the ``<job>-ssh`` Secret: an ECDSA P-521 key (``EC PRIVATE KEY`` PEM, as ``newSSHAuthSecret``)
  mounted at ``spec.sshAuthMountPath`` as ``id_rsa``, ``id_rsa.pub``, ``authorized_keys``, mode
  0600 (``setupSSHOnPod``), laid out like a kubelet Secret volume (``..data`` symlinks, 1777 dir);
- the ``<job>-config`` ConfigMap at ``/etc/mpi``: ``hostfile`` (``<host> slots=N`` per worker,
  0444) and ``discover_hosts.sh`` (0555) (``newConfigMap``, ``updateDiscoverHostsInConfigMap``);
- worker containers run their ``command`` (sshd under ``lanenb_trainer.worker_init``) with ``trainer/ssh/sshd_config``
  as the image's sshd drop-in; the launcher runs its ``command + args`` with its ``env`` plus what
  ``newLauncherPodTemplate`` adds (``K_MPI_JOB_ROLE``, ``OMPI_MCA_*``, ``NVIDIA_*`` cleared) and
  ``trainer/ssh/ssh_config`` as the image's ssh drop-in;
- ``launcherCreationPolicy: WaitForWorkersReady``: the launcher starts once every worker pod is
  Ready, i.e. its container started and its ``readinessProbe`` (if any; ``tcpSocket`` as the
  kubelet runs it) succeeded;
- a pod whose ``securityContext`` says ``runAsNonRoot`` without a ``runAsUser`` runs as OpenShift's
  restricted SCC runs it: an arbitrary UID from the namespace's range (:data:`SCC_UID`) with GID 0
  and no passwd entry, each pod with its own copy of the image's ``/etc/passwd`` (group-writable,
  as trainer/Dockerfile leaves it); its emptyDir volumes are fresh 0777 directories.

The machine stands in for the image: its Python, Open MPI and sshd, the repository's ``trainer/``
as the image's WORKDIR ``/opt/lanenb`` (the launcher's working directory, which mpirun gives the
ranks too, so both run this checkout's ``lanenb_trainer``), and :data:`IMAGE_FILES` at their image
paths. Every name starts with ``PREFIX``; :func:`cleanup_leftovers` removes what a crashed run left.
"""

from __future__ import annotations

import os
import secrets
import shutil
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from lanenb.launch.lines import LogLine, TaggedOutputParser

PREFIX = "lnbmh-"
SUBNET = "10.77.0"
HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]
SSH_FILES = REPO / "trainer" / "ssh"  # the files trainer/Dockerfile COPYs into the image
POD = HERE / "pod.py"
IMAGE_WORKDIR = REPO / "trainer"  # the image's WORKDIR /opt/lanenb (lanenb_trainer inside)
IMAGE_FILES = {"/usr/local/bin/lanenb-entrypoint": str(REPO / "trainer" / "entrypoint.sh")}
SCC_UID, SCC_GID = 1000770000, 0  # what the restricted SCC gives a pod: the range's first UID, group 0
ROOT_SSH_PATH = "/root/.ssh"  # the operator's rootSSHPath: the Secret's mode is 0600 only there
MPI_CONFIG_MOUNT = "/etc/mpi"  # the operator's configMountPath (fixed in its code)
# What newLauncherPodTemplate appends for mpiImplementation OpenMPI (ompiEnvVars + slots + NVIDIA).
def operator_launcher_env(slots: int) -> dict[str, str]:
    return {
        "K_MPI_JOB_ROLE": "launcher",
        "OMPI_MCA_orte_keep_fqdn_hostnames": "true",
        "OMPI_MCA_orte_default_hostfile": f"{MPI_CONFIG_MOUNT}/hostfile",
        "OMPI_MCA_plm_rsh_args": "-o ConnectionAttempts=10",
        "OMPI_MCA_orte_set_default_slots": str(slots),
        "NVIDIA_VISIBLE_DEVICES": "",
        "NVIDIA_DRIVER_CAPABILITIES": "",
    }


def sh(argv: list[str], *, timeout: float = 30, check: bool = True) -> subprocess.CompletedProcess:
    """Run a short system command (argv list) with a timeout; output captured."""
    return subprocess.run(argv, capture_output=True, text=True, timeout=timeout, check=check)


def unavailable() -> str | None:
    """Why the simulation cannot run here (None when it can): root, ip netns, sshd, ssh-keygen."""
    if os.geteuid() != 0:
        return "needs root (network namespaces, bind mounts)"
    for tool in ("ip", "mpirun", "ssh", "ssh-keygen", "mount"):
        if shutil.which(tool) is None:
            return f"{tool} not installed (scripts/setup.sh installs iproute2, openssh-server, openmpi-bin)"
    if not Path("/usr/sbin/sshd").exists():
        return "/usr/sbin/sshd not installed (apt-get install openssh-server)"
    probe = f"{PREFIX}probe-{os.getpid()}"
    try:
        sh(["ip", "netns", "add", probe], timeout=10)
    except (subprocess.CalledProcessError, subprocess.TimeoutExpired) as exc:
        return f"ip netns add failed: {getattr(exc, 'stderr', exc)}"
    sh(["ip", "netns", "del", probe], timeout=10, check=False)
    return None


def _netns_list() -> list[str]:
    out = sh(["ip", "netns", "list"], timeout=10, check=False).stdout
    return [line.split()[0] for line in out.splitlines() if line.strip()]


def kill_netns_processes(ns: str) -> None:
    """SIGKILL every process inside network namespace ``ns`` (a host losing power)."""
    for _ in range(5):
        pids = [int(p) for p in sh(["ip", "netns", "pids", ns], timeout=10, check=False).stdout.split()]
        if not pids:
            return
        for pid in pids:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        time.sleep(0.2)


def delete_netns(ns: str) -> None:
    kill_netns_processes(ns)
    sh(["ip", "netns", "del", ns], timeout=10, check=False)
    shutil.rmtree(Path("/etc/netns") / ns, ignore_errors=True)


def cleanup_leftovers(prefix: str = PREFIX) -> list[str]:
    """Remove every namespace (with its veths, bridge and sshd) whose name starts with ``prefix``."""
    gone = [ns for ns in _netns_list() if ns.startswith(prefix)]
    for ns in gone:
        delete_netns(ns)
    etc = Path("/etc/netns")
    if etc.is_dir():
        for leftover in etc.glob(prefix + "*"):
            shutil.rmtree(leftover, ignore_errors=True)
    return gone


def prepare_machine() -> None:
    """What trainer/Dockerfile does to the image once: sshd's privilege-separation dir and host keys,
    plus the mount points for the operator's fixed paths (empty directories)."""
    Path("/run/sshd").mkdir(mode=0o755, exist_ok=True)
    sh(["ssh-keygen", "-A"], timeout=60)
    for d in ("/etc/ssh/sshd_config.d", "/etc/ssh/ssh_config.d", MPI_CONFIG_MOUNT):
        Path(d).mkdir(parents=True, exist_ok=True)


def exposed_paths() -> list[str]:
    """The folders holding this machine's Python that other UIDs cannot reach (a pyenv under
    root's 0700 home), for ``pod.py --expose``: an image's Python is readable by any UID."""
    out: list[str] = []
    for prefix in dict.fromkeys((sys.prefix, sys.base_prefix)):
        parts = Path(prefix).resolve().parts
        for i in range(2, len(parts)):
            if not Path(*parts[:i]).stat().st_mode & 0o001:
                out.append(str(Path(*parts[:i + 1])))
                break
    return list(dict.fromkeys(out))


def write_ssh_secret(mount_dir: Path, mode: int = 0o600) -> None:
    """The operator's ``<job>-ssh`` Secret as the kubelet mounts it at ``sshAuthMountPath`` (``mode``:
    the volume's defaultMode, 0600 at /root/.ssh, else the Secret volume default 0644)."""
    mount_dir.mkdir(parents=True)
    stamp = mount_dir / "..2025_01_01_00_00_00.000000001"
    stamp.mkdir()
    key = stamp / "id_rsa"
    sh(["ssh-keygen", "-q", "-t", "ecdsa", "-b", "521", "-m", "PEM", "-N", "", "-C", "", "-f", str(key)], timeout=30)
    shutil.copy(stamp / "id_rsa.pub", stamp / "authorized_keys")
    for name in ("id_rsa", "id_rsa.pub", "authorized_keys"):
        os.chmod(stamp / name, mode)
    os.symlink(stamp.name, mount_dir / "..data")
    for name in ("id_rsa", "id_rsa.pub", "authorized_keys"):
        os.symlink(f"..data/{name}", mount_dir / name)
    os.chmod(mount_dir, 0o1777)


@dataclass
class Host:
    """One pod: its network namespace, address, names and running container."""

    ns: str
    ip: str
    hostname: str
    fqdn: str
    port: str  # its veth's name in the switch namespace
    proc: subprocess.Popen | None = None


@dataclass
class SimCluster:
    """The pods of one MPIJob as hosts; ``start()`` brings workers up, ``run_launcher()`` trains.

    Args:
        job: the MPIJob dict from ``manifests.build_mpijob``.
        workdir: scratch space (keys, ConfigMap files, logs).
        sshd_delay: worker index -> seconds its container runs before sshd starts listening.
    """

    job: dict[str, Any]
    workdir: Path
    sshd_delay: dict[int, float] = field(default_factory=dict)
    prefix: str = field(default_factory=lambda: f"{PREFIX}{secrets.token_hex(3)}-")
    hosts: list[Host] = field(default_factory=list)
    lines: list[LogLine] = field(default_factory=list)
    raw: list[str] = field(default_factory=list)

    def __post_init__(self) -> None:
        meta, spec = self.job["metadata"], self.job["spec"]
        self.name, self.namespace = meta["name"], meta.get("namespace", "default")
        self.slots = int(spec.get("slotsPerWorker") or 1)
        replicas = spec["mpiReplicaSpecs"]
        self.workers = int(replicas["Worker"]["replicas"])
        self.launcher_container = replicas["Launcher"]["template"]["spec"]["containers"][0]
        self.worker_container = replicas["Worker"]["template"]["spec"]["containers"][0]
        self.ssh_mount = spec["sshAuthMountPath"]
        self.run_as = {role: self._scc_user(replicas[replica]["template"]["spec"])
                       for role, replica in (("launcher", "Launcher"), ("worker", "Worker"))}
        self.empty_dirs = {role: self._empty_dirs(replicas[replica]["template"]["spec"])
                           for role, replica in (("launcher", "Launcher"), ("worker", "Worker"))}
        service = f"{self.name}-worker"
        for i, role in [(i, f"w{i}") for i in range(self.workers)] + [(self.workers, "l")]:
            hostname = f"{self.name}-worker-{i}" if role != "l" else f"{self.name}-launcher"
            self.hosts.append(Host(ns=self.prefix + role, ip=f"{SUBNET}.{10 + i}", hostname=hostname,
                                   fqdn=f"{hostname}.{service}.{self.namespace}.svc", port=f"p{role}"))
        self.switch = self.prefix + "sw"

    @staticmethod
    def _scc_user(pod: dict[str, Any]) -> tuple[int, int] | None:
        """(UID, GID) a non-root pod without a fixed UID gets from the restricted SCC; None: root."""
        contexts = [pod.get("securityContext") or {}, *(c.get("securityContext") or {} for c in pod["containers"])]
        if any(c.get("runAsUser") is not None for c in contexts):
            raise NotImplementedError("pods with a fixed runAsUser are not simulated")
        return (SCC_UID, SCC_GID) if any(c.get("runAsNonRoot") for c in contexts) else None

    @staticmethod
    def _empty_dirs(pod: dict[str, Any]) -> list[tuple[str, str]]:
        """(volume name, mount path) of the container's disk-backed emptyDirs, parents first."""
        names = {v["name"] for v in pod.get("volumes") or []
                 if "emptyDir" in v and (v["emptyDir"] or {}).get("medium") != "Memory"}
        mounts = [(m["name"], m["mountPath"]) for m in pod["containers"][0].get("volumeMounts") or []
                  if m["name"] in names]
        return sorted(mounts, key=lambda m: len(m[1]))

    @property
    def launcher(self) -> Host:
        return self.hosts[-1]

    def worker(self, i: int) -> Host:
        return self.hosts[i]

    # ------------------------------------------------------------------ network + files
    def _network(self) -> None:
        sh(["ip", "netns", "add", self.switch])
        sh(["ip", "-n", self.switch, "link", "add", "br0", "type", "bridge"])
        sh(["ip", "-n", self.switch, "link", "set", "br0", "up"])
        hosts_lines = ["127.0.0.1 localhost"]
        for h in self.hosts:
            short = h.fqdn.rsplit(f".{self.namespace}.svc", 1)[0]
            hosts_lines.append(f"{h.ip} {h.fqdn}.cluster.local {h.fqdn} {short} {h.hostname}")
        for h in self.hosts:
            sh(["ip", "netns", "add", h.ns])
            sh(["ip", "-n", self.switch, "link", "add", h.port, "type", "veth", "peer", "name", "eth0",
                "netns", h.ns])
            sh(["ip", "-n", self.switch, "link", "set", h.port, "master", "br0", "up"])
            sh(["ip", "-n", h.ns, "addr", "add", f"{h.ip}/24", "dev", "eth0"])
            sh(["ip", "-n", h.ns, "link", "set", "eth0", "up"])
            sh(["ip", "-n", h.ns, "link", "set", "lo", "up"])
            etc = Path("/etc/netns") / h.ns
            etc.mkdir(parents=True, exist_ok=True)
            (etc / "hosts").write_text("\n".join(hosts_lines) + "\n")

    def _files(self) -> None:
        self.secret = self.workdir / "ssh-secret"
        write_ssh_secret(self.secret, 0o600 if self.ssh_mount == ROOT_SSH_PATH else 0o644)
        for h in self.hosts:  # each container's own writable layer: /etc/passwd, emptyDirs
            role = "launcher" if h is self.launcher else "worker"
            own = self.workdir / h.hostname
            own.mkdir()
            if self.run_as[role]:
                shutil.copy("/etc/passwd", own / "passwd")
                (own / "passwd").chmod(0o664)  # chmod g=u /etc/passwd in trainer/Dockerfile
            for name, _path in self.empty_dirs[role]:
                (own / name).mkdir()
                (own / name).chmod(0o777)  # as the kubelet makes an emptyDir
        self.config = self.workdir / "mpi-config"
        self.config.mkdir()
        hostfile = self.config / "hostfile"
        hostfile.write_text("".join(f"{self.worker(i).fqdn} slots={self.slots}\n" for i in range(self.workers)))
        hostfile.chmod(0o444)
        discover = self.config / "discover_hosts.sh"
        discover.write_text("#!/bin/sh\n" + "".join(f"echo {self.worker(i).fqdn}\n" for i in range(self.workers)))
        discover.chmod(0o555)
        for kind in ("sshd_config", "ssh_config"):
            d = self.workdir / f"{kind}.d"
            d.mkdir()
            shutil.copy(SSH_FILES / kind, d / "lanenb.conf")

    def _binds(self, host: Host, *, launcher: bool) -> list[str]:
        role = "launcher" if launcher else "worker"
        own = self.workdir / host.hostname
        binds = [f"{own / name}:{path}" for name, path in self.empty_dirs[role]]  # before mounts inside them
        binds += [f"{self.secret}:{self.ssh_mount}",
                  f"{self.workdir / 'sshd_config.d'}:/etc/ssh/sshd_config.d",
                  f"{self.workdir / 'ssh_config.d'}:/etc/ssh/ssh_config.d"]
        if launcher:
            binds.append(f"{self.config}:{MPI_CONFIG_MOUNT}")
        if self.run_as[role]:
            binds.append(f"{own / 'passwd'}:/etc/passwd")
        out: list[str] = []
        for b in binds:
            out += ["--bind", b]
        return out

    def _image_env(self, hostname: str, role: str = "worker") -> dict[str, str]:
        """The image's environment (the machine's PATH and interpreter stand in for it) + the kubelet's."""
        env = {k: v for k, v in os.environ.items()
               if k in ("PATH", "PYENV_ROOT", "PYENV_VERSION", "LANG", "LD_LIBRARY_PATH", "VIRTUAL_ENV")}
        env.update({"HOME": "/root", "HOSTNAME": hostname, "PYTHONUNBUFFERED": "1"})
        if self.run_as[role]:  # the interpreter itself first: pyenv's shims are root's tool
            env["PATH"] = os.pathsep.join([os.path.dirname(sys.executable), env.get("PATH", "/usr/bin:/bin")])
        return env

    @staticmethod
    def _container_env(container: dict[str, Any]) -> dict[str, str]:
        return {e["name"]: e.get("value", "") for e in container.get("env") or []}

    def _pod_argv(self, host: Host, argv: list[str], *, launcher: bool, delay: float = 0.0) -> list[str]:
        user = self.run_as["launcher" if launcher else "worker"]
        as_user: list[str] = []
        if user:
            as_user = ["--user", f"{user[0]}:{user[1]}"]
            for path in exposed_paths():
                as_user += ["--expose", path]
        return ["ip", "netns", "exec", host.ns, sys.executable, str(POD), "--hostname", host.hostname,
                *self._binds(host, launcher=launcher), *as_user, *(["--delay", str(delay)] if delay else []),
                "--", *[IMAGE_FILES.get(a, a) for a in argv]]

    # ------------------------------------------------------------------ life cycle
    def start(self, ready_timeout: float = 60.0) -> None:
        """Network, Secret, ConfigMap, worker pods; returns once the operator would create the launcher."""
        Path(self.ssh_mount).mkdir(mode=0o700, parents=True, exist_ok=True)  # mount point only
        self._network()
        self._files()
        command = list(self.worker_container.get("command") or []) + list(self.worker_container.get("args") or [])
        env = {**self._image_env(""), **self._container_env(self.worker_container), "K_MPI_JOB_ROLE": "worker"}
        for i in range(self.workers):
            h = self.worker(i)
            with open(self.workdir / f"{h.hostname}.log", "wb") as log:
                h.proc = subprocess.Popen(
                    self._pod_argv(h, command, launcher=False, delay=self.sshd_delay.get(i, 0.0)),
                    env={**env, "HOSTNAME": h.hostname}, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
        self.wait_workers_ready(ready_timeout)

    def worker_ready(self, i: int) -> bool:
        """Pod Ready: container running and its readinessProbe (tcpSocket, from the kubelet's side) passes."""
        h = self.worker(i)
        if h.proc is None or h.proc.poll() is not None:
            return False
        probe = self.worker_container.get("readinessProbe")
        if not probe:
            return True  # no probe: Ready as soon as the container started
        port = probe["tcpSocket"]["port"]
        timeout = float(probe.get("timeoutSeconds", 1))
        argv = ["ip", "netns", "exec", self.launcher.ns, sys.executable, str(POD), "--probe", f"{h.ip}:{port}",
                "--timeout", str(timeout)]
        return sh(argv, timeout=timeout + 10, check=False).returncode == 0

    def wait_workers_ready(self, timeout: float) -> None:
        policy = self.job["spec"].get("launcherCreationPolicy", "AtStartup")
        if policy != "WaitForWorkersReady":
            return
        probe = self.worker_container.get("readinessProbe") or {}
        period = float(probe.get("periodSeconds", 10))
        deadline = time.monotonic() + timeout
        pending = set(range(self.workers))
        while pending:
            pending = {i for i in pending if not self.worker_ready(i)}
            if not pending:
                return
            if time.monotonic() > deadline:
                raise TimeoutError(f"workers {sorted(pending)} not Ready after {timeout:g}s; see {self.workdir}")
            time.sleep(period)

    def launcher_argv_env(self) -> tuple[list[str], dict[str, str]]:
        c = self.launcher_container
        argv = list(c.get("command") or []) + list(c.get("args") or [])
        env = {**self._image_env(self.launcher.hostname, "launcher"), **self._container_env(c),
               **operator_launcher_env(self.slots)}
        return argv, env

    def start_launcher(self, on_line: Callable[[LogLine], None] | None = None) -> subprocess.Popen:
        """Start the launcher pod; its output is parsed (rank tags) into ``self.lines`` by a thread."""
        argv, env = self.launcher_argv_env()
        h = self.launcher
        h.proc = subprocess.Popen(self._pod_argv(h, argv, launcher=True), env=env, stdout=subprocess.PIPE,
                                  stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, text=True,
                                  cwd=str(IMAGE_WORKDIR), start_new_session=True)

        def pump() -> None:
            parser = TaggedOutputParser()
            assert h.proc is not None and h.proc.stdout is not None
            for raw in h.proc.stdout:
                self.raw.append(raw)
                for line in parser.feed(raw):
                    self.lines.append(line)
                    if on_line:
                        on_line(line)
            for line in parser.flush():
                self.lines.append(line)

        self._pump = threading.Thread(target=pump, daemon=True)
        self._pump.start()
        return h.proc

    def wait_launcher(self, timeout: float) -> int:
        """The launcher's exit status; on timeout it is killed and TimeoutError raised (nothing hangs)."""
        proc = self.launcher.proc
        assert proc is not None
        try:
            code = proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            kill_netns_processes(self.launcher.ns)
            proc.wait(timeout=10)
            raise TimeoutError(f"launcher still running after {timeout:g}s:\n{self.output()}") from None
        self._pump.join(timeout=10)
        return code

    def run_launcher(self, timeout: float) -> int:
        self.start_launcher()
        return self.wait_launcher(timeout)

    def output(self, tail: int = 8000) -> str:
        return "".join(self.raw)[-tail:]

    def events(self, kind: str, rank: int | None = None) -> list[dict[str, Any]]:
        return [ln.event.data | {"rank": ln.event.rank} for ln in self.lines
                if ln.event is not None and ln.event.kind == kind and (rank is None or ln.event.rank == rank)]

    # ------------------------------------------------------------------ faults
    def kill_host(self, i: int) -> None:
        """Worker ``i`` loses power: every process in its namespace is SIGKILLed."""
        kill_netns_processes(self.worker(i).ns)

    def partition(self, i: int) -> None:
        """Worker ``i``'s link goes down (its veth, on the switch side)."""
        sh(["ip", "-n", self.switch, "link", "set", self.worker(i).port, "down"])

    def shape(self, rate: str, delay_ms: float | None = None) -> str:
        """Every host's egress limited to ``rate`` (htb) and, where the kernel has netem, delayed.

        Returns what was applied (kernels without sch_netem get the rate only, and say so).
        """
        applied = f"rate {rate}"
        for h in self.hosts:
            sh(["tc", "-n", h.ns, "qdisc", "replace", "dev", "eth0", "root", "handle", "1:", "htb", "default", "1"])
            sh(["tc", "-n", h.ns, "class", "replace", "dev", "eth0", "parent", "1:", "classid", "1:1", "htb",
                "rate", rate, "ceil", rate])
            if delay_ms:
                r = sh(["tc", "-n", h.ns, "qdisc", "replace", "dev", "eth0", "parent", "1:1", "handle", "10:",
                        "netem", "delay", f"{delay_ms}ms"], check=False)
                applied = f"rate {rate}, delay {delay_ms} ms" if r.returncode == 0 else \
                    f"rate {rate} (no netem in this kernel: delay {delay_ms} ms not applied)"
        return applied

    def close(self) -> None:
        """Stop every pod and remove every namespace, veth, bridge and hosts file (idempotent)."""
        for h in self.hosts:
            delete_netns(h.ns)
            if h.proc is not None:
                try:
                    h.proc.wait(timeout=10)
                except subprocess.TimeoutExpired:
                    h.proc.kill()
        delete_netns(self.switch)
