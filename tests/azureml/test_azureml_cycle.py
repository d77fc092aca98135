"""A recorded submit -> stream -> cancel cycle through the Job API, the SDK's real code running
down to the HTTP boundary (``azureml_replay.py``: every request checked against the recording)."""

from __future__ import annotations

import pytest
from azureml_replay import WORKSPACE

from lanenb.analysis.runstate import RunState
from lanenb.backends.azureml import AzureMLError
from lanenb.contract.spec import TrainSpec
from lanenb.jobs import get_job, submit
from lanenb.registry.jobs import JobRegistry


def _spec() -> TrainSpec:
    return TrainSpec(dataset="azureml:tusimple:1", backend="azureml", name="lane-az-1", processes=4, batch_size=4,
                     max_steps=20, azureml=dict(compute="gpu-cluster", instance_count=2, shm_size="16g",
                                                environment="lanenb-trainer:3", **WORKSPACE))


def test_submit_stream_and_cancel_reach_the_job_api_and_the_reducer(replayed):
    opts, http = replayed("submit_stream_cancel.json")
    registry = JobRegistry()
    job = submit(_spec(), registry=registry, **opts)
    assert job.handle["workspace"] == "lanes-ws" and job.handle["name"] == "lane-az-1"
    assert job.run_dir == "azureml://datastores/workspaceblobstore/paths/lanenb-runs/lane-az-1"
    assert "ml.azure.com/runs/lane-az-1" in job.handle["studio_url"]
    assert "token" not in str(job.handle).lower()  # the credential is never stored

    state = RunState()
    first = job.poll()
    state.apply_all(first.updates)
    assert first.status.state.value == "pending" and "quota" in first.status.reason
    assert not [u for u in first.updates if u.line]

    second = job.poll(first.cursor)
    lines = [u.line for u in second.updates if u.line]
    assert [(line.rank, line.text[:20]) for line in lines] == [
        (0, "Rank 0 starting on n"), (0, '@lanenb {"v":1,"t":1'), (0, '@lanenb {"v":1,"t":1'),
        (1, "Rank 1 starting on n"), (1, '@lanenb {"v":1,"t":1')]  # rank 0's unfinished line held back
    state.apply_all(second.updates)
    assert state.state == "running" and state.world_size == 4 and state.step == 10 and state.loss == 0.91

    third = job.poll(second.cursor)
    texts = [u.line.text for u in third.updates if u.line]
    assert texts[0] == "loading batch 11 of 204" and len(texts) == 2  # whole, once, nothing repeated
    state.apply_all(third.updates)
    assert state.step == 20 and state.loss == 0.74

    status = job.cancel()
    assert status.state.value == "cancelled"

    last = job.poll(third.cursor)
    assert last.final
    state.apply_all(last.updates)
    assert state.end_status == "cancelled" and state.state == "cancelled"
    assert [u.event.rank for u in last.updates if u.event] == [0, 1]
    http.assert_done()

    # another kernel: the registry row alone finds the job (final: nothing is asked of Azure)
    again = get_job("lane-az-1", registry=registry)
    assert again.status().state.value == "cancelled"


def test_a_refused_submit_names_azures_reason_and_records_the_job_failed(replayed):
    opts, http = replayed("submit_refused.json")
    registry = JobRegistry()
    with pytest.raises(AzureMLError, match=r"creating AzureML job lane-az-1 in workspace lanes-ws .*: AzureML "
                                           r"answered 400 UserError: Compute target gpu-cluster is not found"):
        submit(_spec(), registry=registry, **opts)
    http.assert_done()
    job = get_job("lane-az-1", registry=registry)
    assert job.status().state.value == "failed" and "Compute target gpu-cluster" in job.status().reason


def test_no_azure_sign_in_says_how_to_sign_in(replayed):
    from azure.core.exceptions import ClientAuthenticationError

    class NoSignIn:
        def get_token(self, *scopes, **kwargs):
            raise ClientAuthenticationError("DefaultAzureCredential failed to retrieve a token")

        get_token_info = get_token

    opts, http = replayed()
    with pytest.raises(AzureMLError, match=r"not signed in to Azure .*run 'az login'"):
        submit(_spec(), registry=JobRegistry(), **{**opts, "credential": NoSignIn()})
    assert http.sent == []  # nothing left this machine without a token
