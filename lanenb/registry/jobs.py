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
  process, never from here; only keyed fingerprints of the values are kept (``$LANENB_HOME/secrets``),
  so that any reader can redact them from logs.

A team's load (docs/guide/team-load.md): lists are ordered and cut by SQLite on an index, so
20 rows of 2,000 cost what 20 rows of 20 do; finished jobs leave the registry only when a person
runs ``lanenb jobs prune`` (``prune``: the rows go to an archive file first, run dirs stay);
``$LANENB_HOME`` on a network filesystem runs without WAL (``lanenb.registry.filesystem``); a
damaged file is reported with its path and the repair command (``lanenb.registry.repair``).
"""

from __future__ import annotations

import builtins
import json
import os
import sqlite3
import threading
import time
import warnings
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from lanenb.contract.redact import redact_spec, remember_secrets
from lanenb.contract.status import JobState
from lanenb.home import lanenb_home, make_private_dir
from lanenb.registry.filesystem import Mount, is_network_fs, mount_of
from lanenb_trainer.atomic import write_text
from lanenb_trainer.errors import UserError

__all__ = ["lanenb_home", "make_private_dir", "JobRecord", "JobRegistry", "JobExistsError", "JobNotFoundError",
           "RegistryDamagedError", "REPAIR_COMMAND"]

FINAL_STATES = tuple(sorted(s.value for s in JobState if s.finished))

SCHEMA_VERSION = 2  # 2: a snapshot may be linked to several jobs (an unchanged dataset's is reused)
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
CREATE INDEX IF NOT EXISTS jobs_created_name ON jobs(created, name);
CREATE TABLE IF NOT EXISTS job_snapshots (
    job       TEXT NOT NULL,
    store     TEXT NOT NULL,
    snapshot  TEXT NOT NULL,
    role      TEXT NOT NULL,
    volume    TEXT NOT NULL,
    created   REAL NOT NULL,
    PRIMARY KEY (job, store, snapshot)
);
CREATE INDEX IF NOT EXISTS job_snapshots_job ON job_snapshots(job);
"""


REPAIR_COMMAND = "lanenb jobs repair"
SQLITE_HEADER = b"SQLite format 3\x00"
_WARNED_NETWORK: set[str] = set()  # registries this process has already warned about
# files this process has opened and set up (schema, journal mode): a JobRegistry() made for
# every request of a server then costs one stat, not a schema check and a /proc/mounts read
_READY: dict[tuple[str, int, int, str | None], tuple[Mount | None, str]] = {}


def _migrate_links(conn: sqlite3.Connection) -> None:
    """Version 1's ``job_snapshots`` keyed a snapshot to one job, so a second job reusing an
    unchanged dataset's snapshot took the first one's link; its rows move to the (job, store,
    snapshot) key, inside the schema write's transaction."""
    row = conn.execute("SELECT sql FROM sqlite_master WHERE type='table' AND name='job_snapshots'").fetchone()
    if row is None or "PRIMARY KEY (store, snapshot)" not in (row[0] or ""):
        return
    conn.execute("ALTER TABLE job_snapshots RENAME TO job_snapshots_v1")
    conn.execute("DROP INDEX IF EXISTS job_snapshots_job")
    for statement in _SCHEMA.split(";"):
        if "job_snapshots" in statement and statement.strip():
            conn.execute(statement)
    conn.execute("INSERT OR IGNORE INTO job_snapshots SELECT job, store, snapshot, role, volume, created "
                 "FROM job_snapshots_v1")
    conn.execute("DROP TABLE job_snapshots_v1")


class JobExistsError(UserError, ValueError):
    pass


class RegistryDamagedError(UserError, RuntimeError):
    """The registry file is not a readable SQLite database (truncated, overwritten, a disk
    error): the message names the file and the command that sets it aside and rebuilds it."""

    def __init__(self, path: Path, problem: str) -> None:
        self.path = path
        self.problem = problem
        super().__init__(f"the job registry {path} is damaged ({problem}); run `{REPAIR_COMMAND}`: it moves the "
                         f"damaged file aside, keeps every row it can still read and rebuilds the local jobs "
                         f"from their run dirs (nothing in a run dir is changed)")


def _damage(exc: sqlite3.DatabaseError) -> str | None:
    """The problem if ``exc`` says the file is damaged; None for any other database error
    (a lock, a constraint, a missing table in a test), which is raised as it is."""
    text = str(exc)
    marks = ("file is not a database", "malformed", "disk image", "database corrupt", "unsupported file format")
    return text if type(exc) in (sqlite3.DatabaseError, sqlite3.OperationalError) and any(
        m in text for m in marks) else None


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


def _retry_locked(action: Any, attempts: int = 20) -> Any:
    """``action()``, again after a short pause while SQLite answers "database is locked/busy"
    at once: the busy timeout covers waiting for another writer, but not every case (WAL
    recovery after a crash, a journal mode change racing a first open). The last failure is
    raised as a ``RuntimeError`` naming the file's situation, never a bare "database is locked"."""
    delay = 0.005
    for attempt in range(attempts):
        try:
            return action()
        except sqlite3.OperationalError as exc:
            text = str(exc)
            if "locked" not in text and "busy" not in text:
                raise
            if attempt == attempts - 1:
                raise RuntimeError(f"the job registry stayed locked by another process for more than "
                                   f"{BUSY_TIMEOUT_S:g} s ({text}): is a process stuck holding it?") from exc
            time.sleep(delay)
            delay = min(delay * 2, 0.5)
    return None  # unreachable


JOB_FILE = "job.json"  # a local job's registry row, kept in its run dir (what repair rebuilds from)


def _recorded_run_dirs(runs: Path) -> bool:
    """Whether ``runs`` holds at least one run dir with its job's record (``job.json``)."""
    try:
        with os.scandir(runs) as entries:
            return any((Path(e.path) / JOB_FILE).is_file() for e in entries if e.is_dir())
    except OSError:
        return False


_THREAD = threading.local()
KEPT_PER_THREAD = 4  # registry files a thread keeps a connection to (oldest closed first)
_INHERITED: list[sqlite3.Connection] = []  # connections a forked child got from its parent: never closed


def _local_connections() -> dict[str, Any]:
    """This thread's kept registry connections, by file path."""
    kept = getattr(_THREAD, "connections", None)
    if kept is None:
        kept = _THREAD.connections = {}
    return kept


def _close_quietly(conn: sqlite3.Connection) -> None:
    try:
        conn.close()
    except sqlite3.Error:
        pass


def _row_to_record(row: sqlite3.Row) -> JobRecord:
    return JobRecord(
        name=row["name"], backend=row["backend"], spec=json.loads(row["spec"]),
        handle=json.loads(row["handle"]), state=row["state"], status=json.loads(row["status"]),
        run_dir=row["run_dir"], created=row["created"], updated=row["updated"],
        started=row["started"], finished=row["finished"], metrics=_loads(row["metrics"]),
    )


class JobRegistry:
    """The jobs of ``$LANENB_HOME`` (or ``path``): one SQLite file shared by every kernel,
    server and console of the user (and every host where ``$LANENB_HOME`` is a shared home).

    Attributes:
        mount: the filesystem holding the file (``Mount``: source, mount point, fstype).
        journal_mode: ``"wal"`` on a local disk, ``"delete"`` (rollback journal) on a network
            filesystem, where WAL's shared memory would not be shared between hosts.

    Raises:
        RegistryDamagedError: the file exists but is not a SQLite database (``lanenb jobs repair``).
    """

    def __init__(self, path: str | Path | None = None, *, mounts_text: str | None = None) -> None:
        self.path = Path(path) if path is not None else lanenb_home() / "jobs.sqlite3"
        make_private_dir(self.path.parent)
        self.last_archive: Path | None = None  # where the last prune() wrote its rows
        try:
            st = self.path.stat()
            ready = _READY.get((str(self.path), st.st_dev, st.st_ino, mounts_text))
        except OSError:
            ready = None
        if ready is not None and st.st_size > 0:  # this process has opened this very file before
            self.mount, self.journal_mode = ready
            self._owner_only()
            return
        if not self.path.exists():  # sqlite would create it 0644 (and its -wal/-shm files alike)
            os.close(os.open(self.path, os.O_CREAT | os.O_WRONLY, 0o600))
        else:
            self._check_header()
        self.mount = mount_of(self.path, mounts_text)
        self.journal_mode = "delete" if is_network_fs(self.mount) else "wal"
        if self.journal_mode != "wal":
            self._warn_network()
        self._owner_only()
        with self._connect() as conn:
            if conn.execute("PRAGMA journal_mode").fetchone()[0] != self.journal_mode:
                _retry_locked(lambda: conn.execute(f"PRAGMA journal_mode={self.journal_mode.upper()}"))
            if conn.execute("PRAGMA user_version").fetchone()[0] != SCHEMA_VERSION or not conn.execute(
                    "SELECT 1 FROM sqlite_master WHERE name='jobs_created_name'").fetchone():
                # written once per file (and after an upgrade), not by every JobRegistry() of every kernel
                with self._write_on(conn):
                    _migrate_links(conn)
                    for statement in _SCHEMA.split(";"):  # executescript would commit first
                        if statement.strip():
                            conn.execute(statement)
                    conn.execute(f"PRAGMA user_version={SCHEMA_VERSION}")
        st = self.path.stat()
        _READY[(str(self.path), st.st_dev, st.st_ino, mounts_text)] = (self.mount, self.journal_mode)

    def _owner_only(self) -> None:
        for part in (self.path, Path(f"{self.path}-wal"), Path(f"{self.path}-shm")):
            try:  # a registry written by an older lanenb (0644): make it owner-only too
                if part.stat().st_uid == os.getuid() and part.stat().st_mode & 0o077:
                    os.chmod(part, 0o600)
            except OSError:  # absent (-wal/-shm), or not ours to change
                pass

    def _check_header(self) -> None:
        try:
            with open(self.path, "rb") as fh:
                head = fh.read(len(SQLITE_HEADER))
        except OSError:
            return  # sqlite will say why it cannot open it
        if not head and _recorded_run_dirs(self.path.parent / "runs"):
            raise RegistryDamagedError(self.path, "0 bytes long while runs/ holds recorded jobs: truncated")
        if head and head != SQLITE_HEADER[:len(head)]:
            raise RegistryDamagedError(self.path, "it does not start with the SQLite header: overwritten")
        if head and len(head) < len(SQLITE_HEADER):
            raise RegistryDamagedError(self.path, f"{len(head)} bytes long: truncated")

    def _warn_network(self) -> None:
        key = str(self.path)
        if key in _WARNED_NETWORK:
            return
        _WARNED_NETWORK.add(key)
        assert self.mount is not None
        warnings.warn(
            f"the job registry {self.path} is on a network filesystem ({self.mount.fstype} from {self.mount.source}): "
            f"lanenb uses SQLite's rollback journal there (WAL needs memory shared on one host) with a "
            f"{BUSY_TIMEOUT_S:g} s busy timeout; this needs working file locks (NFSv4, or NFSv3 with lockd; "
            f"never mount with 'nolock'). Local jobs are still watched and cancelled from the host that runs them.",
            RuntimeWarning, stacklevel=3)

    @contextmanager
    def _connect(self) -> Iterator[sqlite3.Connection]:
        """A connection to the file: this thread's kept one when it is free and still opens
        this very file (same inode: a repaired registry is a new file), else a new one. Kept
        connections spare a server the open and the WAL checkpoint-on-last-close of every call."""
        try:
            st = os.stat(self.path)
            ident = (str(self.path), os.getpid(), st.st_dev, st.st_ino)
        except OSError:
            ident = None
        kept: dict[str, tuple[tuple[Any, ...], sqlite3.Connection, list[int]]] = _local_connections()
        entry = kept.get(str(self.path))
        if entry is not None and (entry[0] != ident or ident is None):
            if entry[0][1] != os.getpid():
                # inherited through fork: closing it here could checkpoint or unlock the parent's
                # file, so it is only set aside (SQLite: never use a connection across fork)
                _INHERITED.append(entry[1])
            elif not entry[2][0]:
                _close_quietly(entry[1])
            kept.pop(str(self.path), None)
            entry = None
        if entry is None or entry[2][0]:
            conn = self._open()
            if entry is None and ident is not None:
                for other in [k for k, e in kept.items() if not e[2][0]][:max(0, len(kept) + 1 - KEPT_PER_THREAD)]:
                    old = kept.pop(other)  # a few registries per thread at most (tests make hundreds)
                    if old[0][1] == os.getpid():
                        _close_quietly(old[1])
                    else:
                        _INHERITED.append(old[1])
                entry = kept[str(self.path)] = (ident, conn, [0])
            else:  # the kept one is in use further up this thread's stack: a short-lived one
                try:
                    yield conn
                except sqlite3.DatabaseError as exc:
                    self._raise_damage(exc)
                    raise
                finally:
                    conn.close()
                return
        conn, busy = entry[1], entry[2]
        busy[0] += 1
        try:
            yield conn
        except sqlite3.DatabaseError as exc:
            kept.pop(str(self.path), None)
            _close_quietly(conn)
            self._raise_damage(exc)
            raise
        finally:
            busy[0] -= 1

    def close(self) -> None:
        """Close this thread's kept connection to the file (reopened by the next call): before
        the file is moved, copied or replaced by hand."""
        entry = _local_connections().pop(str(self.path), None)
        if entry is not None:
            _close_quietly(entry[1])

    def _open(self) -> sqlite3.Connection:
        try:
            conn = sqlite3.connect(self.path, timeout=BUSY_TIMEOUT_S, isolation_level=None,
                                   check_same_thread=False)
            conn.row_factory = sqlite3.Row
            conn.execute(f"PRAGMA busy_timeout={int(BUSY_TIMEOUT_S * 1000)}")
        except sqlite3.DatabaseError as exc:
            self._raise_damage(exc)
            raise
        return conn

    def _raise_damage(self, exc: sqlite3.DatabaseError) -> None:
        problem = _damage(exc)
        if problem is not None:
            raise RegistryDamagedError(self.path, problem) from exc

    @staticmethod
    @contextmanager
    def _write_on(conn: sqlite3.Connection) -> Iterator[sqlite3.Connection]:
        _retry_locked(lambda: conn.execute("BEGIN IMMEDIATE"))
        try:
            yield conn
        except BaseException:
            conn.execute("ROLLBACK")
            raise
        conn.execute("COMMIT")

    @contextmanager
    def _write(self) -> Iterator[sqlite3.Connection]:
        """One short write transaction; IMMEDIATE takes the write lock up front so a
        concurrent writer waits on the busy timeout instead of failing mid-transaction."""
        with self._connect() as conn, self._write_on(conn):
            yield conn

    # ---------------------------------------------------------------- writes
    def add(self, name: str, backend: str, spec: dict[str, Any], run_dir: str | None,
            state: str = "pending") -> JobRecord:
        """Record a new job. Its spec is stored redacted; its secret values are fingerprinted
        under ``$LANENB_HOME/secrets`` first, so every reader can still redact them from logs."""
        now = time.time()
        remember_secrets(spec)
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

    def reopen(self, name: str, from_states: Iterable[str], **fields: Any) -> bool:
        """Set ``fields`` (those of ``update``, and ``spec``) only while the row's state is one
        of ``from_states``, final ones included: a resumed job (preempted, suspended) runs again.
        Checked inside the write, so of two kernels resuming the same job only one wins.

        Returns:
            False (nothing written) when the row is in another state.

        Raises:
            JobNotFoundError: no job named ``name``.
        """
        allowed = {"handle", "state", "status", "started", "finished", "metrics", "run_dir", "spec"}
        bad = set(fields) - allowed
        if bad:
            raise ValueError(f"cannot update registry column(s) {sorted(bad)}; allowed: {sorted(allowed)}")
        states = [str(s) for s in from_states]
        if "spec" in fields:
            remember_secrets(fields["spec"])
            fields["spec"] = redact_spec(fields["spec"])
        cols = [f"{key}=?" for key in fields] + ["updated=?"]
        values = [json.dumps(v) if k in ("handle", "status", "metrics", "spec") and v is not None else v
                  for k, v in fields.items()] + [time.time()]
        where = f"name=? AND state IN ({','.join('?' * len(states))})"
        with self._write() as conn:
            cur = conn.execute(f"UPDATE jobs SET {', '.join(cols)} WHERE {where}", (*values, name, *states))
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

    def prune(self, older_than_s: float, *, dry_run: bool = False, now: float | None = None,
              archive_dir: Path | None = None) -> builtins.list[JobRecord]:
        """Forget the finished jobs that ended more than ``older_than_s`` seconds ago.

        Never automatic: only ``lanenb jobs prune`` calls it. Nothing is lost: the rows (and
        their snapshot links) are first written to ``archive/jobs-<time>.jsonl`` beside the
        registry (``import_records`` takes them back), and run dirs are left as they are.
        Running, pending and suspended jobs are never pruned, however old.

        Args:
            older_than_s: age of the job's end (its creation, for a job without an end time).
            dry_run: only return what would go; change nothing.

        Returns:
            The pruned (or, with ``dry_run``, prunable) records, oldest first.

        Raises:
            ValueError: ``older_than_s`` is negative.
        """
        if not older_than_s >= 0:
            raise ValueError(f"older_than_s={older_than_s!r}: must be >= 0 seconds")
        cutoff = (time.time() if now is None else now) - older_than_s
        marks = ",".join("?" * len(FINAL_STATES))
        query = (f"SELECT * FROM jobs WHERE state IN ({marks}) AND COALESCE(finished, created) < ? "
                 "ORDER BY created, name")
        if dry_run:
            with self._connect() as conn:
                return [_row_to_record(r) for r in conn.execute(query, (*FINAL_STATES, cutoff)).fetchall()]
        with self._write() as conn:  # read and delete in one transaction: a job cannot change in between
            rows = conn.execute(query, (*FINAL_STATES, cutoff)).fetchall()
            if not rows:
                return []
            names = [r["name"] for r in rows]
            links = [dict(r) for name in names
                     for r in conn.execute("SELECT * FROM job_snapshots WHERE job=?", (name,)).fetchall()]
            folder = make_private_dir(archive_dir or self.path.parent / "archive")
            stamp = time.strftime("%Y%m%d-%H%M%S", time.localtime(now))
            target = folder / f"jobs-{stamp}-{os.getpid()}.jsonl"
            lines = [json.dumps({"job": dict(r)}) for r in rows] + [json.dumps({"snapshot_link": k}) for k in links]
            write_text(target, "\n".join(lines) + "\n")  # atomic, before anything is deleted
            os.chmod(target, 0o600)
            conn.executemany("DELETE FROM jobs WHERE name=?", [(n,) for n in names])
            conn.executemany("DELETE FROM job_snapshots WHERE job=?", [(n,) for n in names])
        self.last_archive = target
        return [_row_to_record(r) for r in rows]

    def import_records(self, rows: Iterable[dict[str, Any]], links: Iterable[dict[str, Any]] = ()) -> int:
        """Add raw rows (an archive's ``job`` entries, rows read from a damaged file); a name
        already recorded keeps its row. Returns how many rows were added."""
        columns = ("name", "backend", "spec", "handle", "state", "status", "run_dir", "created", "updated",
                   "started", "finished", "metrics")
        added = 0
        with self._write() as conn:
            for row in rows:
                values = [row.get(c) for c in columns]
                for i, c in enumerate(columns):  # rows from job.json hold dicts, archives JSON text
                    if c in ("spec", "handle", "status", "metrics") and isinstance(values[i], (dict, list)):
                        values[i] = json.dumps(values[i])
                values[3] = values[3] or "{}"
                values[5] = values[5] or "{}"
                cur = conn.execute(f"INSERT OR IGNORE INTO jobs({', '.join(columns)}) "
                                   f"VALUES ({','.join('?' * len(columns))})", values)
                added += cur.rowcount
            for link in links:
                conn.execute("INSERT OR IGNORE INTO job_snapshots(job, store, snapshot, role, volume, created) "
                             "VALUES (?,?,?,?,?,?)", tuple(link.get(c) for c in
                                                         ("job", "store", "snapshot", "role", "volume", "created")))
        return added

    def stamp(self) -> tuple[int, float]:
        """``(jobs, last update time)``: changes whenever a job is added, removed or changes
        state, so a kept listing knows it is out of date without reading the rows."""
        with self._connect() as conn:
            count, updated = conn.execute("SELECT COUNT(*), MAX(updated) FROM jobs").fetchone()
        return int(count), float(updated or 0.0)

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
