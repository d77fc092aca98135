"""Snapshot and restore cost of the local (restic) store beside ``cp -a``.

For each dataset (1k files / 100 MB, 10k files / 1 GB of incompressible data; ``--small``
for 1k / 100 MB only): first snapshot, unchanged re-snapshot, one changed file, restore, each
with wall time, time as a ratio of ``cp -a`` of the same data, and the repository's growth.

    python bench/snapshots.py --small
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))

from benchutil import cpu_name

from lanenb.snapshots.local import ResticStore


def du(path: Path) -> int:
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file())


def make_data(root: Path, files: int, total: int) -> None:
    size = total // files
    for i in range(files):
        sub = root / f"clip{i // 100:03d}"
        sub.mkdir(parents=True, exist_ok=True)
        (sub / f"{i:05d}.bin").write_bytes(os.urandom(size))


def timed(fn) -> tuple[float, object]:
    t0 = time.perf_counter()
    out = fn()
    return time.perf_counter() - t0, out


def one_case(work: Path, files: int, total: int) -> None:
    data, store_root = work / "data", work / "store"
    make_data(data, files, total)
    subprocess.run(["sync"], check=True)
    cp_s, _ = timed(lambda: subprocess.run(["cp", "-a", str(data), str(work / "copy")], check=True))
    shutil.rmtree(work / "copy")
    store = ResticStore(store_root)
    store._ensure_repo()
    rows = []
    base = du(store_root)
    for label, prepare in (("first snapshot", None), ("unchanged re-snapshot", None),
                           ("one changed file", lambda: (data / "clip000" / "00000.bin").write_bytes(
                               os.urandom(total // files)))):
        if prepare:
            prepare()
        before = du(store_root)
        seconds, snap = timed(lambda: store.create(data))
        rows.append((label, seconds, du(store_root) - before))
    last = snap
    restore_s, _ = timed(lambda: store.restore(last.id, str(work / "restored")))
    rows.append(("restore", restore_s, du(work / "restored")))
    print(f"\n{files} files, {total / 1e6:.0f} MB (cp -a: {cp_s:.2f} s; repository after init: {base} B)")
    print(f"{'step':24s} {'seconds':>8s} {'x cp -a':>8s} {'extra disk':>14s} {'% of data':>9s}")
    for label, seconds, extra in rows:
        print(f"{label:24s} {seconds:8.2f} {seconds / cp_s:8.2f} {extra:14,d} {100 * extra / total:9.3f}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--small", action="store_true", help="only 1k files / 100 MB")
    parser.add_argument("--dir", default=None, help="scratch directory (default: a temporary one)")
    args = parser.parse_args()
    out = subprocess.run(["restic", "version"], capture_output=True, text=True).stdout.strip()
    print(f"CPU: {cpu_name()} ({os.cpu_count()} logical CPUs); {out}")
    cases = [(1000, 100_000_000)] + ([] if args.small else [(10_000, 1_000_000_000)])
    for files, total in cases:
        with tempfile.TemporaryDirectory(dir=args.dir) as tmp:
            one_case(Path(tmp), files, total)


if __name__ == "__main__":
    main()
