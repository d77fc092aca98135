"""``lanenb jobs repair``: set a damaged registry aside and rebuild it, losing nothing more.

A registry file can be damaged (a disk filled up mid-write, a copy that was cut short, a
stray write): SQLite then answers "file is not a database" or "database disk image is
malformed" and ``JobRegistry`` raises ``RegistryDamagedError`` naming the file and this
command. Repair never deletes: the damaged file (and its ``-wal``/``-shm``) is renamed
``jobs.sqlite3.damaged-<time>``; a new registry gets every row SQLite can still read from it,
then every local job found in ``runs/*/job.json`` (the row ``submit`` keeps in each run dir)
that is still missing (rows are read back with the ``sqlite3`` shell's ``.recover`` where it is
installed, Debian's ``sqlite3`` package, else with plain queries). A local job's state is then
read again from its run dir (``exit.json``) the next time it is asked. Kubernetes jobs live only
in the registry: a row that cannot be read any more is not rebuilt (its MPIJob is still in the
cluster: ``kubectl get mpijobs``).
"""

from __future__ import annotations

import json
import shutil
import sqlite3
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from lanenb.home import lanenb_home
from lanenb.registry.jobs import JOB_FILE, JobRegistry, RegistryDamagedError

__all__ = ["RepairReport", "repair_registry"]

_SCAN_GAP = 2000  # rowids tried past the last readable one when the table cannot be read whole


@dataclass
class RepairReport:
    """What ``repair_registry`` did: ``damaged`` (False: the file was fine, nothing changed),
    ``moved_to`` (the damaged file's new name), ``salvaged`` (rows read back from it),
    ``rebuilt`` (jobs added from run dirs' ``job.json``), ``problem`` (what SQLite said)."""

    path: Path
    damaged: bool
    problem: str | None = None
    moved_to: Path | None = None
    salvaged: list[str] = field(default_factory=list)
    rebuilt: list[str] = field(default_factory=list)

    def text(self) -> str:
        """The report in words, as ``lanenb jobs repair`` prints it."""
        if not self.damaged:
            return f"{self.path}: no damage found (SQLite's integrity check passed); nothing changed"
        return (f"{self.path} was damaged ({self.problem}); moved to {self.moved_to}\n"
                f"rows read back from it: {len(self.salvaged)}\n"
                f"local jobs rebuilt from run dirs (runs/*/{JOB_FILE}): {len(self.rebuilt)}\n"
                f"the damaged file is kept; delete it once `lanenb jobs list --all` shows what you expect")


def _check(path: Path) -> str | None:
    """What is wrong with the file (None: SQLite's quick check passes)."""
    try:
        JobRegistry(path)
        conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
        try:
            result = conn.execute("PRAGMA quick_check").fetchall()
        finally:
            conn.close()
    except RegistryDamagedError as exc:
        return exc.problem
    except sqlite3.DatabaseError as exc:
        return str(exc)
    problems = [line for r in result if r[0] != "ok" for line in str(r[0]).splitlines()
                if line.strip() and not line.startswith("***")]
    if not problems:
        return None
    more = f" (and {len(problems) - 3} more)" if len(problems) > 3 else ""
    return "integrity check: " + "; ".join(problems[:3]) + more


def _recovered(path: Path) -> sqlite3.Connection | None:
    """The damaged file as the ``sqlite3`` shell's ``.recover`` rebuilds it (every row it can
    find in the file's pages, orphaned ones included) in memory; None without that shell."""
    shell = shutil.which("sqlite3")
    if shell is None:
        return None
    try:
        done = subprocess.run([shell, str(path), ".recover"], capture_output=True, text=True, timeout=120,
                              check=False)
        conn = sqlite3.connect(":memory:")
        conn.executescript(done.stdout)
    except (OSError, subprocess.SubprocessError, sqlite3.Error):
        return None
    return conn


def _read_rows(path: Path, table: str) -> list[dict[str, Any]]:
    """Every row of ``table`` SQLite can still read: what ``.recover`` found (with the
    ``sqlite3`` shell), else the whole table, else row by row around the bad pages."""
    recovered = _recovered(path)
    if recovered is not None:
        recovered.row_factory = sqlite3.Row
        try:
            return [dict(r) for r in recovered.execute(f"SELECT * FROM {table}").fetchall()]
        except sqlite3.Error:
            pass
        finally:
            recovered.close()
    try:
        conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    except sqlite3.DatabaseError:
        return []
    conn.row_factory = sqlite3.Row
    try:
        try:
            return [dict(r) for r in conn.execute(f"SELECT * FROM {table}").fetchall()]
        except sqlite3.DatabaseError:
            pass
        rows, rowid, misses = [], 1, 0
        while misses < _SCAN_GAP:
            try:
                row = conn.execute(f"SELECT * FROM {table} WHERE rowid=?", (rowid,)).fetchone()
            except sqlite3.DatabaseError:
                row = None
            if row is None:
                misses += 1
            else:
                rows.append(dict(row))
                misses = 0
            rowid += 1
        return rows
    except sqlite3.DatabaseError:
        return []
    finally:
        conn.close()


def repair_registry(path: Path | None = None, *, runs_dir: Path | None = None) -> RepairReport:
    """Check the registry; if it is damaged, set it aside and rebuild it (see the module doc).

    Args:
        path: the registry file (default ``$LANENB_HOME/jobs.sqlite3``).
        runs_dir: where run dirs are looked for (default ``runs/`` beside the registry).

    Returns:
        A ``RepairReport``; ``damaged`` False means the file passed the check and is unchanged.
    """
    path = Path(path) if path is not None else lanenb_home() / "jobs.sqlite3"
    runs = Path(runs_dir) if runs_dir is not None else path.parent / "runs"
    if not path.exists():
        problem: str | None = "missing"
    else:
        problem = _check(path)
        if problem is None:
            return RepairReport(path, damaged=False)
    report = RepairReport(path, damaged=True, problem=problem)
    rows: list[dict[str, Any]] = []
    links: list[dict[str, Any]] = []
    if path.exists():
        report.moved_to = path.with_name(f"{path.name}.damaged-{time.strftime('%Y%m%d-%H%M%S')}")
        for suffix in ("", "-wal", "-shm"):  # together: the WAL may hold the newest rows
            part = Path(f"{path}{suffix}")
            if part.exists():
                part.rename(f"{report.moved_to}{suffix}")
        rows = _read_rows(report.moved_to, "jobs")
        links = _read_rows(report.moved_to, "job_snapshots")
    registry = JobRegistry(path)
    good = [r for r in rows if isinstance(r.get("name"), str) and r.get("spec") and r.get("state")]
    registry.import_records(good, links)
    report.salvaged = sorted(r["name"] for r in good)
    known = set(report.salvaged)
    found = []
    for job_file in sorted(runs.glob(f"*/{JOB_FILE}")):
        try:
            row = json.loads(job_file.read_text())
        except (OSError, ValueError):
            continue
        if isinstance(row, dict) and isinstance(row.get("name"), str) and row["name"] not in known:
            found.append(row)
    if found:
        registry.import_records(found)
    report.rebuilt = sorted(r["name"] for r in found)
    return report
