"""Suspend, resume and the doctor's advice as one action, through a real Jupyter server over
real local jobs (supervisor + mpirun): the routes beside ``stop``, their refusals naming the bad
value (400) or the job's state (409), and what a notebook then reads from the registry."""

from __future__ import annotations

import json

import pytest
from server_support import body_of, launch, training_script
from tornado.httpclient import HTTPClientError

from lanenb.jobs import JobState, get_job

pytestmark = pytest.mark.usefixtures("mpirun", "scripted_cleanup")


async def _post(jp_fetch, name: str, route: str, body: object) -> dict:
    return body_of(await jp_fetch("lanenb", "jobs", name, route, method="POST", body=json.dumps(body)))


async def _refused(jp_fetch, name: str, route: str, body: object) -> tuple[int, str]:
    with pytest.raises(HTTPClientError) as err:
        await jp_fetch("lanenb", "jobs", name, route, method="POST",
                       body=body if isinstance(body, str) else json.dumps(body))
    return err.value.code, json.loads(err.value.response.body)["message"]


async def test_suspend_then_resume_with_a_change_and_bad_requests_are_refused(jp_fetch, tmp_path):
    job = launch(tmp_path, "lane-pause", training_script(steps=300, sleep=0.2), wait=False)
    assert await _refused(jp_fetch, "lane-pause", "resume", {}) == (
        409, "job 'lane-pause' is running: only a suspended or preempted job can be resumed")
    reply = await _post(jp_fetch, "lane-pause", "suspend", {})
    assert reply["name"] == "lane-pause" and reply["status"]["state"] == "suspended"
    assert get_job("lane-pause").status().state is JobState.SUSPENDED  # what a kernel reads
    assert (await _refused(jp_fetch, "lane-pause", "suspend", {}))[0] == 409
    for body, message in [({"changes": {"num_workers": -1}}, "num_workers=-1"),
                          ({"changes": ["num_workers", 6]}, "changes=['num_workers', 6]: must be an object"),
                          ({"changes": {"lr": 0.1}}, "lr=0.1: not a TrainSpec setting"),
                          ("not json", "the request body is not JSON")]:
        code, said = await _refused(jp_fetch, "lane-pause", "resume", body)
        assert code == 400 and message in said
    assert job.status().state is JobState.SUSPENDED  # a refused resume changes nothing
    reply = await _post(jp_fetch, "lane-pause", "resume", {"changes": {"num_workers": 3}})
    assert reply["status"]["state"] == "running"
    resumed = get_job("lane-pause")
    assert resumed.status().state is JobState.RUNNING and resumed.spec.num_workers == 3
    resumed.cancel()


async def test_apply_suspends_and_resumes_with_the_verdicts_change(jp_fetch, tmp_path):
    first = launch(tmp_path, "lane-apply", training_script(steps=300, sleep=0.2), wait=False).handle["pid"]
    code, said = await _refused(jp_fetch, "lane-apply", "apply", {"setting": "num_workers", "value": -2})
    assert code == 400 and "num_workers=-2" in said
    assert get_job("lane-apply").status().state is JobState.RUNNING  # refused before anything stopped
    assert (await _refused(jp_fetch, "lane-apply", "apply", {"value": 6}))[1].startswith("setting=None")
    reply = await _post(jp_fetch, "lane-apply", "apply", {"setting": "num_workers", "value": 6})
    assert reply["status"]["state"] == "running"
    job = get_job("lane-apply")
    assert job.spec.num_workers == 6 and job.status().state is JobState.RUNNING
    assert job.handle["pid"] != first  # a new supervisor over the same run dir and log
    job.cancel()
    assert (await _refused(jp_fetch, "lane-apply", "apply", {"setting": "num_workers", "value": 6}))[0] == 409
