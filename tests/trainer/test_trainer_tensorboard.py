"""TensorBoard files of a real 2-rank run, read back with TensorBoard's own reader."""

from __future__ import annotations

from pathlib import Path

import pytest
from trainer_support import dump, events_of, run_ranks, train_args

from lanenb_trainer.config import ConfigError, TrainConfig, parse_config
from lanenb_trainer.events import EventLog
from lanenb_trainer.tensorboard_log import TRAINING, TensorBoardSink, rank_dir, tensorboard_dir

event_accumulator = pytest.importorskip("tensorboard.backend.event_processing.event_accumulator")


def scalars(folder: Path) -> dict[str, list[tuple[int, float]]]:
    """Every scalar series of one TensorBoard run folder: tag -> [(step, value)]."""
    acc = event_accumulator.EventAccumulator(str(folder), size_guidance={event_accumulator.SCALARS: 0})
    acc.Reload()
    return {tag: [(s.step, s.value) for s in acc.Scalars(tag)] for tag in acc.Tags()["scalars"]}


def test_the_flag_is_on_by_default_and_has_a_no_form(tmp_path):
    data = tmp_path / "data"
    data.mkdir()
    base = ["--data", str(data), "--run-dir", str(tmp_path / "run")]
    assert parse_config(base, {}).tensorboard is True
    assert parse_config(base + ["--no-tensorboard"], {}).tensorboard is False
    assert "--no-tensorboard" in TrainConfig(tensorboard=False).to_argv()
    with pytest.raises(ConfigError, match="--tensorboard"):
        parse_config(base + ["--tensorboard=yes"], {})


def test_lanetrain_no_tensorboard_reaches_the_ranks(tmp_path):
    """``%lanetrain --no-tensorboard`` (the magic's own parser) travels in the spec to the trainer."""
    pytest.importorskip("IPython")
    from lanenb.commands.arguments import spec_from_args
    from lanenb.notebook.magics import train_parser

    parser = train_parser()
    spec = spec_from_args(parser.parse_args(["--data", str(tmp_path), "--no-tensorboard"]), parser)
    assert parse_config(spec.trainer_args(str(tmp_path / "run")), {}).tensorboard is False


def test_a_sink_that_cannot_write_goes_quiet_and_the_events_go_on(tmp_path, capsys):
    blocked = tmp_path / "run"
    blocked.write_text("a file where the run dir's folders would go")
    log = EventLog(0)
    log.add_listener(TensorBoardSink(blocked, 0, primary=True))
    log("step", epoch=0, step=1, loss=0.5)
    log("step", epoch=0, step=2, loss=0.4)
    log.close()  # the sink's thread has seen both events
    out = capsys.readouterr()
    assert out.out.count("@lanenb") == 2
    assert out.err.count("TensorBoard files under") == 1, out.err


# -- real ranks ----------------------------------------------------------------------------
@pytest.mark.slow
def test_a_run_writes_loss_test_and_per_rank_system_scalars(synth_root, tmp_path):
    run = tmp_path / "run"
    code, lines = run_ranks(2, train_args(synth_root, run, engine="ddp", epochs=2, max_steps=0,
                                          system_interval=0.2, timing_every=2))
    assert code == 0, dump(lines)

    training = scalars(tensorboard_dir(run) / TRAINING)
    steps = events_of(lines, "step", rank=0)
    assert [s for s, _ in training["train/loss"]] == [e["step"] for e in steps]
    assert [v for _, v in training["train/loss"]] == pytest.approx([e["loss"] for e in steps], rel=1e-6)
    val = events_of(lines, "eval", rank=0)
    last_test = next(e for e in val if e["split"] == "test" and e["model"] == "last")
    assert training["test/accuracy"] == [(last_test["step"], pytest.approx(last_test["accuracy"], rel=1e-6))]
    assert len(training["val/accuracy"]) == 2  # one per epoch
    for rank in (0, 1):
        mine = scalars(rank_dir(run, rank))
        assert mine["system/rss_mb"], f"rank {rank}: {sorted(mine)}"
        assert all(v > 0 for _, v in mine["system/rss_mb"])
        assert mine["timing/step_s"], f"rank {rank}: {sorted(mine)}"
    assert "train/loss" not in scalars(rank_dir(run, 1))  # rank 0 alone writes the training figures


@pytest.mark.slow
def test_no_tensorboard_writes_no_file(synth_root, tmp_path):
    run = tmp_path / "run"
    code, lines = run_ranks(2, train_args(synth_root, run, engine="ddp", epochs=1, max_steps=2,
                                          tensorboard=False))
    assert code == 0, dump(lines)
    assert (run / "metrics.json").is_file()
    assert not tensorboard_dir(run).exists()


@pytest.mark.slow
def test_a_resumed_run_draws_each_step_once(synth_root, tmp_path):
    """A crash mid-epoch resumes from the last epoch's checkpoint and replays some steps: the
    resumed writer purges the crashed run's points from there, so the curve has no doubles."""
    run = tmp_path / "run"
    code, lines = run_ranks(1, train_args(synth_root, run, engine="ddp", epochs=2, use_val=False),
                            extra_env={"LANENB_FAULT_RANK": "0", "LANENB_FAULT_STEP": "10"})
    assert code != 0, dump(lines)
    crashed = [e["step"] for e in events_of(lines, "step", rank=0)]
    checkpoint = max(e["step"] for e in events_of(lines, "checkpoint", rank=0))
    assert max(crashed) > checkpoint, (crashed, checkpoint)  # there are steps to replay

    code, lines = run_ranks(1, train_args(synth_root, run, engine="ddp", epochs=2, use_val=False, resume=True))
    assert code == 0, dump(lines)
    resumed = [e["step"] for e in events_of(lines, "step", rank=0)]
    drawn = [s for s, _ in scalars(tensorboard_dir(run) / TRAINING)["train/loss"]]
    assert drawn == [s for s in crashed if s <= checkpoint] + resumed
