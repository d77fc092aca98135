"""The backend through the public Job API (``lanenb.jobs``): submit, re-attach by name from
the registry (as a restarted kernel would), wait, events from the launcher log."""

from __future__ import annotations

import sys

from lanenb.contract.spec import TrainSpec
from lanenb.contract.status import JobState
from lanenb.jobs import get_job, submit
from lanenb.registry.jobs import JobRegistry


def test_submit_reattach_wait_and_events(cluster, kubeconfig, tmp_path, monkeypatch):
    _, fake = cluster
    monkeypatch.setenv("KUBECONFIG", str(kubeconfig))
    monkeypatch.setenv("LANENB_HOME", str(tmp_path / "home"))
    code = ("from lanenb_trainer.events import emit\n"
            "for r in (0, 1):\n"
            "    print(f'[1,{r}]<stdout>:', end='', flush=True); emit('step', r, step=1, loss=0.5 + r)\n")
    fake.rewrite_argv = lambda argv: [sys.executable, "-c", code]
    registry = JobRegistry(tmp_path / "jobs.sqlite3")
    spec = TrainSpec(dataset="/mnt/tusimple", backend="kubernetes", image="registry.example.com/lanenb-trainer:0.1",
                     name="lane-api", volumes=["data:/mnt"])
    from kubernetes import client, config  # the PVC must exist for the fake scheduler

    api = config.new_client_from_config(str(kubeconfig))
    client.CoreV1Api(api).create_namespaced_persistent_volume_claim("default", {
        "metadata": {"name": "data"}, "spec": {"accessModes": ["ReadWriteMany"],
                                               "resources": {"requests": {"storage": "1Gi"}}}})
    job = submit(spec, registry=registry)
    assert job.name == "lane-api"
    again = get_job("lane-api", registry=registry)  # a fresh Job object, as after a kernel restart
    status = again.wait(timeout=30, poll=0.1)
    assert status.state == JobState.SUCCEEDED, status
    events = list(again.events())
    assert [(e.kind, e.rank, e["loss"]) for e in events] == [("step", 0, 0.5), ("step", 1, 1.5)]
    info = again.describe()
    assert info["backend_detail"]["namespace"] == "default" and info["handle"]["run_dir"] == "/mnt/lanenb-runs/lane-api"


def test_cancelling_a_job_whose_mpijob_goes_at_once_records_cancelled_with_the_why(bare_cluster, tmp_path,
                                                                                   monkeypatch):
    # no operator: the MPIJob has no pods, so the foreground delete removes it at once and the
    # backend then reads it as gone (LOST); it was this cancel that removed it
    thread, _ = bare_cluster
    monkeypatch.setenv("KUBECONFIG", str(thread.write_kubeconfig(tmp_path / "kubeconfig")))
    monkeypatch.setenv("LANENB_HOME", str(tmp_path / "home"))
    job = submit(TrainSpec(dataset="/mnt/tusimple", backend="kubernetes", image="registry.example.com/t:1",
                           name="lane-gone", volumes=["data:/mnt"]))
    assert job.status().state is JobState.PENDING
    status = job.cancel(reason="pruned at epoch 1: val.accuracy 0.1")
    assert (status.state, status.reason) == (JobState.CANCELLED, "pruned at epoch 1: val.accuracy 0.1")
    again = get_job("lane-gone").status()  # the record, as another kernel reads it
    assert (again.state, again.reason) == (JobState.CANCELLED, "pruned at epoch 1: val.accuracy 0.1")
    assert get_job("lane-gone").cancel().state is JobState.CANCELLED  # twice is fine
