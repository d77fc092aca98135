"""Job.poll / Job.updates: history + live tail, resumable from a cursor, on real mpirun ranks
(local) and on the Kubernetes backend's launcher-pod log (API emulator)."""

from __future__ import annotations

import dataclasses
import sys
import time
from pathlib import Path

import pytest
from notebook_support import training_script

from lanenb.analysis.runstate import tail_state
from lanenb.jobs import JobState, SpecError, TrainSpec, get_job, submit

sys.path.insert(0, str(Path(__file__).parents[1] / "k8s"))


def lines_of(updates):
    return [(u.line.rank, u.line.text) for u in updates if u.line is not None]


def test_poll_resumes_from_a_cursor_without_loss_or_repeats(scripted):
    job = submit(TrainSpec(**scripted(training_script(steps=8, sleep=0.1))))
    seen, cursor, batches = [], None, 0
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        batch = job.poll(cursor)
        seen += batch.updates
        cursor = batch.cursor
        batches += 1
        if batch.final:
            break
        time.sleep(0.05)
    assert batch.final and job.status().state == JobState.SUCCEEDED
    assert batches > 2  # it really streamed while the job ran
    whole = job.poll(None)  # a new view (or a new kernel) from the beginning
    assert lines_of(seen) == lines_of(whole.updates)
    events = [u.event.kind for u in seen if u.event is not None]
    assert events.count("step") == 8 and events[-1] == "end"
    assert [u.status.state.value for u in seen if u.status is not None][-1] == "succeeded"
    # resume from the middle: exactly the rest, whatever the update type
    mid = len(seen) // 2
    rest = job.poll(seen[mid].cursor)
    assert lines_of(rest.updates) == lines_of(seen[mid + 1:])
    assert job.poll(whole.cursor).updates == []  # nothing new after the end


def test_updates_iterator_follows_to_the_end_in_a_new_process_handle(scripted):
    job = submit(TrainSpec(**scripted(training_script(steps=4, sleep=0.1), "it")))
    again = get_job(job.name)  # what a restarted kernel holds
    kinds = [u.event.kind for u in again.updates(interval=0.05) if u.event is not None]
    assert kinds.count("step") == 4 and "eval" in kinds


def test_bad_cursor_is_named(scripted):
    job = submit(TrainSpec(**scripted(training_script(steps=1), "bad")))
    with pytest.raises(SpecError, match="cursor='nonsense': is not a cursor"):
        job.poll("nonsense")
    with pytest.raises(SpecError, match="cursor='x': is not a cursor of a local job's log"):
        job.poll("running:|x")
    job.wait(60)


def test_tail_state_reads_only_the_end_of_a_long_log(scripted):
    # one rank: one ordered stream (two ranks' lines interleave in any order in job.log)
    job = submit(TrainSpec(**{**scripted(training_script(steps=40, sleep=0.0, world=1), "long"), "processes": 1}))
    job.wait(60)
    state = tail_state(job, lines=10)
    assert state.lines_seen == 10 and state.state == "succeeded"
    assert state.test == {"accuracy": 0.91, "fp": 0.05, "fn": 0.04, "frames": 12, "model": "last"}


def test_kubernetes_poll_resumes_by_timestamp(cluster, backend):
    from k8s_harness import add_pvc, warm_up

    thread, fake = cluster
    code = ("import sys, time\n"
            "for i in range(12):\n"
            "    print(f'[1,{i % 2}]<stdout>:line {i}', flush=True)\n"
            "    time.sleep(0.1)\n")
    fake.rewrite_argv = lambda argv: [sys.executable, "-c", code]
    warm_up(backend)
    from lanenb.contract.backends import get_descriptor, register_descriptor

    built_in = get_descriptor("kubernetes")  # this cluster, for Job objects too
    register_descriptor(dataclasses.replace(built_in, factory=lambda **kw: backend), override=True)
    try:
        add_pvc(thread)
        spec = TrainSpec(dataset="/data", backend="kubernetes", image="registry.example.com/t:1", name="lane-poll",
                         processes=2, volumes=["data:/data"])
        job = submit(spec)
        seen, cursor = [], None
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            batch = job.poll(cursor)
            seen += batch.updates
            cursor = batch.cursor
            if batch.final:
                break
            time.sleep(0.15)
        assert batch.final, [str(u) for u in seen[-5:]]
        assert lines_of(seen) == [(i % 2, f"line {i}") for i in range(12)]
        mid = next(i for i, u in enumerate(seen) if u.line is not None and u.line.text == "line 5")
        assert lines_of(job.poll(seen[mid].cursor).updates) == [(i % 2, f"line {i}") for i in range(6, 12)]
        with pytest.raises(SpecError, match="is not a cursor of a Kubernetes job's log"):
            job.poll("running:|garbage")
    finally:
        register_descriptor(built_in, override=True)


def test_local_poll_reads_a_long_log_in_bounded_slices(scripted, monkeypatch):
    """A poll reads at most READ_LIMIT bytes of job.log; the cursor carries on where it stopped."""
    from lanenb.backends.local import logfile

    job = submit(TrainSpec(**scripted(training_script(steps=30, sleep=0.0), "slices")))
    job.wait(60)
    whole = lines_of(job.poll(None).updates)
    monkeypatch.setattr(logfile, "READ_LIMIT", 512)
    seen, cursor, polls = [], None, 0
    while True:
        batch = job.poll(cursor)
        seen += batch.updates
        cursor, polls = batch.cursor, polls + 1
        if batch.final:
            break
    assert lines_of(seen) == whole and polls > 5


def test_each_event_line_is_parsed_once_on_its_way_to_the_reducer(tmp_path, monkeypatch):
    """job.log -> LocalBackend.read_log -> Job.poll -> RunState: one JSON parse per line, and
    the update's event is the line's own (one object for every consumer)."""
    from types import SimpleNamespace

    from lanenb.analysis.runstate import RunState
    from lanenb.backends.local.backend import LocalBackend
    from lanenb.contract.status import JobStatus
    from lanenb.jobs.updates import poll
    from lanenb.launch import lines
    from lanenb_trainer.events import format_event
    from lanenb_trainer.ranktag import tag_line

    log = tmp_path / "job.log"
    log.write_text(tag_line(0, "stdout", format_event("start", 0, world_size=2, total_steps=4))
                   + tag_line(1, "stderr", "  File \"x.py\", line 1")
                   + tag_line(0, "stdout", format_event("step", 0, step=1, total_steps=4, loss=0.5))
                   + "[lanenb-supervisor] launcher exited with code 0\n")
    (tmp_path / "exit.json").write_text('{"returncode": 0}')
    parsed = []
    real = lines.parse_line
    monkeypatch.setattr(lines, "parse_line", lambda text: parsed.append(text) or real(text))
    handle = {"pid": 0, "run_dir": str(tmp_path), "log": str(log)}
    from lanenb.contract.spec import TrainSpec

    job = SimpleNamespace(spec=TrainSpec(dataset=str(tmp_path), name="parse-once"), handle=handle,
                          backend=LocalBackend(), status=lambda: JobStatus("succeeded"))
    batch = poll(job)
    state = RunState().apply_all(batch.updates)
    assert len(parsed) == 4  # every line once (plain ones find no marker)
    got = [(u.line.rank, u.line.stream, u.line.source, u.line.text) for u in batch.updates if u.line]
    assert got[1:] == [(1, "stderr", "launcher", '  File "x.py", line 1'),  # indentation kept
                       (0, "stdout", "launcher", got[2][3]),
                       (None, "supervisor", "supervisor", "launcher exited with code 0")]
    assert all(u.event is u.line.event for u in batch.updates if u.line)
    assert state.step == 1 and state.world_size == 2 and batch.final
    assert len(parsed) == 4  # the reducer and the views read the kept event
