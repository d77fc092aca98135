"""Epochs are counted from 1 in every text a person reads of a real run: the headline, the log
lines, the status line, ``%lanejobs`` and ``lanenb jobs list`` say the numbers the chart's
epoch axis shows, while the events keep their 0-based ``epoch`` index (docs/EVENTS.md)."""

from __future__ import annotations

import io
import json
import re
from pathlib import Path

import pytest

from lanenb.analysis.chartdata import run_rows
from lanenb.analysis.runstate import RunState
from lanenb.cli import main
from lanenb.cli.train import ConsoleRenderer
from lanenb.jobs import JobState, TrainSpec, list_jobs, submit
from lanenb.notebook.magics import JobTable

pytestmark = pytest.mark.slow

EPOCHS = 3


@pytest.fixture(scope="module")
def synth_data(tmp_path_factory) -> Path:
    from lanenb_trainer.data.synth import synthesize

    out = tmp_path_factory.mktemp("synth") / "tusimple"
    synthesize(out, 16, seed=0, width=320, height=180, test_fraction=0.25, progress=False)
    return out


def test_every_text_of_a_run_counts_epochs_as_its_chart_does(synth_data, tmp_path, capsys):
    spec = TrainSpec(dataset=str(synth_data), processes=2, engine="ddp", batch_size=2, epochs=EPOCHS,
                     use_val=True, run_dir=str(tmp_path / "run"),
                     extra_args=["--img-height", "64", "--img-width", "128", "--val-fraction", "0.25",
                                 "--log-every", "1"])
    job = submit(spec)
    status = job.wait(timeout=300)
    assert status.state is JobState.SUCCEEDED, "\n".join(str(line) for line in list(job.logs())[-30:])
    # the events keep their index: 0..EPOCHS-1
    assert [ev["epoch"] for ev in job.events() if ev.kind == "epoch" and ev.rank == 0] == list(range(EPOCHS))

    state = RunState()
    for update in job.poll(None).updates:
        state.apply(update)
    accuracy = [r for r in run_rows(state)["validation"] if r["metric"] == "accuracy"]
    assert [r["epoch"] for r in accuracy] == list(range(1, EPOCHS + 1))  # the chart's axis
    # best.pt is the first epoch with the highest validation accuracy: the chart's point
    chosen = max(accuracy, key=lambda r: r["value"])["epoch"]
    best_words = f"best.pt, epoch {chosen}"

    # the headline, in metrics.json (written by the trainer) and from the events
    metrics = job.metrics
    assert metrics["headline"]["label"] == best_words == state.headline().label
    assert metrics["models"] == {"test": f"last model (after epoch {EPOCHS}, step {metrics['steps']})",
                                 "test_best": f"best.pt (epoch {chosen})"}
    last_words = f"last, epoch {EPOCHS}"
    if chosen != EPOCHS:
        assert metrics["headline"]["other"]["label"] == last_words
    # the status line
    assert f"epoch {EPOCHS}/{EPOCHS}" in state.summary() and f"({best_words}" in state.summary()
    # the log lines the console writes
    out = io.StringIO()
    renderer = ConsoleRenderer(out)
    for line in job.logs():
        renderer(line)
    console = out.getvalue()
    done = re.findall(r"\[0\] (epoch \S+) done in", console)
    assert done == [f"epoch {n}/{EPOCHS}" for n in range(1, EPOCHS + 1)], console[-2000:]
    said = {int(n) for n in re.findall(r"\[0\] epoch (\d+) step \d+", console)}
    assert said == set(range(1, EPOCHS + 1))  # the step lines too: no "epoch 0"
    # %lanejobs and `lanenb jobs list`
    cell = metrics["headline"]["cell"]
    assert f"({best_words})" in cell and (chosen == EPOCHS or f"({last_words})" in cell)
    assert JobTable(list_jobs()).rows[0]["accuracy"] == cell
    capsys.readouterr()
    assert main(["jobs", "list"]) == 0
    assert cell in capsys.readouterr().out
    assert main(["jobs", "list", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)[0]["headline"]["label"] == best_words
