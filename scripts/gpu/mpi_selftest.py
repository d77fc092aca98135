"""One rank of session.sh's Open MPI self-test (``mpirun -np 2 python3 mpi_selftest.py ROOT``).

Each rank prints its rank; rank 0 also reads mpirun's memory map (its parent process) and checks
that every library of the MPI stack there (Open MPI, its components, PMIx, hwloc, libevent)
was loaded from ROOT, where session.sh unpacked the carried debs, not from a system install.
Exit 1 when one was not.
"""

import os
import sys

STACK = ("libopen-pal", "libopen-rte", "libmpi", "mca_", "libpmix", "pmix_mca_", "libhwloc", "hwloc_",
         "libevent", "libfabric", "libuc")


def stack_libs(pid: int) -> list[str]:
    with open(f"/proc/{pid}/maps") as fh:
        paths = {line.split()[-1] for line in fh if ".so" in line}
    return sorted(p for p in paths if any(k in os.path.basename(p) for k in STACK))


def main(root: str) -> int:
    rank = os.environ.get("OMPI_COMM_WORLD_RANK", "?")
    print(f"mpirun rank {rank} of {os.environ.get('OMPI_COMM_WORLD_SIZE', '?')}", flush=True)
    if rank != "0":
        return 0
    parent = os.getppid()
    exe = os.readlink(f"/proc/{parent}/exe")
    libs = stack_libs(parent)
    outside = [p for p in libs if not p.startswith(root.rstrip("/") + "/")]
    if not exe.startswith(root.rstrip("/") + "/"):
        outside.insert(0, exe)
    if outside or not libs:
        print(f"mpirun ({exe}) loaded MPI-stack files outside {root}: {outside or 'none found at all'}")
        return 1
    print(f"mpirun ({exe}): all {len(libs)} MPI-stack libraries loaded from {root}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1]))
