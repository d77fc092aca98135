"""The jobs API of the server extension against real jobs (supervisor + mpirun), through a real
Jupyter server: list, detail, the resumable update stream (with the shared reduced state, from
the live end, many tabs on one log read per tick), chart history, stop, and the one summary row
every face shows."""

from __future__ import annotations

import asyncio
import json
import time

import pytest
from server_support import body_of, launch, training_script
from tornado.httpclient import HTTPClientError

from lanenb.jobs import JobState, get_job

pytestmark = pytest.mark.usefixtures("mpirun", "scripted_cleanup")


async def test_jobs_are_listed_newest_first_with_progress_accuracy_and_utilisation(jp_fetch, tmp_path):
    launch(tmp_path, "lane-old", training_script(steps=4, sleep=0.01))
    launch(tmp_path, "lane-new", training_script(steps=6, sleep=0.01, scale=0.5))
    jobs = body_of(await jp_fetch("lanenb", "jobs"))["jobs"]
    assert [j["name"] for j in jobs] == ["lane-new", "lane-old"]
    new = jobs[0]
    assert new["state"] == "succeeded" and new["final"] is True
    assert new["progress"] == 1.0 and new["step"] == 6 and new["total_steps"] == 6
    assert new["accuracy"] == pytest.approx(0.455)
    util = new["utilisation"]
    assert util["metric"] == "cpu_percent" and util["rank"] == 0
    assert util["values"] == [50.0] * 6 and util["last"]["cpu_percent"] == 50.0
    limited = body_of(await jp_fetch("lanenb", "jobs", params={"limit": "1"}))["jobs"]
    assert [j["name"] for j in limited] == ["lane-new"]


async def test_job_detail_has_the_redacted_spec_and_summary(jp_fetch, tmp_path):
    launch(tmp_path, "lane-detail", training_script(steps=2, sleep=0.01))
    detail = body_of(await jp_fetch("lanenb", "jobs", "lane-detail"))
    assert detail["name"] == "lane-detail" and detail["backend"] == "scripted"
    assert detail["spec"]["processes"] == 2 and detail["summary"]["state"] == "succeeded"
    assert detail["snapshots"] == []


@pytest.mark.parametrize("parts, params, status, message", [
    (("jobs", "nope"), {}, 404, "nope"),
    (("jobs", "nope", "updates"), {}, 404, "nope"),
    (("jobs", "nope", "metrics"), {}, 404, "nope"),
    (("jobs",), {"limit": "0"}, 400, "limit=0: must be an integer from 1 to 500"),
    (("jobs",), {"limit": "many"}, 400, "limit='many': must be an integer"),
])
async def test_bad_requests_get_a_4xx_json_message(jp_fetch, parts, params, status, message):
    with pytest.raises(HTTPClientError) as err:
        await jp_fetch("lanenb", *parts, params=params)
    assert err.value.code == status
    assert message in json.loads(err.value.response.body)["message"]


async def test_updates_resume_from_the_cursor_without_losing_or_repeating_lines(jp_fetch, tmp_path):
    job = launch(tmp_path, "lane-stream", training_script(steps=6, sleep=0.01))
    whole = job.poll(None)
    expected = [u.line.text for u in whole.updates if u.line is not None]
    got, cursor, final = [], None, False
    for _ in range(50):
        params = {"max_lines": "7"} | ({"cursor": cursor} if cursor else {})
        batch = body_of(await jp_fetch("lanenb", "jobs", "lane-stream", "updates", params=params))
        got += [u["line"]["text"] for u in batch["updates"] if "line" in u]
        assert len([u for u in batch["updates"] if "line" in u]) <= 7
        cursor, final = batch["cursor"], batch["final"]
        if final:
            break
    assert final and got == expected
    first = body_of(await jp_fetch("lanenb", "jobs", "lane-stream", "updates"))
    assert first["updates"][0]["status"]["state"] == "succeeded"
    shown = [u["display"] for u in first["updates"] if "line" in u]
    assert "plain output of rank 0" in shown
    assert any(text and text.startswith("epoch 1 step 1/6") for text in shown)  # events in words
    steps = [u["event"] for u in first["updates"] if u.get("event", {}).get("kind") == "step"]
    assert [e["step"] for e in steps] == [1, 2, 3, 4, 5, 6]


@pytest.mark.parametrize("params, message", [
    ({"cursor": "garbage"}, "is not a cursor returned by Job.poll"),
    ({"wait": "soon"}, "wait='soon': must be a number of seconds"),
    ({"wait": "99"}, "wait='99': must be from 0 to 25 seconds"),
    ({"max_lines": "0"}, "max_lines=0: must be an integer from 1 to 2000"),
    ({"tail": "-1"}, "tail=-1: must be an integer from 0 to 2000"),
    ({"tail": "all"}, "tail='all': must be an integer"),
])
async def test_bad_update_requests_name_the_value(jp_fetch, tmp_path, params, message):
    launch(tmp_path, "lane-bad", training_script(steps=1, sleep=0.01))
    with pytest.raises(HTTPClientError) as err:
        await jp_fetch("lanenb", "jobs", "lane-bad", "updates", params=params)
    assert err.value.code == 400 and message in json.loads(err.value.response.body)["message"]


async def test_long_poll_answers_with_the_next_lines_of_a_running_job(jp_fetch, tmp_path):
    job = launch(tmp_path, "lane-live", training_script(steps=30, sleep=0.2), wait=False)
    cursor = None
    texts: list[str] = []
    while not any("step 3/30" in (t or "") for t in texts):
        params = {"wait": "10"} | ({"cursor": cursor} if cursor else {})
        batch = body_of(await jp_fetch("lanenb", "jobs", "lane-live", "updates", params=params))
        assert batch["updates"] or batch["final"]  # a long poll never answers empty while running
        texts += [u.get("display") for u in batch["updates"] if "line" in u]
        cursor = batch["cursor"]
    job.cancel()


async def test_metrics_give_the_chart_history_of_the_run(jp_fetch, tmp_path):
    launch(tmp_path, "lane-chart", training_script(steps=6, sleep=0.01))
    metrics = body_of(await jp_fetch("lanenb", "jobs", "lane-chart", "metrics"))
    assert metrics["series"]["loss"]["x"] == [1, 2, 3, 4, 5, 6]
    assert metrics["series"]["loss"]["y"] == pytest.approx([2.0 / s for s in range(1, 7)])
    assert metrics["epochs"]["val_accuracy"]["y"] == pytest.approx([0.5, 0.7])
    assert set(metrics["system"]) == {"0", "1"} and metrics["accuracy"] == pytest.approx(0.91)
    again = body_of(await jp_fetch("lanenb", "jobs", "lane-chart", "metrics"))  # folded incrementally
    assert again["series"]["loss"]["x"] == [1, 2, 3, 4, 5, 6]


async def test_updates_carry_the_shared_state_and_a_new_tab_starts_at_the_live_end(jp_fetch, tmp_path):
    job = launch(tmp_path, "lane-tab", training_script(steps=6, sleep=0.01))
    lines = [u.line.text for u in job.poll(None).updates if u.line is not None]
    tab = body_of(await jp_fetch("lanenb", "jobs", "lane-tab", "updates", params={"tail": "3", "state": "1"}))
    assert [u["line"]["text"] for u in tab["updates"]] == lines[-3:]
    assert tab["final"] and tab["status"]["state"] == "succeeded"
    metrics = body_of(await jp_fetch("lanenb", "jobs", "lane-tab", "metrics"))
    # what the panel draws, and no more: the raw histories (series, epochs, system) are metrics'
    assert set(tab["state"]) == {"state", "step", "total_steps", "progress", "eta_s", "world_size", "headline",
                                 "verdict", "ranks", "charts", "epoch", "epochs_total"}
    assert {k: metrics[k] for k in tab["state"]} == tab["state"]  # one state, two routes
    assert tab["state"]["step"] == 6 and tab["state"]["headline"]["accuracy"] == pytest.approx(0.91)
    assert [r["rank"] for r in tab["state"]["ranks"]] == [0, 1]
    charted = [r["step"] for r in tab["state"]["charts"]["rows"]["loss"] if r["series"] == "loss"]
    assert charted == metrics["series"]["loss"]["x"] == [1, 2, 3, 4, 5, 6]  # the charts' rows hold the history
    after = body_of(await jp_fetch("lanenb", "jobs", "lane-tab", "updates", params={"cursor": tab["cursor"]}))
    assert after["updates"] == [] and after["final"] and "state" not in after  # only when asked


async def test_tabs_watching_a_running_job_share_one_log_read_per_tick(jp_fetch, tmp_path, monkeypatch):
    from lanenb.jobs.job import Job
    from lanenb.server.feeds import TICK_S

    job = launch(tmp_path, "lane-tabs", training_script(steps=40, sleep=0.1), wait=False)
    reads: list[float] = []
    poll = Job.poll

    def counted(self, *args, **kwargs):
        reads.append(time.monotonic())
        return poll(self, *args, **kwargs)

    monkeypatch.setattr(Job, "poll", counted)

    async def tab() -> tuple[list[str], int]:
        got, replies = [], 0
        batch = body_of(await jp_fetch("lanenb", "jobs", "lane-tabs", "updates", params={"tail": "0"}))
        start = time.monotonic()
        while time.monotonic() - start < 2.5 and not batch["final"]:
            batch = body_of(await jp_fetch("lanenb", "jobs", "lane-tabs", "updates",
                                           params={"cursor": batch["cursor"], "wait": "5", "state": "1"}))
            got += [u["line"]["text"] for u in batch["updates"] if "line" in u]
            replies += 1
        return got, replies

    began = time.monotonic()
    results = await asyncio.gather(*(tab() for _ in range(4)))
    elapsed = time.monotonic() - began
    job.cancel()
    assert all(replies >= 2 for _, replies in results)
    assert len(reads) <= elapsed / TICK_S + 2, (len(reads), elapsed)  # not one read per tab and request
    shortest = min(len(got) for got, _ in results)
    assert shortest > 0 and all(got[:shortest] == results[0][0][:shortest] for got, _ in results)


async def test_every_face_shows_the_same_summary_row(jp_fetch, tmp_path, capsys):
    from lanenb.cli import main
    from lanenb.jobs import list_jobs
    from lanenb.notebook.magics import JobTable

    launch(tmp_path, "lane-faces", training_script(steps=4, sleep=0.01))
    server = body_of(await jp_fetch("lanenb", "jobs"))["jobs"][0]
    magic = JobTable(list_jobs()).rows[0]
    assert main(["jobs", "list", "--json"]) == 0
    cli = json.loads(capsys.readouterr().out)[0]
    assert server["name"] == magic["name"] == cli["name"] == "lane-faces"
    assert server["backend"] == magic["backend"] == cli["backend"] == "scripted"
    assert server["status"] == magic["status"] == cli["state"] == "succeeded"
    assert magic["progress"] == f"{server['progress']:.0%}" == "100%"
    assert magic["accuracy"] == server["headline"]["cell"] == "0.9100 test (last)"  # no epoch in the scripted eval
    assert server["eta_s"] is None and server["error"] is None and server["run_dir"] == cli["run_dir"]


async def test_every_face_names_the_same_bottleneck(jp_fetch, tmp_path, capsys):
    """The doctor's verdict of one run, as the sidebar's list, its panel's state, %lanejobs and
    `lanenb jobs show` give it: the same line, starting with the verdict's word."""
    from lanenb.cli import main
    from lanenb.jobs import list_jobs
    from lanenb.notebook.magics import JobTable

    slow_data = {0: {"data_s": 0.4, "compute_s": 0.6}, 1: {"data_s": 0.4, "compute_s": 0.6}}
    launch(tmp_path, "lane-doctor", training_script(steps=6, sleep=0.01, timing=slow_data))
    server = body_of(await jp_fetch("lanenb", "jobs"))["jobs"][0]
    assert server["verdict"]["kind"] == "input-bound" and server["verdict"]["severity"] == "warn"
    line = server["verdict"]["line"]
    assert line.startswith("input-bound: ranks wait 40% of each step for data; loader workers 0 -> try")
    assert server["breakdown"]["1"]["data"] == pytest.approx(0.4)
    state = body_of(await jp_fetch("lanenb", "jobs", "lane-doctor", "updates", params={"state": "1", "tail": "5"}))
    assert state["state"]["verdict"]["line"] == line
    assert state["state"]["ranks"][0]["compute"] == pytest.approx(0.6)  # the panel's rank table
    assert JobTable(list_jobs()).rows[0]["verdict"] == line
    assert main(["jobs", "show", "lane-doctor"]) == 0
    out = capsys.readouterr().out
    assert out.splitlines()[0] == line
    assert main(["jobs", "show", "lane-doctor", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["verdict"]["line"] == line


async def test_stop_needs_the_name_as_confirmation_then_the_notebook_sees_cancelled(jp_fetch, tmp_path):
    job = launch(tmp_path, "lane-stop", training_script(steps=300, sleep=0.2), wait=False)
    for body in ({}, {"confirm": "yes"}):
        with pytest.raises(HTTPClientError) as err:
            await jp_fetch("lanenb", "jobs", "lane-stop", "stop", method="POST", body=json.dumps(body))
        assert err.value.code == 400
        assert "repeat the job's name ('lane-stop') to stop it" in json.loads(err.value.response.body)["message"]
    assert job.status().state == JobState.RUNNING
    with pytest.raises(HTTPClientError) as err:
        await jp_fetch("lanenb", "jobs", "lane-stop", "stop", method="POST", body="not json")
    assert err.value.code == 400
    reply = body_of(await jp_fetch("lanenb", "jobs", "lane-stop", "stop", method="POST",
                                   body=json.dumps({"confirm": "lane-stop"})))
    assert reply["status"]["state"] == "cancelled"
    assert get_job("lane-stop").status().state == JobState.CANCELLED  # what a kernel reads
