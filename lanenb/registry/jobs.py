"""The job registry: one SQLite file under ``LANENB_HOME`` so jobs outlive the kernel.

Two kernels (processes) may write at once: WAL journal, a busy timeout, a fresh connection
per operation and short ``BEGIN IMMEDIATE`` transactions keep writers from tripping over
each other ("database is locked") without any lock server.

Two rules hold for every writer:

* **A final state is never overwritten.** Once a row says succeeded / failed / cancelled /
  lost, an update that would change its state or status is skipped (``update`` returns
  False): a poll that read "running" just before another kernel recorded "cancelled" cannot
  bring the job back to life. Only metrics (and the handle) may still be filled in.
* **Private and secret-free.** ``LANENB_HOME`` and the database are created readable by their
  owner only (0700 / 0600), and a spec's secret-looking ``env`` values are stored as
  ``<redacted>`` (``lanenb.contract.redact``): the ranks get the real values from the submitting
  process, never from here.
"""

from __future__ import annotations

import builtins
import json
import os
import sqlite3
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from lanenb.contract.redact import redact_spec
from lanenb.contract.status import JobState
from lanenb.home import lanenb_home, make_private_dir
from lanenb_trainer.errors import UserError

__all__ = ["lanenb_home", "make_private_dir", "JobRecord", "JobRegistry", "JobExistsError", "JobNotFoundError"]

FINAL_STATES = tuple(sorted(s.value for s in JobState if s.finished))

SCHEMA_VERSION = 1
BUSY_TIMEOUT_S = 30.0

_SCHEMA = """
CREATE TABLE IF NOT EXISTS jobs (
    name      TEXT PRIMARY KEY,
    backend   TEXT NOT NULL,
    spec      TEXT NOT NULL,
    handle    TEXT NOT NULL DEFAULT '{}',
    state     TEXT NOT NULL,
    status    TEXT NOT NULL DEFAULT '{}',
    run_dir   TEXT,
    created   REAL NOT NULL,
    updated   REAL NOT NULL,
    started   REAL,
    finished  REAL,
    metrics   TEXT
);
CREATE INDEX IF NOT EXISTS jobs_created ON jobs(created);
CREATE TABLE IF NOT EXISTS job_snapshots (
    job       TEXT NOT NULL,
    store     TEXT NOT NULL,
    snapshot  TEXT NOT NULL,
    role      TEXT NOT NULL,
    volume    TEXT NOT NULL,
    created   REAL NOT NULL,
    PRIMARY KEY (store, snapshot)
);
CREATE INDEX IF NOT EXISTS job_snapshots_job ON job_snapshots(job);
"""


class JobExistsError(UserError, ValueError):
    pass


class JobNotFoundError(UserError, KeyError):
    def __str__(self) -> str:  # KeyError would quote the whole message
        return str(self.args[0]) if self.args else "job not found"


@dataclass
class JobRecord:
    name: str
    backend: str
    spec: dict[str, Any]
    handle: dict[str, Any]
    state: str
    status: dict[str, Any]
    run_dir: str | None
    created: float
    updated: float
    started: float | None = None
    finished: float | None = None
    metrics: dict[str, Any] | None = field(default=None)


def _loads(text: str | None) -> Any:
    return None if text is None else json.loads(text)


def _row_to_record(row: sqlite3.Row) -> JobRecord:
    return JobRecord(
        name=row["name"], backend=row["backend"], spec=json.loads(row["spec"]),
        handle=json.loads(row["handle"]), state=row["state"], status=json.loads(row["status"]),
        run_dir=row["run_dir"], created=row["created"], updated=row["updated"],
        started=row["started"], finished=row["finished"], metrics=_loads(row["metrics"]),
    )


class JobRegistry:
    def __init__(self, path: str | Path | None = None) -> None:
        self.path = Path(path) if path is not None else lanenb_home() / "jobs.sqlite3"
        make_private_dir(self.path.parent)
        if not self.path.exists():  # sqlite would create it 0644 (and its -wal/-shm files alike)
            os.close(os.open(self.path, os.O_CREAT | os.O_WRONLY, 0o600))
        for part in (self.path, Path(f"{self.path}-wal"), Path(f"{self.path}-shm")):
            try:  # a registry written by an older lanenb (0644): make it owner-only too
                if part.stat().st_uid == os.getuid() and part.stat().st_mode & 0o077:
                    os.chmod(part, 0o600)
            except OSError:  # absent (-wal/-shm), or not ours to change
                pass
        with self._connect() as conn:
            conn.execute("PRAGMA journal_mode=WAL")
            conn.executescript(_SCHEMA)
            conn.execute(f"PRAGMA user_version={SCHEMA_VERSION}")

    @contextmanager
    def _connect(self) -> Iterator[sqlite3.Connection]:
        conn = sqlite3.connect(self.path, timeout=BUSY_TIMEOUT_S, isolation_level=None)
        try:
            conn.row_factory = sqlite3.Row
            conn.execute(f"PRAGMA busy_timeout={int(BUSY_TIMEOUT_S * 1000)}")
            yield conn
        finally:
            conn.close()

    @contextmanager
    def _write(self) -> Iterator[sqlite3.Connection]:
        """One short write transaction; IMMEDIATE takes the write lock up front so a
        concurrent writer waits on the busy timeout instead of failing mid-transaction."""
        with self._connect() as conn:
            conn.execute("BEGIN IMMEDIATE")
            try:
                yield conn
            except BaseException:
                conn.execute("ROLLBACK")
                raise
            conn.execute("COMMIT")

    # ---------------------------------------------------------------- writes
    def add(self, name: str, backend: str, spec: dict[str, Any], run_dir: str | None,
            state: str = "pending") -> JobRecord:
        now = time.time()
        try:
            with self._write() as conn:
                conn.execute(
                    "INSERT INTO jobs(name, backend, spec, state, run_dir, created, updated) VALUES (?,?,?,?,?,?,?)",
                    (name, backend, json.dumps(redact_spec(spec)), state, run_dir, now, now),
                )
        except sqlite3.IntegrityError:
            raise JobExistsError(
                f"a job named {name!r} already exists in {self.path}; pick another name or leave name unset"
            ) from None
        return self.get(name)

    def update(self, name: str, **fields: Any) -> bool:
        """Set any of handle, state, status, started, finished, metrics (dicts are JSON-encoded).

        Returns False (and writes nothing) when the update would change the state or status of
        a row whose state is already final, unless it records that same final state again.

        Raises:
            JobNotFoundError: no job named ``name``.
        """
        allowed = {"handle", "state", "status", "started", "finished", "metrics", "run_dir"}
        bad = set(fields) - allowed
        if bad:
            raise ValueError(f"cannot update registry column(s) {sorted(bad)}; allowed: {sorted(allowed)}")
        cols, values = [], []
        for key, value in fields.items():
            if key in ("handle", "status", "metrics") and value is not None:
                value = json.dumps(value)
            cols.append(f"{key}=?")
            values.append(value)
        cols.append("updated=?")
        values.append(time.time())
        where, params = "name=?", [name]
        if "state" in fields or "status" in fields:
            # checked inside the write transaction, so two kernels cannot both pass the test
            marks = ",".join("?" * len(FINAL_STATES))
            where += f" AND (state NOT IN ({marks})"
            params += FINAL_STATES
            if "state" in fields:
                where += " OR state=?"
                params.append(str(fields["state"]))
            where += ")"
        with self._write() as conn:
            cur = conn.execute(f"UPDATE jobs SET {', '.join(cols)} WHERE {where}", (*values, *params))
            if cur.rowcount == 0:
                if conn.execute("SELECT 1 FROM jobs WHERE name=?", (name,)).fetchone() is None:
                    raise JobNotFoundError(f"no job named {name!r} in {self.path}")
                return False
        return True

    def delete(self, name: str) -> None:
        with self._write() as conn:
            conn.execute("DELETE FROM jobs WHERE name=?", (name,))

    # ---------------------------------------------------------------- reads
    def get(self, name: str) -> JobRecord:
        with self._connect() as conn:
            row = conn.execute("SELECT * FROM jobs WHERE name=?", (name,)).fetchone()
        if row is None:
            known = [r.name for r in reversed(self.list(newest_first=True, limit=5))]
            hint = f"; recent jobs: {', '.join(known)}" if known else "; no jobs recorded yet"
            raise JobNotFoundError(f"no job named {name!r} in {self.path}{hint}")
        return _row_to_record(row)

    def list(self, *, newest_first: bool = False, limit: int | None = None) -> builtins.list[JobRecord]:
        """Recorded jobs, oldest first (or ``newest_first``), at most ``limit`` of them.

        The order and the limit are applied by SQLite, so a list view of the newest 20 jobs
        reads 20 rows however many jobs a team has recorded.

        Raises:
            ValueError: ``limit`` is not an integer >= 1.
        """
        order = "DESC" if newest_first else "ASC"
        query = f"SELECT * FROM jobs ORDER BY created {order}, name {order}"
        params: tuple[int, ...] = ()
        if limit is not None:
            if isinstance(limit, bool) or not isinstance(limit, int) or limit < 1:
                raise ValueError(f"limit={limit!r}: must be an integer >= 1")
            query += " LIMIT ?"
            params = (limit,)
        with self._connect() as conn:
            rows = conn.execute(query, params).fetchall()
        return [_row_to_record(r) for r in rows]

    def count(self) -> int:
        """How many jobs are recorded (a list view says "20 of 2000 shown")."""
        with self._connect() as conn:
            return int(conn.execute("SELECT COUNT(*) FROM jobs").fetchone()[0])

    # ---------------------------------------------------------------- job <-> snapshot links
    def add_snapshot(self, job: str, store: str, snapshot: str, role: str, volume: str) -> None:
        """Record that ``job`` produced ``snapshot`` (role "run" or "dataset") in ``store``."""
        with self._write() as conn:
            conn.execute("INSERT OR REPLACE INTO job_snapshots(job, store, snapshot, role, volume, created) "
                         "VALUES (?,?,?,?,?,?)", (job, store, snapshot, role, volume, time.time()))

    def snapshot_links(self, job: str | None = None) -> builtins.list[dict[str, Any]]:  # list: the method above
        """``{job, store, snapshot, role, volume, created}`` rows, oldest first (all jobs when ``None``)."""
        query = "SELECT * FROM job_snapshots" + (" WHERE job=?" if job is not None else "") + " ORDER BY created"
        with self._connect() as conn:
            rows = conn.execute(query, (job,) if job is not None else ()).fetchall()
        return [dict(r) for r in rows]
