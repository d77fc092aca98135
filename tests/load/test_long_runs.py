"""Long runs: job.log stays within its cap, the events a summary needs are never dropped, and a
late reader folds the digest and the tail instead of every line."""

from __future__ import annotations

import json
import shutil
import time

from load_jobs import record_job

from lanenb.analysis.runstate import RunState
from lanenb.backends.local.logfile import read_chunk
from lanenb.backends.local.supervise import DIGEST_NAME, DIGEST_STEPS, JobLog
from lanenb.jobs import get_job
from lanenb_trainer.events import format_event
from lanenb_trainer.ranktag import tag_line


def _event(kind, rank=0, **fields):
    return tag_line(rank, "stdout", format_event(kind, rank, **fields))


def _write_run(run_dir, *, steps, cap, plain_every=1):
    """A run's output through the supervisor's writer: steps with plain lines between, an eval and
    a checkpoint every 100 steps, one error half way, then the test result and the end."""
    with open(run_dir / "job.log", "ab", buffering=0) as fh, open(run_dir / DIGEST_NAME, "ab", buffering=0) as dg:
        log = JobLog(fh, cap, dg)
        log.write(_event("start", world_size=2, total_steps=steps, config={"batch_size": 4}))
        for step in range(1, steps + 1):
            log.write(_event("step", step=step, total_steps=steps, epoch=step // 100, loss=1.0 / step, lr=0.1))
            if step % plain_every == 0:
                log.write(tag_line(1, "stdout", f"plain output of step {step} " + "x" * 60))
            if step % 100 == 0:
                log.write(_event("checkpoint", step=step, epoch=step // 100, path=f"checkpoints/step-{step}.pt"))
            if step == steps // 2:
                log.write(_event("error", 1, message="rank 1 saw a NaN loss"))
        log.write(_event("eval", split="test", model="best", epoch=3, accuracy=0.95, fp=0.05, fn=0.04, frames=10))
        log.write(_event("end", status="succeeded", step=steps))
    return log


def test_past_the_hard_cap_only_summary_events_are_written(tmp_path):
    log = _write_run(tmp_path, steps=2000, cap=20_000)
    size = (tmp_path / "job.log").stat().st_size
    text = (tmp_path / "job.log").read_text()
    assert log.dropped > 0 and size < 2 * 20_000 + 5_000  # a few checkpoint lines past 2x
    assert '"kind":"end"' in text and '"split":"test"' in text and "rank 1 saw a NaN loss" in text
    assert "checkpoints/step-2000.pt" in text
    assert text.count('"kind":"step"') < 2000  # steps past the hard cap were dropped


def test_the_digest_keeps_summary_events_and_a_bounded_even_sample_of_steps(tmp_path):
    _write_run(tmp_path, steps=5000, cap=10**9, plain_every=1000)
    lines = (tmp_path / DIGEST_NAME).read_bytes().splitlines()
    kinds = [json.loads(line.split(b"@lanenb ", 1)[1])["kind"] for line in lines]
    assert kinds.count("checkpoint") == 50 and kinds.count("end") == 1 and kinds.count("error") == 1
    steps = [json.loads(line.split(b"@lanenb ", 1)[1])["step"] for line, k in zip(lines, kinds) if k == "step"]
    assert len(steps) < 2 * DIGEST_STEPS * 4  # O(DIGEST_STEPS * log(steps)), not 5000
    assert steps[0] <= 2 and steps[-1] >= 4900  # spread over the whole run
    log = (tmp_path / "job.log").read_bytes()
    for line in lines[:50]:  # each entry names the job.log offset right after the same line
        at, _, text = line.partition(b" ")
        assert log[:int(at)].endswith(text + b"\n")


def test_a_reader_far_behind_gets_the_digest_a_note_and_the_tail(tmp_path):
    _write_run(tmp_path, steps=3000, cap=10**9)
    with open(tmp_path / "job.log", "ab", buffering=0) as fh:  # then 300 kB of output without events
        JobLog(fh, 10**9).write("".join(tag_line(0, "stdout", f"tail line {i} " + "y" * 80) for i in range(3000)))
    size = (tmp_path / "job.log").stat().st_size
    chunk = read_chunk(tmp_path / "job.log", None, closed=True, max_lines=100_000, tail_lines=None,
                       skip_bytes=50_000)
    digest_lines = len((tmp_path / DIGEST_NAME).read_bytes().splitlines())
    assert len(chunk.lines) == digest_lines and not chunk.complete
    assert json.loads(chunk.lines[-1][0].text.split("@lanenb ", 1)[1])["kind"] == "end"
    note = read_chunk(tmp_path / "job.log", chunk.cursor, closed=True, max_lines=100, tail_lines=None,
                      skip_bytes=50_000)
    assert len(note.lines) == 1 and "summarised from job.digest" in note.lines[0][0].text
    assert size - int(note.cursor) <= 25_000  # what is left (under half the skip) is read line by line
    tail = read_chunk(tmp_path / "job.log", note.cursor, closed=True, max_lines=100_000, tail_lines=None,
                      skip_bytes=50_000)
    assert tail.complete and tail.lines[-1][0].text.startswith("tail line 2999")
    assert all("summarised" not in line.text for line, _ in tail.lines)


def test_a_new_reader_of_a_long_run_gets_its_outcome_in_a_few_polls(lanenb_home, monkeypatch):
    monkeypatch.setattr("lanenb.backends.local.logfile.SKIP_BYTES", 100_000)
    row = record_job(lanenb_home, "long", running_here=False)
    run_dir = lanenb_home / "runs" / "long"
    _write_run(run_dir, steps=4000, cap=10**9)
    (run_dir / "exit.json").write_text(json.dumps({"returncode": 0, "started": 1.0, "finished": time.time()}))
    assert (run_dir / "job.log").stat().st_size > 10 * 100_000
    job, state, cursor, polls = get_job(row["name"]), RunState(), None, 0
    while True:
        batch = job.poll(cursor)
        polls += 1
        state.apply_all(batch.updates)
        cursor = batch.cursor
        if batch.final:
            break
    assert polls <= 4 and state.state == "succeeded" and state.step == 4000
    assert state.test and state.test["accuracy"] == 0.95
    assert state.checkpoint == "checkpoints/step-4000.pt" and state.errors[0]["message"] == "rank 1 saw a NaN loss"
    assert len(state.series["loss"].y) > 100  # the loss chart spans the run from the sampled steps


def test_a_run_dir_deleted_under_a_running_job_stops_its_reader_with_a_message(lanenb_home):
    import pytest

    from lanenb.jobs import RunDirGoneError

    row = record_job(lanenb_home, "gone")  # its supervisor (this process) is alive
    record_job(lanenb_home, "other", state="succeeded", running_here=False)
    run_dir = lanenb_home / "runs" / "gone"
    (run_dir / "job.log").write_text(_event("step", step=1, total_steps=10))
    job = get_job(row["name"])
    assert job.poll(None).updates
    shutil.rmtree(run_dir)
    with pytest.raises(RunDirGoneError, match="was deleted"):
        job.poll(None)
    assert get_job("other").status().state.value == "succeeded"  # nothing else is touched
    assert get_job("gone").name == "gone"  # the row stays until pruned
