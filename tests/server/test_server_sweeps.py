"""Sweeps through the server extension: the list (newest first: state, trials settled of the
total, the best value, the objective), one sweep opened (its trials table rows with the pruned
trial's why, the best trial, the settings with secrets redacted, and the ``%lanesweep`` chart as
one Vega-Lite spec per part), the 4xx answers for bad and unknown names, and Stop: a viewer may
look but not stop, and a real driver's stop cancels its running trial."""

from __future__ import annotations

import asyncio
import json
import time

import pytest
from jupyter_server.auth.authorizer import Authorizer
from server_support import body_of
from sweep_studies import Trial, record_sweep
from tornado.httpclient import HTTPClientError

from lanenb.charts.specs import SCHEMA

LOSER_WHY = "pruned at epoch 1: val.accuracy 0.300, the other trials' median there 0.600 (best 0.600)"


@pytest.fixture
def searched() -> None:
    """``lr-old``: finished (a complete, a pruned and a failed trial); ``lr-new``, made after it:
    one trial of four done, one asked for and never settled (its driver is gone: interrupted)."""
    record_sweep("lr-old", [Trial({"lr": 0.01, "momentum": 0.9}, [0.6, 0.7, 0.8]),
                            Trial({"lr": 0.001, "momentum": 0.8}, [0.3], "pruned"),
                            Trial({"lr": 0.05, "momentum": 0.8}, [], "failed", error="rank 0 exited with 1")],
                 env={"WANDB_API_KEY": "0123456789abcdef"})
    record_sweep("lr-new", [Trial({"lr": 0.02, "momentum": 0.8}, [0.5, 0.55]),
                            Trial({"lr": 0.03, "momentum": 0.9}, [0.4], "running")], total=4)


async def _refused(fetch, *parts, **kwargs) -> tuple[int, str]:
    with pytest.raises(HTTPClientError) as err:
        await fetch(*parts, **kwargs)
    return err.value.code, json.loads(err.value.response.body)["message"]


async def test_sweeps_are_listed_newest_first_with_state_trials_and_best(jp_fetch, searched):
    listed = body_of(await jp_fetch("lanenb", "sweeps"))["sweeps"]
    assert [s["name"] for s in listed] == ["lr-new", "lr-old"]
    new, old = listed
    assert (old["state"], old["trials_done"], old["trials_total"], old["trials_running"]) == ("finished", 3, 3, 0)
    assert old["best"]["number"] == 0 and old["best"]["value"] == pytest.approx(0.8)
    assert old["best"]["job"] == "lr-old-0" and old["objective"] == {"label": "val.accuracy", "direction": "maximize"}
    assert (new["state"], new["trials_done"], new["trials_total"], new["trials_running"]) == ("interrupted", 1, 4, 1)
    assert new["best"]["value"] == pytest.approx(0.55)
    only = body_of(await jp_fetch("lanenb", "sweeps", params={"limit": "1"}))["sweeps"]
    assert [s["name"] for s in only] == ["lr-new"]


async def test_no_sweep_yet_lists_nothing_and_makes_no_database(jp_fetch, lanenb_home):
    assert body_of(await jp_fetch("lanenb", "sweeps"))["sweeps"] == []
    assert not (lanenb_home / "sweeps").exists()


async def test_a_sweep_opens_with_its_trials_best_settings_and_charts(jp_fetch, searched):
    sweep = body_of(await jp_fetch("lanenb", "sweeps", "lr-old"))
    assert sweep["name"] == "lr-old" and sweep["state"] == "finished" and sweep["params"] == ["lr", "momentum"]
    rows = [(t["number"], t["state"], t["params"], t["value"], t["epochs"], t["job"], t["why"])
            for t in sweep["trials"]]
    assert rows == [
        (0, "complete", {"lr": 0.01, "momentum": 0.9}, pytest.approx(0.8), 3, "lr-old-0", None),
        (1, "pruned", {"lr": 0.001, "momentum": 0.8}, pytest.approx(0.3), 1, "lr-old-1", LOSER_WHY),
        (2, "failed", {"lr": 0.05, "momentum": 0.8}, None, 0, "lr-old-2", "rank 0 exited with 1"),
    ]
    assert sweep["best"]["number"] == 0
    settings = sweep["settings"]
    assert (settings["sampler"], settings["pruner"], settings["trials"]) == ("tpe", "median", 3)
    assert [d["name"] for d in settings["space"]] == ["lr", "momentum"]
    assert settings["base"]["env"] == {"WANDB_API_KEY": "<redacted>"}
    assert "0123456789abcdef" not in json.dumps(sweep)
    # the %lanesweep chart, one spec per part, in the live panels' schema
    charts = {c["usermeta"]["lanenb"]["panel"]: c for c in sweep["charts"]}
    assert list(charts) == ["each trial", "best so far", "val.accuracy vs lr", "val.accuracy vs momentum"]
    assert all(c["$schema"] == SCHEMA and "hconcat" not in c for c in charts.values())
    curves = charts["each trial"]["data"]["values"]
    assert {(p["trial"], p["epoch"], p["pruned"]) for p in curves} == {("0", 1, False), ("0", 2, False),
                                                                       ("0", 3, False), ("1", 1, True)}
    assert charts["val.accuracy vs lr"]["encoding"]["x"]["scale"] == {"type": "log"}


@pytest.mark.parametrize("name, status, message", [
    ("Bad_Name", 400, "sweep name 'Bad_Name' is not valid: 1-40 lower-case letters, digits or '-'"),
    ("nowhere", 404, "no sweep named 'nowhere'; there are: lr-new, lr-old"),
])
async def test_bad_and_unknown_sweep_names_are_answered_with_a_message(jp_fetch, searched, name, status, message):
    code, said = await _refused(jp_fetch, "lanenb", "sweeps", name)
    assert code == status and said.startswith(message)
    code, said = await _refused(jp_fetch, "lanenb", "sweeps", name, "stop", method="POST",
                                body=json.dumps({"confirm": name}))
    assert code == status and said.startswith(message)


async def test_a_bad_limit_or_confirmation_is_refused(jp_fetch, searched, lanenb_home):
    code, message = await _refused(jp_fetch, "lanenb", "sweeps", params={"limit": "0"})
    assert code == 400 and message == "limit=0: must be an integer from 1 to 500"
    code, message = await _refused(jp_fetch, "lanenb", "sweeps", "lr-old", "stop", method="POST",
                                   body=json.dumps({"confirm": "lr-new"}))
    assert code == 400 and message == "confirm='lr-new': repeat the sweep's name ('lr-old') to stop it"


async def test_stopping_a_sweep_without_a_driver_changes_nothing(jp_fetch, searched, lanenb_home):
    reply = body_of(await jp_fetch("lanenb", "sweeps", "lr-old", "stop", method="POST",
                                   body=json.dumps({"confirm": "lr-old"})))
    assert reply == {"name": "lr-old", "state": "finished"}
    assert not (lanenb_home / "sweeps" / "lr-old.stop").exists()


class ReadOnlyAuthorizer(Authorizer):
    """A viewer: may read every resource, write none (JupyterHub read-only sharing)."""

    def is_authorized(self, handler, user, action, resource) -> bool:
        return action == "read"


class TestReadOnlyUser:
    @pytest.fixture
    def jp_server_config(self):
        return {"ServerApp": {"jpserver_extensions": {"lanenb": True}, "authorizer_class": ReadOnlyAuthorizer}}

    async def test_a_viewer_reads_sweeps_but_cannot_stop_one(self, jp_fetch, searched):
        assert [s["name"] for s in body_of(await jp_fetch("lanenb", "sweeps"))["sweeps"]] == ["lr-new", "lr-old"]
        assert len(body_of(await jp_fetch("lanenb", "sweeps", "lr-old"))["trials"]) == 3
        code, message = await _refused(jp_fetch, "lanenb", "sweeps", "lr-old", "stop", method="POST",
                                       body=json.dumps({"confirm": "lr-old"}))
        assert code == 403 and "not authorized to write on resource: lanenb" in message


@pytest.mark.slow
async def test_stop_ends_a_running_sweep_and_cancels_its_trial(jp_fetch, mpirun, tmp_path):
    from lanenb.jobs import JobState, TrainSpec, get_job
    from lanenb.sweeps import sweep
    from lanenb_trainer.data.synth import synthesize

    data = tmp_path / "tusimple"
    synthesize(data, 12, seed=0, width=320, height=180, test_fraction=0.2, progress=False)
    spec = TrainSpec(dataset=str(data), processes=1, epochs=50, batch_size=4,
                     extra_args=["--img-height", "64", "--img-width", "160"])
    s = sweep(spec, {"lr": "1e-3..3e-2:log"}, name="live", trials=2)
    try:
        deadline = time.monotonic() + 60
        while True:
            listed = body_of(await jp_fetch("lanenb", "sweeps"))["sweeps"]
            if listed[0]["state"] == "running" and listed[0]["trials_running"] == 1:
                break
            assert time.monotonic() < deadline, (listed, s.log())
            await asyncio.sleep(0.2)
        reply = body_of(await jp_fetch("lanenb", "sweeps", "live", "stop", method="POST",
                                       body=json.dumps({"confirm": "live"})))
        assert reply == {"name": "live", "state": "stopped"}, s.log()
        opened = body_of(await jp_fetch("lanenb", "sweeps", "live"))
        assert [(t["state"], t["why"]) for t in opened["trials"]] == [("failed", "stopped with the sweep")]
        assert get_job("live-0").wait(timeout=60).state is JobState.CANCELLED
    finally:
        s.stop(timeout=30)
