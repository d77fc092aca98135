"""The AzureML emulator (``tests/support/azureml_emulator.py``) is as strict as the recordings show
the service to be: what azure-ai-ml never sends is refused loudly and kept in ``problems``, and a
job's log and state move as AzureML's do (Range reads, cancel of an ended job refused)."""

from __future__ import annotations

import requests
from azureml_emulator import BLOB_HOST, SAS, AzureMLEmulator, Play
from azureml_replay import WORKSPACE, FakeCredential, transport

from lanenb.backends.azureml import AzureMLBackend
from lanenb.contract.spec import TrainSpec
from lanenb.jobs import JobState

WS = ("https://management.azure.com/subscriptions/{subscription_id}/resourceGroups/{resource_group}/providers/"
      "Microsoft.MachineLearningServices/workspaces/{workspace}").format(**WORKSPACE)
TOKEN = {"Authorization": f"Bearer {FakeCredential.token}"}


def _session(emulator: AzureMLEmulator) -> requests.Session:
    session = requests.Session()
    session.mount("https://", emulator)
    return session


def _quick(argv: list[str]) -> Play:
    return Play(((0.0, 0, "line one"), (0.0, 0, "line two")))


def test_what_the_sdk_never_sends_is_refused_with_the_route_named():
    emulator = AzureMLEmulator(_quick)
    http = _session(emulator)
    unknown = http.get(f"{WS}/datastores/workspaceblobstore?api-version=2024-01-01-preview", headers=TOKEN)
    assert unknown.status_code == 404 and "no route for GET management.azure.com/" in unknown.json()["error"]["message"]
    other_version = http.get(f"{WS}/jobs/lane-x?api-version=2020-01-01", headers=TOKEN)
    assert other_version.status_code == 400 and "get_job: api-version '2020-01-01'" in other_version.text
    unsigned = http.get(f"{WS}/jobs/lane-x?api-version=2024-01-01-preview")
    assert unsigned.status_code == 401
    assert len(emulator.problems) == 3  # each kept, for the test using the emulator to fail on


def test_a_job_runs_its_play_and_a_cancel_after_its_end_is_refused():
    emulator = AzureMLEmulator(_quick, queue_s=0.0)
    backend = AzureMLBackend(credential=FakeCredential(), transport=transport(emulator), poll_interval=0.0)
    spec = TrainSpec(dataset="azureml:tusimple:1", backend="azureml", name="lane-emu", processes=1,
                     azureml=dict(compute="cpu-cluster", environment="lanenb-trainer:3", **WORKSPACE))
    handle = backend.submit(spec)
    assert backend.status(spec, handle).state is JobState.SUCCEEDED  # a play with nothing to wait for
    log = f"https://{BLOB_HOST}/azureml/ExperimentRun/dcid.lane-emu/user_logs/std_log_process_0.txt?{SAS}"
    http = _session(emulator)
    assert http.get(log).text == "line one\nline two\n"
    tail = http.get(log, headers={"Range": "bytes=9-"})
    assert (tail.status_code, tail.text) == (206, "line two\n")
    assert http.get(log, headers={"Range": "bytes=18-"}).status_code == 416
    backend.cancel(spec, handle)  # AzureML refuses (400: terminal state); the backend takes that as done
    assert [r.route for r in emulator.requests[-2:]] == ["cancel_job", "get_job"]
    assert emulator.status_of("lane-emu") == "Completed"
    assert [line.text for line, _c in backend.read_log(spec, handle, None).lines] == ["line one", "line two"]
    assert emulator.problems == []
