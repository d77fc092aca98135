"""Real 2-rank training under mpirun on both engines (tiny synthetic data, a few steps each)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time

import pytest
from ctrl_c import default_sigint
from trainer_support import dump, engines, events_of, run_ranks, train_args

from lanenb.analysis.event_text import event_text
from lanenb_trainer import exitcodes
from lanenb_trainer.stopping import CANCEL_NAME, SUSPEND_NAME

pytestmark = pytest.mark.slow

RUN = dict(epochs=3, lr=0.02)


@pytest.fixture(scope="module", params=engines())
def full_run(request, synth_root, tmp_path_factory):
    engine = request.param
    run_dir = tmp_path_factory.mktemp(f"run-{engine}")
    code, lines = run_ranks(2, train_args(synth_root, run_dir, engine=engine, **RUN))
    assert code == 0, dump(lines)
    return engine, run_dir, lines


def test_loss_falls_and_run_dir_is_complete(full_run, synth_root):
    engine, run_dir, lines = full_run
    starts = events_of(lines, "start")
    assert sorted(e.rank for e in starts) == [0, 1]
    assert {e["engine"] for e in starts} == {engine} and {e["world_size"] for e in starts} == {2}
    epochs = events_of(lines, "epoch", rank=0)
    assert len(epochs) == RUN["epochs"]
    assert epochs[-1]["train_loss"] < 0.8 * epochs[0]["train_loss"], [e["train_loss"] for e in epochs]
    steps = events_of(lines, "step", rank=0)
    assert steps and all(s["images_per_s"] > 0 for s in steps)
    assert steps[-1]["step"] == steps[-1]["total_steps"]
    vals = events_of(lines, "eval", rank=0)
    splits = [e["split"] for e in vals]
    assert splits[:RUN["epochs"] + 1] == ["val"] * RUN["epochs"] + ["test"] and set(splits[RUN["epochs"]:]) == {"test"}
    assert next(e.get("model") for e in vals if e["split"] == "test") == "last"
    assert all(e["latency_ms_p50"] > 0 and e["latency_ms_p95"] >= e["latency_ms_p50"]
               for e in vals if e["split"] == "val")  # latency reported beside the scores
    for name in ("config.json", "events.jsonl", "metrics.json", "checkpoints/last.pt", "checkpoints/best.pt",
                 "predictions/test.json"):
        assert (run_dir / name).is_file(), name
    metrics = json.loads((run_dir / "metrics.json").read_text())
    assert metrics["status"] == "completed" and metrics["world_size"] == 2
    test_labels = (synth_root / "test_label.json").read_text().splitlines()
    preds = [json.loads(x) for x in (run_dir / "predictions" / "test.json").read_text().splitlines()]
    assert [p["raw_file"] for p in preds] == [json.loads(x)["raw_file"] for x in test_labels]
    assert all(set(p) == {"raw_file", "lanes", "run_time"} for p in preds)
    assert metrics["test"]["frames"] == len(test_labels)
    # which model each number is for; the headline is best.pt's
    assert metrics["models"]["test"].startswith("last model") and metrics["models"]["test_best"].startswith("best.pt")
    assert metrics["headline_model"] == "best.pt" and metrics["accuracy"] == metrics["test_best"]["accuracy"]
    # the labelled headline every face shows (evaluation/headline.py), written by the trainer itself
    head = metrics["headline"]
    # the labels count epochs from 1, best_epoch (like the events) from 0
    assert head["label"] == f"best.pt, epoch {metrics['best_epoch'] + 1}" and head["accuracy"] == metrics["accuracy"]
    last_epoch = metrics["epochs"] - 1
    if metrics["best_epoch"] != last_epoch:
        assert head["other"]["label"] == f"last, epoch {metrics['epochs']}"
        assert head["other"]["accuracy"] == metrics["test"]["accuracy"]
    else:
        assert head["other"] is None
    # rank 0 mirrors its events into events.jsonl
    kinds = [json.loads(x)["kind"] for x in (run_dir / "events.jsonl").read_text().splitlines()]
    assert kinds[0] == "start" and kinds[-1] == "end" and "checkpoint" in kinds


def test_parameters_identical_on_all_ranks(full_run):
    _, _, lines = full_run
    ends = events_of(lines, "end")
    assert sorted(e.rank for e in ends) == [0, 1]
    assert len({e["param_checksum"] for e in ends}) == 1
    assert len({e["state_checksum"] for e in ends}) == 1  # BN statistics too (averaged before eval)


def test_system_events_from_every_rank(full_run):
    _, _, lines = full_run
    system = events_of(lines, "system")
    assert {e.rank for e in system} == {0, 1}
    assert all(e["rss_mb"] > 0 and "cpu_percent" in e.data for e in system)


def test_resume_continues_exactly(full_run, synth_root, tmp_path):
    engine, _, lines = full_run
    reference = events_of(lines, "end", rank=0)[0]
    args = train_args(synth_root, tmp_path, engine=engine, **RUN)
    code, first = run_ranks(2, args + ["--max-steps", "5"])
    assert code == 0, dump(first)
    stopped = events_of(first, "end", rank=0)[0]
    assert (stopped["status"], stopped["step"]) == ("stopped", 5)
    code, second = run_ranks(2, args + ["--resume"])
    assert code == 0, dump(second)
    start = events_of(second, "start", rank=0)[0]
    assert start["resumed_from"]["step"] == 5
    assert start["resumed_from"]["lr"] == pytest.approx(stopped["lr"])
    first_step = events_of(second, "step", rank=0)[0]
    assert first_step["step"] == 6
    end = events_of(second, "end", rank=0)[0]
    assert end["status"] == "completed"
    assert (end["step"], end["epoch"]) == (reference["step"], reference["epoch"])
    assert end["lr"] == pytest.approx(reference["lr"], rel=1e-12)
    assert end["param_checksum"] == reference["param_checksum"]  # same weights as never stopping


def _preempted_then_resumed(engine, synth_root, tmp_path, fault_step, fault="TERM"):
    """A SIGTERM to rank 1 once ``fault_step`` steps are done (the fault hook sends the real
    signal; ``TERM-AT-EPOCH-END``: while that step's epoch is validated), then the same command
    line again: the launcher's restart."""
    args = train_args(synth_root, tmp_path, engine=engine, run_id="lane-preempt", **RUN)
    code, first = run_ranks(2, args, extra_env={"LANENB_FAULT_RANK": "1", "LANENB_FAULT_STEP": str(fault_step),
                                                "LANENB_FAULT_SIGNAL": fault})
    assert code == exitcodes.PREEMPTED, dump(first)
    code, second = run_ranks(2, args)  # no --resume: the run dir holds this run's own checkpoint
    assert code == 0, dump(second)
    return first, second


def test_sigterm_to_one_rank_checkpoints_every_rank_and_resuming_ends_bit_identical(full_run, synth_root, tmp_path):
    engine, _, lines = full_run
    first, second = _preempted_then_resumed(engine, synth_root, tmp_path, fault_step=5)
    # the signalled rank and its peer stop together, at the boundary of the step under way (the 2nd epoch's 2nd)
    (preempted,) = events_of(first, "preempted")
    assert (preempted.rank, preempted["ranks"], preempted["step"], preempted["epoch_step"]) == (0, [1], 6, 2)
    assert 0 < preempted["checkpoint_s"] < 30 and preempted["since_signal_s"] >= preempted["checkpoint_s"]
    assert {e.rank: e["status"] for e in events_of(first, "end")} == {0: "preempted", 1: "preempted"}
    assert not events_of(first, "error") and not events_of(first, "eval", rank=0)[1:]  # no test of a cut run
    (resumed,) = events_of(second, "resumed")
    assert resumed.data | {"t": 0} == {"count": 1, "step": 6, "epoch": 1, "reached": 6, "steps_lost": 0,
                                       "steps_lost_total": 0, "preempted": True, "automatic": True, "t": 0,
                                       "after": "preempted"}
    assert events_of(second, "step", rank=0)[0]["step"] == 7  # mid-epoch: no step seen twice
    reference, end = events_of(lines, "end", rank=0)[0], events_of(second, "end", rank=0)[0]
    assert (end["status"], end["step"], end["epoch"]) == ("completed", reference["step"], reference["epoch"])
    assert end["param_checksum"] == reference["param_checksum"]  # the weights of never stopping
    assert end["state_checksum"] == reference["state_checksum"]  # each rank's own BatchNorm statistics too
    epochs = [(e["epoch"], e["train_loss"], e.get("val_accuracy")) for e in events_of(first + second, "epoch", rank=0)]
    assert epochs == [(e["epoch"], e["train_loss"], e.get("val_accuracy")) for e in events_of(lines, "epoch", rank=0)]


def test_a_preemption_at_an_epochs_last_step_still_ends_that_epoch_once(full_run, synth_root, tmp_path):
    engine, _, lines = full_run
    if engine != "ddp":
        pytest.skip("the epoch's end after a resume is the loop's, not the engine's: one engine covers it")
    first, second = _preempted_then_resumed(engine, synth_root, tmp_path, fault_step=3)
    assert events_of(first, "preempted")[0]["epoch_step"] == 4 == events_of(first, "preempted")[0]["steps_per_epoch"]
    assert not events_of(first, "epoch")  # cut before the first epoch's validation ...
    epochs = [(e["epoch"], e["train_loss"], e.get("val_accuracy")) for e in events_of(second, "epoch", rank=0)]
    # ... which the resumed run does first, with the whole epoch's train loss
    assert epochs == [(e["epoch"], e["train_loss"], e.get("val_accuracy")) for e in events_of(lines, "epoch", rank=0)]
    reference, end = events_of(lines, "end", rank=0)[0], events_of(second, "end", rank=0)[0]
    assert (end["param_checksum"], end["state_checksum"]) == (reference["param_checksum"], reference["state_checksum"])


def test_a_preemption_during_validation_is_resumed_as_a_preemption_at_the_next_epoch(full_run, synth_root, tmp_path):
    engine, _, lines = full_run
    if engine != "ddp":
        pytest.skip("the loop's epoch end is the same for both engines: one covers it")
    first, second = _preempted_then_resumed(engine, synth_root, tmp_path, fault_step=4, fault="TERM-AT-EPOCH-END")
    (preempted,) = events_of(first, "preempted")
    assert (preempted["step"], preempted["epoch"], preempted["epoch_step"]) == (4, 1, 0)
    assert len(events_of(first, "epoch", rank=0)) == 1  # the epoch was validated and reported ...
    (resumed,) = events_of(second, "resumed")
    # ... and its checkpoint says it was a preemption, with nothing to take again
    assert (resumed["step"], resumed["steps_lost"], resumed["preempted"]) == (4, 0, True)
    assert events_of(second, "step", rank=0)[0]["step"] == 5
    reference, end = events_of(lines, "end", rank=0)[0], events_of(second, "end", rank=0)[0]
    assert (end["param_checksum"], end["state_checksum"]) == (reference["param_checksum"], reference["state_checksum"])


@pytest.mark.parametrize("engine", engines())
def test_crashing_rank_fails_the_run_promptly(engine, synth_root, tmp_path):
    t0 = time.monotonic()
    code, lines = run_ranks(2, train_args(synth_root, tmp_path, engine=engine, epochs=50),
                            extra_env={"LANENB_FAULT_RANK": "1", "LANENB_FAULT_STEP": "2"})
    elapsed = time.monotonic() - t0
    assert code != 0, dump(lines)
    errors = events_of(lines, "error", rank=1)
    assert errors, dump(lines)
    err = errors[0]
    assert err["type"] == "RuntimeError" and "injected fault on rank 1 at step 2" in err["message"]
    assert "Traceback" in err["traceback"] and "_train_epoch" in err["traceback"]
    assert not events_of(lines, "end", rank=0) or events_of(lines, "end", rank=0)[0]["status"] == "failed"
    assert elapsed < 90, f"run took {elapsed:.0f}s to fail"


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM], ids=["ctrl-c", "sigterm"])
def test_cli_ctrl_c_stops_every_rank(sig, synth_root, tmp_path):
    args = train_args(synth_root, tmp_path, engine="ddp", epochs=200)
    proc = subprocess.Popen([sys.executable, "-m", "lanenb", "train", "--processes", "2", "--raw", *args],
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                            env={**os.environ, "LANENB_THREADS": "1"}, preexec_fn=default_sigint)
    pids, seen = set(), []
    for line in proc.stdout:
        seen.append(line)
        if '"kind":"start"' in line:
            pids.add(json.loads(line[line.index("{"):])["pid"])
        if '"kind":"step"' in line and len(pids) == 2:
            break
    else:
        pytest.fail("no step event:\n" + "".join(seen[-50:]))
    t0 = time.monotonic()
    proc.send_signal(sig)
    out, _ = proc.communicate(timeout=60)
    assert proc.returncode == 130, out[-3000:]
    assert time.monotonic() - t0 < 30
    assert "all ranks stopped" in out
    deadline = time.monotonic() + 15
    while time.monotonic() < deadline and any(_running(pid) for pid in pids):
        time.sleep(0.2)
    assert not [pid for pid in pids if _running(pid)], "ranks outlived the launcher"


def _running(pid: int) -> bool:
    import psutil

    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


@pytest.mark.parametrize("engine", engines())
def test_fewer_eval_frames_than_ranks_does_not_hang(engine, tmp_path):
    """One validation frame and one test frame for two ranks: the rank without frames must still
    join every collective (it used to wait for a DDP buffer broadcast until the timeout)."""
    from lanenb_trainer.data.synth import synthesize

    root = tmp_path / "data"
    synthesize(root, 10, seed=3, width=320, height=180, test_fraction=0.1, progress=False)
    assert len((root / "test_label.json").read_text().splitlines()) == 1
    args = train_args(root, tmp_path / "run", engine=engine, epochs=1, batch_size=2, val_fraction=0.12,
                      collective_timeout=60)
    t0 = time.monotonic()
    code, lines = run_ranks(2, args)
    assert code == 0, dump(lines)
    assert time.monotonic() - t0 < 50, "a rank waited for a collective"
    vals = [e for e in events_of(lines, "eval", rank=0) if e["split"] == "val"]
    assert vals and vals[0]["frames"] == 1
    assert events_of(lines, "eval", rank=0)[-1]["frames"] == 1  # the test split's single frame


@pytest.mark.parametrize("reason", ["cancelled", "suspended"])
def test_a_stop_the_launcher_names_is_recorded_as_that_stop_not_as_a_preemption(reason, synth_root, tmp_path):
    """The launcher writes why before it signals (``cancel.json``/``suspend.json``): the ranks
    checkpoint as for a preemption, but their events say what the user did, and the resume says
    "after a suspend", not "after a preemption"."""
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    marker = run_dir / {"cancelled": CANCEL_NAME, "suspended": SUSPEND_NAME}[reason]
    marker.write_text("{}")
    args = train_args(synth_root, run_dir, engine="ddp", run_id="lane-stop", **RUN)
    code, first = run_ranks(2, args, extra_env={"LANENB_FAULT_RANK": "1", "LANENB_FAULT_STEP": "3",
                                                "LANENB_FAULT_SIGNAL": "TERM"})
    assert code == exitcodes.PREEMPTED, dump(first)
    assert {e.rank: e["status"] for e in events_of(first, "end")} == {0: reason, 1: reason}
    if reason == "cancelled":
        assert events_of(first, "preempted") == []
        assert any(e["message"].startswith("cancelled: every rank stopped at step 4") for e in events_of(first, "log"))
    else:
        (stopped,) = events_of(first, "preempted")
        assert stopped["reason"] == "suspended"
        assert event_text(stopped).startswith("suspended by the user: every rank stopped at step 4")
    marker.unlink()  # what resume does
    code, second = run_ranks(2, args)
    assert code == 0, dump(second)
    (resumed,) = events_of(second, "resumed")
    assert (resumed["step"], resumed["after"], resumed["steps_lost"]) == (4, reason, 0)
    assert {"cancelled": "after a cancel", "suspended": "after a suspend"}[reason] in event_text(resumed)
