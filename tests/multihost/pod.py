"""What a kubelet does to start one container, run inside a simulated host (``ip netns exec NS``).

stdlib only, run by path. ``ip netns exec`` has already given us a network namespace and a
private (slave) mount namespace with ``/etc/netns/<ns>/hosts`` over ``/etc/hosts``; here we
add what the pod spec adds: the pod's hostname (own UTS namespace), the volumes bind-mounted
at their fixed paths (``/etc/mpi``, the ``sshAuthMountPath``, the ssh drop-in folders, emptyDirs;
a missing mount point is made, as the kubelet does), and then ``exec`` the container's argv with
its environment, as ``--user UID:GID`` when the pod runs as a non-root UID (what OpenShift's SCC
assigns). The mounts live only in this mount namespace: they vanish with its last process,
nothing to unmount on the host.

``--expose DIR`` stands in for an image whose files any UID may read: this machine's Python
lives under root's 0700 home, so the home is covered (here only) by a 0755 tmpfs holding DIR
alone, at its own path.

    python3 pod.py --hostname NAME [--bind SRC:DST]... [--expose DIR]... [--user UID:GID] [--delay S] -- ARGV...
    python3 pod.py --probe HOST:PORT --timeout S      (a kubelet tcpSocket probe: exit 0 when open)
"""

from __future__ import annotations

import argparse
import ctypes
import os
import socket
import subprocess
import sys
import tempfile
import time

CLONE_NEWUTS = 0x04000000


def probe(target: str, timeout: float) -> int:
    host, port = target.rsplit(":", 1)
    try:
        with socket.create_connection((host, int(port)), timeout=timeout):
            return 0
    except OSError:
        return 1


def mount(*args: str) -> None:
    subprocess.run(["mount", *args], check=True, timeout=10)


def expose(path: str) -> None:
    """Make ``path`` reachable through its unreadable parent: the parent becomes a tmpfs (0755)
    that holds only ``path``, moved there from a staging mount."""
    parent, name = os.path.split(os.path.abspath(path))
    stage = tempfile.mkdtemp(prefix="lnbmh-expose-")
    try:
        mount("--bind", path, stage)
        mount("-t", "tmpfs", "-o", "mode=0755,size=1m", "tmpfs", parent)
        os.mkdir(os.path.join(parent, name))
        mount("--move", stage, os.path.join(parent, name))
    finally:
        os.rmdir(stage)


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--hostname")
    parser.add_argument("--bind", action="append", default=[])
    parser.add_argument("--delay", type=float, default=0.0)
    parser.add_argument("--expose", action="append", default=[])
    parser.add_argument("--user", help="UID:GID the container runs as")
    parser.add_argument("--probe")
    parser.add_argument("--timeout", type=float, default=1.0)
    parser.add_argument("argv", nargs=argparse.REMAINDER)
    args = parser.parse_args()
    if args.probe:
        return probe(args.probe, args.timeout)
    argv = args.argv[1:] if args.argv[:1] == ["--"] else args.argv
    if args.hostname:
        libc = ctypes.CDLL(None, use_errno=True)
        if libc.unshare(CLONE_NEWUTS) != 0:
            raise OSError(ctypes.get_errno(), "unshare(CLONE_NEWUTS)")
        socket.sethostname(args.hostname)
    for path in args.expose:
        expose(path)
    for spec in args.bind:
        src, dst = spec.split(":", 1)
        if os.path.isdir(src):
            os.makedirs(dst, exist_ok=True)
        mount("--bind", src, dst)
    if args.delay:
        time.sleep(args.delay)  # the container runs, its server does not listen yet
    if args.user:
        uid, gid = (int(x) for x in args.user.split(":"))
        os.setgroups([gid])
        os.setgid(gid)
        os.setuid(uid)
    sys.stdout.flush()
    os.execvp(argv[0], argv)


if __name__ == "__main__":
    sys.exit(main())
