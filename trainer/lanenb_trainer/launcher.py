"""The MPIJob launcher's wrapper around ``mpirun``: wait for the workers, then name a lost host.

``python -m lanenb_trainer.launcher [--wait-timeout S] [--ssh-port P] -- mpirun ...`` is the launcher
container's command (``lanenb.backends.kubernetes.manifests``). Two things mpirun alone
does not do on a cluster:

1. **Workers not ready yet.** The MPI Operator starts the launcher once the worker pods run,
   but a worker's sshd may not accept connections yet and its DNS name (the headless Service)
   may not resolve yet; ssh's ``ConnectionAttempts=10`` (the operator's ``OMPI_MCA_plm_rsh_args``)
   covers ten seconds of refused connections and no resolver failure. So before mpirun starts,
   every host in the operator's hostfile (``$OMPI_MCA_orte_default_hostfile``) must resolve and
   answer with an SSH banner; until ``--wait-timeout`` passes, we retry.
2. **A worker host lost mid-run** (killed, partitioned): Horovod's ranks are aborted by Open
   MPI without a word on the event stream, and gloo names only an address. mpirun's own
   messages name the host (``Peer host: X``, ``Connection to X closed``, ``lost communication
   with a remote daemon``); this wrapper relays every line unchanged and, when mpirun fails
   after such a message, adds one ``error`` event naming the host and the ranks placed on it
   (``--map-by slot``: hostfile order, ``slots=`` each).

3. **A preemption.** The pod's SIGTERM (eviction, deletion) reaches mpirun as a SIGUSR1, which
   it passes on to every rank without ending the job (a SIGTERMed mpirun SIGKILLs the ranks a
   second later); the ranks checkpoint at the next step boundary and exit 75
   (``exitcodes.PREEMPTED``), and so does this wrapper, also when mpirun exited otherwise after
   the ranks said ``preempted``: the launcher Job's retry (the MPIJob's ``backoffLimit``)
   continues from the checkpoint, and the job's status says preempted. A second SIGTERM goes to
   mpirun as it is: stop now.

Outside the cluster (no hostfile variable) it only runs mpirun. stdlib only: it runs before
any rank, in the launcher pod.
"""

from __future__ import annotations

import argparse
import os
import queue
import re
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Sequence

from lanenb_trainer import events, exitcodes, ranktag

HOSTFILE_ENV = "OMPI_MCA_orte_default_hostfile"  # set by the MPI Operator on the launcher
SSH_PORT = 22
DEFAULT_WAIT = 300.0
DEFAULT_FAILURE_GRACE = 30.0
# mpirun's own words for "the job failed" (Open MPI 4.x), besides a rank's error/failed end event.
_FAILED = re.compile(r"ORTE was unable to reliably start|ORTE has lost communication|"
                     r"Primary job\s+terminated normally, but|MPI_ABORT was invoked|peer process has unexpectedly")
# mpirun / ssh lines that name a host that went away (Open MPI 4.x help texts, OpenSSH).
_LOST = [
    re.compile(r"^\s*Peer host:\s+(\S+)"),
    re.compile(r"Connection to (\S+) closed"),
    re.compile(r"[Tt]imeout, server (\S+) not responding"),
    re.compile(r"ssh: connect to host (\S+) port \d+"),
]


def read_hostfile(path: str) -> list[tuple[str, int]]:
    """``(host, slots)`` per line of an Open MPI hostfile (``host slots=N``; comments skipped)."""
    hosts: list[tuple[str, int]] = []
    with open(path, encoding="utf-8") as fh:
        for line in fh:
            words = line.split("#", 1)[0].split()
            if not words:
                continue
            slots = 1
            for word in words[1:]:
                if word.startswith("slots="):
                    slots = int(word.split("=", 1)[1])
            hosts.append((words[0], slots))
    return hosts


def ranks_by_host(hosts: Sequence[tuple[str, int]], processes: int | None) -> dict[str, list[int]]:
    """Which ranks ``mpirun --map-by slot`` puts on each host (fills hosts in order)."""
    out: dict[str, list[int]] = {}
    rank = 0
    total = processes if processes is not None else sum(s for _, s in hosts)
    for host, slots in hosts:
        take = max(0, min(slots, total - rank))
        out[host] = list(range(rank, rank + take))
        rank += take
    return out


def ssh_ready(host: str, timeout: float = 2.0, port: int = SSH_PORT) -> str | None:
    """None when ``host`` resolves and its ``port`` sends an SSH banner; else why not."""
    try:
        with socket.create_connection((host, port), timeout=timeout) as sock:
            sock.settimeout(timeout)
            banner = sock.recv(64)
    except socket.gaierror as exc:
        return f"does not resolve ({exc.strerror})"
    except OSError as exc:
        return f"port {port}: {exc.strerror or exc}"
    return None if banner.startswith(b"SSH-") else f"port {port} answered without an SSH banner"


def wait_for_hosts(hosts: Sequence[str], timeout: float, *, say=print, port: int = SSH_PORT) -> dict[str, str]:
    """Retry until every host's sshd answers or ``timeout`` passes; returns the hosts still not ready."""
    deadline = time.monotonic() + timeout
    pending = {h: "not tried" for h in hosts}
    announced = False
    while True:
        pending = {h: why for h in pending if (why := ssh_ready(h, port=port)) is not None}
        if not pending or time.monotonic() >= deadline:
            return pending
        if not announced:
            say(f"lanenb launcher: waiting for sshd on {', '.join(sorted(pending))} (up to {timeout:g}s)")
            announced = True
        time.sleep(1.0)


def _processes(argv: Sequence[str]) -> int | None:
    for flag in ("-np", "-n", "--np"):
        if flag in argv[:-1]:
            try:
                return int(argv[argv.index(flag) + 1])
            except ValueError:
                return None
    return None


def lost_host(line: str, known: Sequence[str]) -> str | None:
    """The known host an mpirun/ssh line says was lost, if any (untagged lines only)."""
    for pattern in _LOST:
        m = pattern.search(line)
        if m:
            name = m.group(1).rstrip(".,;:")
            for host in known:
                if name == host or host.startswith(name + ".") or name.startswith(host + "."):
                    return host
    return None


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m lanenb_trainer.launcher",
                                     description="Wait for the MPIJob's workers, run mpirun, name a lost host.")
    parser.add_argument("--wait-timeout", type=float, default=DEFAULT_WAIT,
                        help=f"seconds to wait for every worker's sshd (default {DEFAULT_WAIT:g})")
    parser.add_argument("--failure-grace", type=float, default=DEFAULT_FAILURE_GRACE,
                        help="seconds mpirun may take to exit once the run failed before it is stopped "
                             f"(default {DEFAULT_FAILURE_GRACE:g}: it can wait forever on a partitioned host)")
    parser.add_argument("--ssh-port", type=int, default=SSH_PORT,
                        help=f"the workers' sshd port (default {SSH_PORT}; non-root workers listen on 2222)")
    parser.add_argument("command", nargs=argparse.REMAINDER, help="-- mpirun ...")
    args = parser.parse_args(argv)
    command = args.command[1:] if args.command[:1] == ["--"] else args.command
    if not command:
        parser.error("give the mpirun command after --")
    hostfile = os.environ.get(HOSTFILE_ENV)
    hosts = read_hostfile(hostfile) if hostfile else []
    placement = ranks_by_host(hosts, _processes(command))
    if hosts:
        missing = wait_for_hosts([h for h, _ in hosts], args.wait_timeout, say=lambda m: print(m, flush=True),
                                 port=args.ssh_port)
        if missing:
            what = "; ".join(f"{h}: {why}" for h, why in sorted(missing.items()))
            events.emit("error", min(r for h in missing for r in placement.get(h, [0]) or [0]),
                        type="WorkersNotReady", phase="launch", hosts=sorted(missing),
                        message=f"sshd not reachable after {args.wait_timeout:g}s on {what}")
            return 1
    proc = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                            errors="replace", bufsize=1)
    # The pod's first SIGTERM preempts (mpirun passes SIGUSR1 on to the ranks); then each signal
    # goes to mpirun as it is, once (Open MPI ends at once on a second).
    preempting: list[int] = []

    def relay(signum: int, _frame: object) -> None:
        if signum == signal.SIGTERM and not preempting:
            preempting.append(signum)
            signum = signal.SIGUSR1
        proc.send_signal(signum)
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, relay)
    lines: queue.Queue[str | None] = queue.Queue()

    def pump() -> None:
        # signals go to the main thread, where the relay runs: one delivered to this thread would
        # leave the main thread asleep in lines.get() until mpirun writes again (maybe never)
        signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGTERM, signal.SIGINT})
        assert proc.stdout is not None
        for line in proc.stdout:
            lines.put(line)
        lines.put(None)

    threading.Thread(target=pump, daemon=True).start()
    lost: list[str] = []
    failed_at: float | None = None  # when a rank or mpirun first reported the run failed
    done = stopped = preempted = False
    while not done:
        deadline = None if failed_at is None or stopped else failed_at + args.failure_grace
        try:  # awake at least once a second: a signal's relay runs between two waits
            line = lines.get(timeout=1.0 if deadline is None else max(0.0, min(1.0, deadline - time.monotonic())))
        except queue.Empty:
            if deadline is None or time.monotonic() < deadline:
                continue
            # mpirun waits on daemons it can no longer reach (a partitioned host): end it.
            print(f"lanenb launcher: mpirun still running {args.failure_grace:g}s after the run failed; "
                  "stopping it", flush=True)
            _stop(proc)
            stopped = True
            continue
        if line is None:
            done = True
            continue
        sys.stdout.write(line)
        sys.stdout.flush()
        kind, status = _event_of(line)
        preempted = preempted or kind == "preempted"
        if failed_at is None and (_FAILED.search(line) or kind == "error" or (kind == "end" and status == "failed")):
            failed_at = time.monotonic()
        if not line.startswith("["):  # mpirun's and ssh's own lines, not a rank's
            host = lost_host(line, list(placement))
            if host and host not in lost:
                lost.append(host)
    code = proc.wait()
    if code != 0 and preempted:
        return exitcodes.PREEMPTED  # every rank checkpointed: a retry continues, it did not fail
    if code != 0 and placement:
        # Hosts whose sshd no longer answers are gone (killed, partitioned) even when no message named them.
        lost += [h for h in placement if h not in lost and ssh_ready(h, port=args.ssh_port) is not None]
    if code != 0 and lost:
        ranks = sorted(r for h in lost for r in placement.get(h, []))
        events.emit("error", ranks[0] if ranks else 0, type="HostLost", phase="train", hosts=lost, ranks=ranks,
                    message=f"lost {'host' if len(lost) == 1 else 'hosts'} {', '.join(lost)} "
                            f"(rank{'s' if len(ranks) != 1 else ''} {', '.join(map(str, ranks))}); "
                            f"mpirun exited with status {code}")
    return code if code >= 0 else 128 - code  # killed by a signal: the shell's 128+N


def _event_of(line: str) -> tuple[str | None, str | None]:
    """The kind and ``status`` of the ``@lanenb`` event on a relayed rank line, if any."""
    if events.PREFIX not in line:
        return None, None
    event = events.parse_line(ranktag.split_rank_tag(line.rstrip("\n"))[1])
    return (None, None) if event is None else (event.kind, event.get("status"))


def _stop(proc: subprocess.Popen, grace: float = 10.0) -> None:
    """SIGTERM mpirun once, SIGKILL after ``grace`` (its ssh children close our pipe with it)."""
    proc.send_signal(signal.SIGTERM)
    try:
        proc.wait(timeout=grace)
    except subprocess.TimeoutExpired:
        proc.kill()


if __name__ == "__main__":
    sys.exit(main())
