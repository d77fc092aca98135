"""The azureml backend's other calls over recorded HTTP: capacity from the compute cluster, jobs
that are gone, finished or failed, and following the ranks' logs to the end."""

from __future__ import annotations

from types import SimpleNamespace

import pytest
from azureml_replay import WORKSPACE

from lanenb.backends.azureml import AzureMLBackend, AzureMLError
from lanenb.backends.azureml.rank_logs import rank_files
from lanenb.backends.azureml.status import STATES, azureml_status
from lanenb.contract.spec import TrainSpec


def _spec(name: str = "lane-az-1", compute: str = "gpu-cluster") -> TrainSpec:
    return TrainSpec(dataset="azureml:tusimple:1", backend="azureml", name=name,
                     azureml=dict(compute=compute, **WORKSPACE))


def _handle(name: str) -> dict[str, str]:
    return {**WORKSPACE, "name": name}


def test_capacity_is_the_clusters_nodes_times_the_gpus_of_its_vm_size(replayed):
    opts, http = replayed("capacity_gpu.json", "capacity_cpu.json")
    backend = AzureMLBackend(**opts)
    assert backend.capacity(_spec()) == {"processes": 32, "gpus": 32, "gpus_per_process": 8}  # 4 x ND96amsr
    assert backend.capacity(_spec(compute="cpu-cluster")) == {"processes": 8, "gpus": 0, "gpus_per_process": 0}
    http.assert_done()
    assert backend.capacity(None) == {"processes": 1, "gpus": 0, "gpus_per_process": 0}  # no compute: no request


def test_datasets_are_the_workspaces_folder_assets(replayed):
    opts, http = replayed("data_assets.json")
    assert AzureMLBackend(**opts).datasets(_spec()) == ["azureml:culane@latest", "azureml:tusimple@latest"]
    http.assert_done()


def test_gone_finished_and_failed_jobs(replayed):
    opts, http = replayed("gone_finished_failed.json")
    backend = AzureMLBackend(**opts)
    gone = backend.status(_spec("lane-gone"), _handle("lane-gone"))
    assert gone.state.value == "lost" and "no longer exists in AzureML workspace lanes-ws" in gone.reason
    backend.cancel(_spec("lane-gone"), _handle("lane-gone"))  # nothing to cancel: fine
    backend.cancel(_spec("lane-done"), _handle("lane-done"))  # refused because it has ended: fine
    with pytest.raises(AzureMLError, match=r"cancelling AzureML job lane-busy: AzureML answered 409 UserError: "
                                           r"Another operation is in progress"):
        backend.cancel(_spec("lane-busy"), _handle("lane-busy"))
    failed = backend.status(_spec("lane-bad"), _handle("lane-bad"))
    assert failed.state.value == "failed" and failed.reason == "AzureML reports Failed: rank 1 exited with code 1"
    described = backend.describe(_spec("lane-gone"), {**_handle("lane-gone"), "run_dir": "azureml://x"})
    assert described["status"]["state"] == "lost" and described["workspace"] == WORKSPACE
    assert described["run_dir"] == "azureml://x" and described["azureml_status"] is None
    http.assert_done()


def test_following_the_logs_gives_each_ranks_lines_once_and_whole_to_the_end(replayed):
    opts, http = replayed("follow_logs.json")
    backend = AzureMLBackend(**opts)
    spec = _spec("lane-follow")
    lines = list(backend.logs(spec, _handle("lane-follow"), follow=True))
    assert [(line.rank, line.stream, line.text) for line in lines] == [
        (0, "stdout", "rank 0 line 1"), (1, "stdout", "rank 1 line 1"),
        (0, "stdout", "rank 0 line 2"), (1, "stdout", "rank 1 half line"),
        (1, "stderr", "Traceback (most recent call last):"),  # Open MPI's tag read by the one tag reader
        (1, "stdout", "rank 1 last words")]  # no newline, but the job has ended: delivered
    assert lines[4].error
    http.assert_done()


def test_a_tail_read_starts_at_the_last_lines_and_its_cursor_is_the_end(replayed):
    """What %lanejobs and the sidebar's first look read (``Job.poll(tail_lines=N)``)."""
    opts, http = replayed("tail_logs.json")
    chunk = AzureMLBackend(**opts).read_log(_spec("lane-follow"), _handle("lane-follow"), None, tail_lines=2)
    assert [line.text for line, _c in chunk.lines] == ["rank 0 line 4", "rank 0 line 5"]
    assert chunk.complete and chunk.cursor == '{"0":70}' == chunk.lines[-1][1]  # 5 lines of 14 bytes
    http.assert_done()


@pytest.mark.parametrize(("raw", "state"), [
    ("NotStarted", "pending"), ("Queued", "pending"), ("Preparing", "pending"), ("Running", "running"),
    ("Finalizing", "running"), ("CancelRequested", "running"), ("Completed", "succeeded"), ("Failed", "failed"),
    ("Canceled", "cancelled"), ("Paused", "suspended"), ("NotResponding", "unknown"), ("Reticulating", "unknown"),
])
def test_each_azureml_state_has_its_lanenb_state(raw, state):
    status = azureml_status(SimpleNamespace(status=raw, properties={}, creation_context=None))
    assert status.state.value == state and status.message == raw
    assert status.reason if raw not in ("Running", "Completed", "Canceled") else True


def test_the_state_table_covers_the_rest_api_enum():
    from azure.ai.ml._restclient.arm_ml_service.models import JobStatus

    assert {s.value for s in JobStatus} - {"Scheduled"} <= set(STATES)


def test_only_the_ranks_own_files_are_read():
    files = {"user_logs/std_log_process_1.txt": "u1", "user_logs/std_log_process_0.txt": "u0",
             "system_logs/lifecycler/execution-wrapper.log": "s", "azureml-logs/70_driver_log.txt": "d"}
    assert list(rank_files(files).items()) == [(0, "u0"), (1, "u1")]
    assert rank_files({"user_logs/std_log.txt": "one"}) == {0: "one"}
