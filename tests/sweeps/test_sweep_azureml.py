"""A sweep whose trials run on the azureml backend, end to end: the driver (``drive``, in this
process) submits each trial as an AzureML command job through the real ``azure-ai-ml`` SDK, whose
HTTP goes to a stateful workspace emulator (``tests/support/azureml_emulator.py``) instead of a
strictly ordered replay, since a sweep polls its jobs in no fixed order. The emulator plays each
job's rank 0 log from the command line it was submitted with (the trainer's ``eval`` events,
better for a larger ``--lr``); the driver reads them from ``std_log_process_0.txt`` as AzureML
uploads it, reports each to Optuna, and the trial Optuna prunes is cancelled through the Job API:
a ``POST .../cancel`` reaches AzureML and the why is on the job's record."""

from __future__ import annotations

import dataclasses
import threading
from collections.abc import Iterator
from typing import Any

import pytest

pytest.importorskip("azure.ai.ml", reason="the azureml extra (pip install 'lanenb[azureml]')")

from azureml_emulator import AzureMLEmulator, Play
from azureml_replay import WORKSPACE, FakeCredential, transport

from lanenb.backends.azureml import AzureMLBackend
from lanenb.backends.azureml.workspace import WorkspaceRef, ml_client
from lanenb.contract import backends
from lanenb.jobs import JobState, TrainSpec, get_job, list_jobs
from lanenb.sweeps import sweep
from lanenb.sweeps.driver import drive, stop_file
from lanenb_trainer.events import format_event

EPOCH_S = 0.3


def _flag(argv: list[str], flag: str, default: str) -> str:
    """The last value of ``flag`` in the job's command line (the trainer's flags: the last one wins)."""
    found = [argv[i + 1] for i, a in enumerate(argv[:-1]) if a == flag]
    return found[-1] if found else default


def played_trainer(argv: list[str]) -> Play:
    """What rank 0 of a job writes: one ``eval`` event per epoch, every ``EPOCH_S``; for ``--lr``
    >= 1e-3 an accuracy that grows with it (0.85 at 0.01, 0.9 from 0.02; +0.01 an epoch); below,
    0.1 once and then nothing, running until it is cancelled (a loser the pruner must stop)."""
    assert argv[:3] == ["python", "-m", "lanenb_trainer"], argv
    lr, epochs = float(_flag(argv, "--lr", "0.01")), int(_flag(argv, "--epochs", "1"))
    good = lr >= 1e-3
    first = min(0.9, 0.8 + 5 * lr) if good else 0.1
    lines = [(0.0, 0, "Rank 0 starting on node 0")]
    for e in range(epochs if good else 1):
        lines.append((EPOCH_S * (e + 1), 0, format_event("eval", 0, split="val", epoch=e, step=e, fp=0.1, fn=0.1,
                                                         frames=4, accuracy=round(first + 0.01 * e, 2))))
    return Play(tuple(lines), end="Completed" if good else "hang")


@pytest.fixture
def backend_poll() -> float:
    """The backend's ``poll_interval`` (0: as fast as the driver polls)."""
    return 0.0


@pytest.fixture
def workspace(monkeypatch: pytest.MonkeyPatch, backend_poll: float) -> Iterator[AzureMLEmulator]:
    """The ``azureml`` backend, as every ``submit``/``get_job`` of this test builds it, talking to
    the emulator through the SDK (its transport, a fixed token): the built-in descriptor with
    only its factory replaced, registered through the plug-in registry and restored afterwards."""
    emulator = AzureMLEmulator(played_trainer)

    def factory(**opts: Any) -> AzureMLBackend:
        return AzureMLBackend(**{"credential": FakeCredential(), "transport": transport(emulator),
                                 "poll_interval": backend_poll, **opts})

    monkeypatch.setattr(backends, "_DESCRIPTORS", dict(backends._DESCRIPTORS))
    backends.register_descriptor(dataclasses.replace(backends.get_descriptor("azureml"), factory=factory),
                                 override=True)
    yield emulator
    assert emulator.problems == [], emulator.problems  # nothing the real service would refuse was sent


def _drive(name: str, timeout: float = 30.0) -> str:
    """The detached driver's loop, run here in a thread; stopped (and failed) after ``timeout``."""
    outcome: dict[str, Any] = {}

    def run() -> None:
        try:
            outcome["done"] = drive(name, poll_s=0.05)
        except BaseException as exc:  # re-raised in the test's thread
            outcome["error"] = exc

    thread = threading.Thread(target=run, name=f"sweep-{name}", daemon=True)
    thread.start()
    thread.join(timeout)
    if thread.is_alive():
        stop_file(name).touch()  # the driver's own way out: cancels its running trials
        thread.join(10)
        raise AssertionError(f"sweep {name} did not finish within {timeout} s")
    if "error" in outcome:
        raise outcome["error"]
    return str(outcome["done"])


def _tags(emulator: AzureMLEmulator) -> dict[str, dict[str, str]]:
    """Every job of the workspace with its tags, as the SDK's ``jobs.list`` reads them."""
    client = ml_client(WorkspaceRef(**{k: WORKSPACE[k] for k in ("subscription_id", "resource_group", "workspace")}),
                       FakeCredential(), transport=transport(emulator))
    return {job.name: dict(job.tags) for job in client.jobs.list()}


def test_a_sweep_runs_its_trials_as_tagged_azureml_jobs_and_cancels_the_pruned_one(workspace):
    spec = TrainSpec(dataset="azureml:tusimple:1", backend="azureml", processes=1, epochs=3,
                     azureml=dict(compute="cpu-cluster", environment="lanenb-trainer:3", **WORKSPACE))
    s = sweep(spec, {"lr": "1e-6..1e-1:log"}, name="az", trials=3, parallel=2, pruner="median",
              first=[{"lr": 0.01}, {"lr": 0.02}, {"lr": 1e-6}], start=False)
    assert workspace.sent("get_compute") and not workspace.jobs  # capacity read from the cluster; nothing run yet

    assert _drive("az") == "finished", s.log()
    rows = s.trials()
    assert [(r.number, r.state, r.job) for r in rows] == [
        (0, "complete", "az-0"), (1, "complete", "az-1"), (2, "pruned", "az-2")]
    # every validation result reached the study, read from the ranks' log files as they grew
    assert s.curves() == {0: {1: 0.85, 2: 0.86, 3: 0.87}, 1: {1: 0.9, 2: 0.91, 3: 0.92}, 2: {1: 0.1}}
    assert len(workspace.sent("log_file", "az-0")) >= 3  # followed while it ran, not read once at the end
    assert s.best is not None and s.best["number"] == 1 and s.best["value"] == pytest.approx(0.92)
    why = rows[2].why
    assert why == "pruned at epoch 1: val.accuracy 0.100, the other trials' median there 0.875 (best 0.900)", s.log()

    # each trial is one AzureML job created through the SDK, tagged with its sweep and trial
    assert [r.job for r in workspace.sent("create_job")] == ["az-0", "az-1", "az-2"]
    tags = _tags(workspace)
    assert {name: (t["lanenb.io/sweep"], t["lanenb.io/trial"], t["lanenb.job"]) for name, t in tags.items()} == {
        "az-0": ("az", "0", "az-0"), "az-1": ("az", "1", "az-1"), "az-2": ("az", "2", "az-2")}
    assert "--lr 1e-06" in workspace.jobs["az-2"].body["command"]

    # the loser was cancelled in AzureML (it would have run for ever), the winners were not
    assert [r.job for r in workspace.sent("cancel_job")] == ["az-2"]
    assert workspace.status_of("az-0") == "Completed"
    assert workspace.status_of("az-2") in ("CancelRequested", "Canceled")

    # ordinary lanenb jobs: in the registry, found by name, the why on the pruned one's record
    assert {j.name: j.backend_name for j in list_jobs()} == {"az-0": "azureml", "az-1": "azureml", "az-2": "azureml"}
    pruned = get_job("az-2").status()
    assert pruned.state is JobState.CANCELLED and pruned.reason == why
    assert get_job("az-1").status().state is JobState.SUCCEEDED

    # the winner trained again on two ranks, tagged as the sweep's retrain of trial 1
    again = s.retrain(processes=2, epochs=1)
    assert again.wait(timeout=20).state is JobState.SUCCEEDED
    assert _tags(workspace)["az-best"]["lanenb.io/retrain-of"] == "1" and workspace.jobs["az-best"].ranks == 2


@pytest.mark.parametrize("backend_poll", [0.5])
def test_the_driver_polls_a_trial_no_faster_than_its_backend_asks(workspace):
    """AzureML's 2 s between reads (ARM throttles a subscription's reads): a driver polling its
    loop every 0.05 s still reads each trial's job at the backend's pace, not 10x as often."""
    spec = TrainSpec(dataset="azureml:tusimple:1", backend="azureml", processes=1, epochs=4,
                     azureml=dict(compute="cpu-cluster", environment="lanenb-trainer:3", **WORKSPACE))
    sweep(spec, {"lr": "1e-3..1e-1:log"}, name="paced", trials=1, parallel=1, pruner="none",
          first=[{"lr": 0.02}], start=False)
    assert _drive("paced") == "finished"
    reads = workspace.sent("get_job", "paced-0")
    runtime = 4 * EPOCH_S + 0.5  # the played run, and at most one pace to see its end
    assert workspace.status_of("paced-0") == "Completed"
    assert 1 <= len(reads) <= runtime / 0.5 + 3, f"{len(reads)} reads of the job in ~{runtime} s"
