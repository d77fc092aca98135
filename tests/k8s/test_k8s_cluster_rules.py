"""Issue 9 against the stricter test cluster: what the operator, the Job controller and the
garbage collector do with a job, seen through the backend and the Job API."""

from __future__ import annotations

import sys

import pytest
from k8s_harness import add_pvc
from kube_emulator import JOBS, MPIJOBS, PODS, Fault
from polling import wait_for

from lanenb.backends.kubernetes.backend import (
    KubernetesBackend,
    KubernetesUnreachableError,
    RetryPolicy,
)
from lanenb.backends.kubernetes.manifests import build_mpijob
from lanenb.contract.spec import TrainSpec
from lanenb.contract.status import JobState
from lanenb.jobs import get_job, submit
from lanenb.registry.jobs import JobRegistry

IMAGE = "registry.example.com/lanenb-trainer:0.1"


def make_spec(**kw) -> TrainSpec:
    base = dict(dataset="/data/tusimple", backend="kubernetes", image=IMAGE, processes=2, name="lane-rules",
                volumes=["data:/data"])
    base.update(kw)
    return TrainSpec(**base)


def program(code: str):
    return lambda argv: [sys.executable, "-c", code, *argv[argv.index("lanenb_trainer") + 1:]]


@pytest.fixture
def pvc(cluster):
    add_pvc(cluster[0])


def test_a_crashed_launcher_is_not_rerun_and_keeps_its_log(cluster, backend, pvc):
    _, fake = cluster
    fake.rewrite_argv = program("import sys; print('[1,0]<stdout>:step 1', flush=True); sys.exit(3)")
    spec = make_spec(k8s={"backoff_limit": 0})  # with retries, each continues (test_k8s_preemption.py)
    handle = backend.submit(spec)
    status = wait_for(lambda: (s := backend.status(spec, handle)).state.finished and s)
    assert status.state == JobState.FAILED and status.exit_code == 3
    assert len(fake.launched) == 1  # trained once, not again from step 0 over the same run dir
    assert [line.text for line in backend.logs(spec, handle)] == ["step 1"]


def test_the_fake_operator_reruns_a_pod_template_restart_policy_launcher(cluster, backend, pvc):
    """What the old manifest did: restartPolicy only in the pod template; the operator's replica
    default (OnFailure) wins, the crashed launcher trains again and its pod (and log) vanish."""
    thread, fake = cluster
    fake.rewrite_argv = program("import sys; print('[1,0]<stdout>:step 1', flush=True); sys.exit(3)")
    spec = make_spec(name="lane-old", k8s={"backoff_limit": 0})
    body = build_mpijob(spec, namespace="default")
    for replica in body["spec"]["mpiReplicaSpecs"].values():
        del replica["restartPolicy"]
    body["spec"]["mpiReplicaSpecs"]["Launcher"]["template"]["spec"]["restartPolicy"] = "Never"
    thread.call(thread.emulator.create, MPIJOBS, "default", body)
    handle = {"namespace": "default", "name": "lane-old"}
    status = wait_for(lambda: (s := backend.status(spec, handle)).state.finished and s)
    assert status.state == JobState.FAILED and "backoff limit" in status.reason
    assert len(fake.launched) == 2
    assert list(backend.logs(spec, handle)) == []  # the pod was deleted with its log
    events = [e["reason"] for e in backend.describe(spec, handle)["events"]]
    assert "SetPodTemplateRestartPolicy" in events


def test_a_name_the_operator_refuses_is_a_pending_reason_not_a_silent_wait(cluster, backend, pvc):
    thread, _ = cluster
    spec = make_spec(name="lane-ok")
    body = build_mpijob(spec, namespace="default")
    body["metadata"]["name"] = "2024-exp"  # sent by kubectl, bypassing lanenb's checks
    thread.call(thread.emulator.create, MPIJOBS, "default", body)
    status = wait_for(lambda: "ValidationError" in (backend.status(spec, {"namespace": "default",
                                                                          "name": "2024-exp"}).reason or ""))
    assert status
    status = backend.status(spec, {"namespace": "default", "name": "2024-exp"})
    assert status.state == JobState.PENDING
    assert "the MPI Operator refused the MPIJob" in status.reason and "2024-exp-worker-1" in status.reason
    assert thread.call(thread.emulator.list, PODS, "default") == []


def test_refused_pod_creation_is_the_pending_reason(cluster, backend, pvc):
    _, fake = cluster
    quota = ('pods "lane-quota-launcher-x" is forbidden: exceeded quota: team-quota, requested: cpu=250m, '
             "used: cpu=8, limited: cpu=8")
    fake.refuse_pods = lambda pod: quota if pod["metadata"].get("generateName") else None
    spec = make_spec(name="lane-quota")
    handle = backend.submit(spec)
    status = wait_for(lambda: "FailedCreate" in (backend.status(spec, handle).reason or "") and
                      backend.status(spec, handle))
    assert status.state == JobState.PENDING
    assert "the cluster refused to create a pod (FailedCreate on Job lane-quota-launcher)" in status.reason
    assert "exceeded quota: team-quota" in status.reason


def test_resume_continues_from_the_checkpoint(cluster, kubeconfig, tmp_path, monkeypatch, pvc):
    _thread, fake = cluster
    monkeypatch.setenv("LANENB_HOME", str(tmp_path / "home"))
    fake.rewrite_argv = program("import sys, time\nprint('[1,0]<stdout>:args ' + ' '.join(sys.argv[1:]), flush=True)\n"
                                "time.sleep(0 if '--resume' in sys.argv else 30)")
    registry = JobRegistry(tmp_path / "jobs.sqlite3")
    job = submit(make_spec(name="lane-resume"), registry=registry, kubeconfig=kubeconfig,
                 retry=RetryPolicy(attempts=3, base_delay=0.02))
    assert wait_for(lambda: job.status().state == JobState.RUNNING)
    job.suspend()
    status = job.wait(timeout=20, poll=0.05)  # returns: a suspended job would never finish by itself
    assert status.state == JobState.SUSPENDED
    job.resume()
    status = job.wait(timeout=30, poll=0.1)
    assert status.state == JobState.SUCCEEDED, status
    assert fake.launched[-1][-1] == "--resume" and "--resume" not in fake.launched[0]
    assert any(line.text.endswith("--resume") for line in job.logs())


def test_a_deleted_mpijob_is_lost_and_waiters_and_watchers_stop(cluster, kubeconfig, tmp_path, monkeypatch, pvc):
    thread, fake = cluster
    monkeypatch.setenv("LANENB_HOME", str(tmp_path / "home"))
    fake.rewrite_argv = program("import time; time.sleep(30)")
    registry = JobRegistry(tmp_path / "jobs.sqlite3")
    job = submit(make_spec(name="lane-gone"), registry=registry, kubeconfig=kubeconfig)
    assert wait_for(lambda: job.status().state == JobState.RUNNING)
    watcher = job.backend.watch(job.spec, job.handle, timeout=30)
    assert next(watcher).state == JobState.RUNNING
    thread.call(thread.emulator.delete, MPIJOBS, "default", "lane-gone", "Background")  # kubectl delete
    assert [s.state for s in watcher][-1] == JobState.LOST
    status = get_job("lane-gone", registry=registry).wait(timeout=10, poll=0.05)
    assert status.state == JobState.LOST and "no longer exists" in status.reason


def test_foreground_deletion_keeps_the_mpijob_until_its_pods_are_gone(cluster, backend, pvc):
    thread, fake = cluster
    fake.rewrite_argv = program("import time; time.sleep(30)")
    spec = make_spec(name="lane-fg")
    handle = backend.submit(spec)
    assert wait_for(lambda: backend.status(spec, handle).state == JobState.RUNNING)
    fake.stop_delay = 1.0  # the kubelet takes a while to stop the pods
    backend.cancel(spec, handle)
    during = thread.call(thread.emulator.get, MPIJOBS, "default", "lane-fg")
    assert during is not None and during["metadata"]["deletionTimestamp"]
    assert backend.status(spec, handle).state == JobState.CANCELLED
    assert wait_for(lambda: thread.call(thread.emulator.get, MPIJOBS, "default", "lane-fg") is None)
    assert thread.call(thread.emulator.list, PODS, "default") == [] and \
        thread.call(thread.emulator.get, JOBS, "default", "lane-fg-launcher") is None


def test_namespace_comes_from_the_kubeconfig_context_and_the_handle_keeps_the_cluster(
        cluster, tmp_path, monkeypatch):
    thread, fake = cluster
    fake.rewrite_argv = program("print('[1,0]<stdout>:hi', flush=True)")
    add_pvc(thread, namespace="team-a")
    first = thread.write_kubeconfig(tmp_path / "other", context="other", namespace="default")
    team = thread.write_kubeconfig(tmp_path / "team", context="team", namespace="team-a")
    monkeypatch.setenv("KUBECONFIG", f"{tmp_path / 'missing'}:{first}:{team}")  # every entry is read
    monkeypatch.setenv("LANENB_HOME", str(tmp_path / "home"))
    registry = JobRegistry(tmp_path / "jobs.sqlite3")
    job = submit(make_spec(name="lane-ns", k8s={"context": "team"}), registry=registry)
    assert job.handle["namespace"] == "team-a" and job.handle["context"] == "team"
    assert thread.call(thread.emulator.get, MPIJOBS, "team-a", "lane-ns") is not None
    monkeypatch.setenv("KUBECONFIG", str(tmp_path / "missing"))  # a new kernel with another environment

    again = get_job("lane-ns", registry=registry)
    again._backend = KubernetesBackend()
    assert again.wait(timeout=30, poll=0.1).state == JobState.SUCCEEDED


def test_every_call_has_a_request_timeout(cluster, kubeconfig):
    thread, _ = cluster
    backend = KubernetesBackend(kubeconfig=kubeconfig, timeout=(1.0, 0.5),
                                retry=RetryPolicy(attempts=2, base_delay=0.01, max_delay=0.02))
    thread.emulator.add_fault(Fault(lambda r: r.method.value == "GET", status=0, delay=5.0, times=10))
    with pytest.raises(KubernetesUnreachableError, match="cannot reach the Kubernetes API server"):
        backend.status(make_spec(), {"namespace": "default", "name": "lane-slow"})


def test_long_event_lines_are_reassembled_from_mpiruns_chunks(cluster, backend, pvc):
    _, fake = cluster
    payload = "x" * 6000
    chunked = f"[1,0]<stdout>:{payload[:4096]}[1,0]<stdout>:{payload[4096:]}"
    fake.rewrite_argv = program(f"print({chunked!r}, flush=True)")
    spec = make_spec(name="lane-long")
    handle = backend.submit(spec)
    wait_for(lambda: backend.status(spec, handle).state.finished)
    lines = list(backend.logs(spec, handle))
    assert [(line.rank, line.text) for line in lines] == [(0, payload)]
    chunk = backend.read_log(spec, handle, None)
    assert [line.text for line, _ in chunk.lines] == [payload]


def test_a_secret_echoed_by_a_rank_is_redacted_in_logs(cluster, backend, kubeconfig, pvc, tmp_path, monkeypatch):
    from homes import isolated_home

    isolated_home(tmp_path, monkeypatch)  # the job is recorded: in this test's own registry
    _, fake = cluster
    fake.rewrite_argv = program("import os; print('[1,0]<stdout>:token=' + os.environ['HF_TOKEN'], flush=True)")
    spec = make_spec(name="lane-secret", env=["HF_TOKEN=hf_supersecret"])
    from lanenb.jobs import get_job, submit

    job = submit(spec, kubeconfig=kubeconfig)  # the job layer redacts whatever the backend returns
    wait_for(lambda: get_job("lane-secret").status().state.finished)
    again = get_job("lane-secret")  # another kernel: only the registry's redacted spec and the fingerprints
    assert [line.text for line in again.logs()] == ["token=<redacted>"]
    assert [line.text for line, _ in again.read_log().lines] == ["token=<redacted>"]
    assert "hf_supersecret" not in str(again.describe())
    assert job.name == "lane-secret"
