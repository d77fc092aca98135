"""One headline test figure, labelled with its model, on every face.

A finished run is scored with the last model and with ``best.pt``; the two numbers differ. The
status line, the chart legend, ``%lanejobs``, ``%lanecompare``, the sidebar's REST API (the jobs
list and the job panel's state), ``lanenb jobs list/show`` and ``job.metrics`` must all show the
same headline figure (best.pt's when there is one), say which model it is, and show the other
model's beside it. Real jobs: the scripted backend replays the trainer's events and the test
writes the ``metrics.json`` the trainer's ``_finish`` writes.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from server_support import body_of, launch, training_script

pytestmark = pytest.mark.usefixtures("mpirun", "scripted_cleanup")

LAST = {"accuracy": 0.948, "fp": 0.03, "fn": 0.02, "frames": 12}
BEST = {"accuracy": 0.938, "fp": 0.05, "fn": 0.04, "frames": 12}
EPOCHS = 3  # epoch indexes 0, 1, 2, said 1..3: the last model is "epoch 3", best.pt was picked at index 1 ("epoch 2")


def trainer_script(with_best: bool) -> list[dict]:
    """``training_script``'s events with the test evals the trainer emits: the last model's
    (carrying the epochs done) and, with ``with_best``, best.pt's (carrying its epoch)."""
    steps = [s for s in training_script(steps=6, epochs=EPOCHS, sleep=0.01)
             if s.get("event", {}).get("kind") != "eval"]
    evals = [{"rank": 0, "event": {"kind": "eval", "split": "test", "epoch": EPOCHS, "step": 6, "model": "last",
                                   **LAST}}]
    if with_best:
        evals.append({"rank": 0, "event": {"kind": "eval", "split": "test", "epoch": 1, "step": 6, "model": "best",
                                           **BEST}})
    end = next(i for i, s in enumerate(steps) if s.get("event", {}).get("kind") == "end")
    return steps[:end] + evals + steps[end:]


def write_metrics(run_dir: str, with_best: bool) -> None:
    """``metrics.json`` as ``Trainer._finish`` writes it (before ``headline`` was added, so the
    faces' own use of the rule is what is tested)."""
    chosen = BEST if with_best else LAST
    metrics = {**{k: chosen[k] for k in ("accuracy", "fp", "fn")},
               "headline_model": "best.pt" if with_best else "last model", "best_epoch": 1,
               "models": {"test": f"last model (after epoch {EPOCHS}, step 6)",
                          "test_best": "best.pt (epoch 2)" if with_best else None},
               "status": "completed", "test": LAST, "test_best": BEST if with_best else None,
               "best": {"epoch": 1, "accuracy": 0.7}, "epochs": EPOCHS, "steps": 6, "world_size": 2,
               "engine": "ddp", "duration_s": 1.0}
    (Path(run_dir) / "metrics.json").write_text(json.dumps(metrics))


CASES = {
    # name: (with best.pt, headline words, table cell)
    "lane-best": (True, "test acc 0.9380 (best.pt, epoch 2), 0.9480 (last, epoch 3)",
                  "0.9380 test (best.pt, epoch 2); 0.9480 (last, epoch 3)"),
    "lane-last": (False, "test acc 0.9480 (last, epoch 3)", "0.9480 test (last, epoch 3)"),
}


@pytest.fixture
def runs(tmp_path):
    jobs = {}
    for name, (with_best, _, _) in CASES.items():
        (tmp_path / name).mkdir()
        job = launch(tmp_path / name, name, trainer_script(with_best))
        write_metrics(job.run_dir, with_best)
        jobs[name] = job
    return jobs


async def test_every_face_shows_the_same_labelled_headline(runs, jp_fetch, capsys, monkeypatch):
    from lanenb.analysis.chartdata import run_rows
    from lanenb.analysis.compare import compare
    from lanenb.analysis.runstate import tail_state
    from lanenb.cli import main
    from lanenb.jobs import get_job, list_jobs
    from lanenb.notebook.magics import JobTable

    listing = {j["name"]: j for j in body_of(await jp_fetch("lanenb", "jobs"))["jobs"]}
    table = {r["name"]: r for r in JobTable(list_jobs()).rows}
    for name, (with_best, words, cell) in CASES.items():
        job = get_job(name)
        # job.metrics: the labelled headline beside the raw test / test_best
        head = job.metrics["headline"]
        assert head["text"] == words and head["label"] == ("best.pt, epoch 2" if with_best else "last, epoch 3")
        assert head["accuracy"] == (BEST if with_best else LAST)["accuracy"]
        assert (head["other"] or {}).get("label") == ("last, epoch 3" if with_best else None)
        # the status line (live view, %lanetrain --wait) and the REST API's jobs list (the sidebar)
        assert words in tail_state(job).summary()
        assert listing[name]["headline"]["text"] == words and listing[name]["accuracy"] == head["accuracy"]
        assert listing[name]["accuracy_label"] == head["label"]
        # the job panel's state (REST)
        state = body_of(await jp_fetch("lanenb", "jobs", name, "updates", params={"state": "1", "tail": "5"}))
        assert state["state"]["headline"]["text"] == words
        # %lanejobs
        assert table[name]["accuracy"] == cell
        # lanenb jobs list (text and JSON) and lanenb jobs show
        assert main(["jobs", "show", name]) == 0
        shown = capsys.readouterr().out
        accuracy = (BEST if with_best else LAST)["accuracy"]
        assert f"test accuracy {accuracy:.4f}" in shown and f"({head['label']}; 12 frames)" in shown
        assert ("last, epoch 3: accuracy 0.9480" in shown) is with_best
        assert main(["jobs", "show", name, "--json"]) == 0
        assert json.loads(capsys.readouterr().out)["headline"]["text"] == words
        # the charts' test labels (notebook view, sidebar panel and static image draw these rows)
        labels = [r["label"] for r in run_rows(tail_state(job))["tests"]]
        assert labels == [f"test {accuracy:.3f} ({head['label']})"] + (["test 0.948 (last, epoch 3)"] * with_best)
        charted = [r["label"] for r in state["state"]["charts"]["rows"]["tests"]]
        assert charted == labels
    assert main(["jobs", "list"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert "TEST ACCURACY" in lines[0]
    for name, (_, _, cell) in CASES.items():
        assert cell in next(line for line in lines if line.startswith(name))
    assert main(["jobs", "list", "--json"]) == 0
    rows = {r["name"]: r for r in json.loads(capsys.readouterr().out)}
    assert {n: rows[n]["headline"]["text"] for n in CASES} == {n: c[1] for n, c in CASES.items()}
    # %lanecompare
    cells = {r["run"]: r["test_cell"] for r in compare(["lane-best", "lane-last"]).rows}
    assert cells == {name: cell for name, (_, _, cell) in CASES.items()}
    assert "0.9380 test (best.pt, epoch 2); 0.9480 (last, epoch 3)" in repr(compare(["lane-best", "lane-last"]))
