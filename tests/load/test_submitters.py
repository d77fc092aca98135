"""Many kernels submitting at once: each job recorded once, duplicates a clear JobExistsError,
no "database is locked" reaching anyone."""

from __future__ import annotations

import multiprocessing as mp

from lanenb.registry.jobs import JobExistsError, JobRegistry


def _submit(args):
    path, index, count = args
    recorded, exists, errors = [], [], []
    for k in range(count):
        name = f"shared-{k}" if k % 2 == 0 else f"p{index}-{k}"
        try:
            registry = JobRegistry(path)
            registry.add(name, "local", {"dataset": "/d", "name": name}, None)
            registry.update(name, state="running", handle={"pid": index})
            recorded.append(name)
        except JobExistsError as exc:
            exists.append(str(exc))
        except Exception as exc:  # reported to the parent: anything else fails the test
            errors.append(f"{type(exc).__name__}: {exc}")
    return recorded, exists, errors


def test_six_processes_submitting_at_once_record_every_job_once(tmp_path):
    path = str(tmp_path / "jobs.sqlite3")
    procs, count = 6, 8
    with mp.get_context("fork").Pool(procs) as pool:
        results = pool.map(_submit, [(path, i, count) for i in range(procs)])
    recorded = [n for r in results for n in r[0]]
    exists = [m for r in results for m in r[1]]
    errors = [m for r in results for m in r[2]]
    assert errors == []
    names = [r.name for r in JobRegistry(path).list()]
    assert sorted(names) == sorted(recorded) and len(set(names)) == len(names)
    shared = count // 2
    assert len(exists) == shared * (procs - 1)
    assert all("already exists" in m and "pick another name" in m for m in exists)
    assert len(names) == shared + procs * (count - shared)
