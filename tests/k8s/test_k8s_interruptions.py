"""A real 2-rank trainer in the fake operator's pods, interrupted the ways a cluster does it, each
through the API server as the scheduler, a node's loss or a person would: a pod deleted with grace
(preemption), a worker pod force-deleted (its node gone), and ``runPolicy.suspend`` then resume.
Each ends SUCCEEDED from the run's checkpoint, and says what it cost. A worker pod deleted with grace
(a suspend deletes them all) loses no step: its command is the worker init, which has its ranks
checkpoint before sshd stops (the init itself: ``test_k8s_worker_init``)."""

from __future__ import annotations

import json
import socket
from pathlib import Path

import pytest
from polling import wait_for

from lanenb.contract.spec import TrainSpec
from lanenb.contract.status import JobState
from lanenb_trainer import exitcodes

IMAGE = "registry.example.com/lanenb-trainer:0.1"
STEPS_PER_EPOCH = 5  # 10 training frames of 12, batch 1, 2 ranks: the checkpoint interval (one per epoch)

pytestmark = pytest.mark.slow


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _events(run_dir: Path) -> list[dict]:
    path = run_dir / "events.jsonl"
    return [json.loads(x) for x in path.read_text().splitlines()] if path.is_file() else []


def _steps(run_dir: Path) -> list[int]:
    return [e["step"] for e in _events(run_dir) if e["kind"] == "step"]


def _start(cluster, backend, tmp_path, name: str, epochs: int):
    """Submit a tiny real run (``epochs`` x 5 steps); returns (spec, handle, run dir)."""
    spec, run_dir = _spec(cluster, backend, tmp_path, name, epochs)
    handle = backend.submit(spec)  # k8s.backoff_limit and terminationGracePeriodSeconds: the defaults
    return spec, handle, run_dir


def _spec(cluster, backend, tmp_path, name: str, epochs: int):
    """The data, its PVC and the spec of a tiny real run (``epochs`` x 5 steps); returns (spec, run dir)."""
    from kubernetes import client

    from lanenb_trainer.data.synth import synthesize

    _thread, fake = cluster
    volume = tmp_path / "pvc"
    synthesize(volume / "tusimple", frames=12, width=320, height=180, progress=False)
    client.CoreV1Api(backend.clients().api).create_namespaced_persistent_volume_claim("default", {
        "metadata": {"name": "tusimple-data"},
        "spec": {"accessModes": ["ReadWriteMany"], "resources": {"requests": {"storage": "1Gi"}}}})
    fake.extra_env = {"MASTER_ADDR": "127.0.0.1", "MASTER_PORT": str(_free_port()), "OMP_NUM_THREADS": "1"}
    spec = TrainSpec(
        dataset=str(volume / "tusimple"), backend="kubernetes", image=IMAGE, name=name, processes=2,
        batch_size=1, epochs=epochs, use_val=False, volumes=[f"tusimple-data:{volume}"],
        extra_args=["--img-height", "64", "--img-width", "128", "--log-every", "1", "--no-tensorboard"],
    )
    return spec, volume / "lanenb-runs" / name


def _pods(backend, role: str) -> list:
    from kubernetes import client

    pods = client.CoreV1Api(backend.clients().api).list_namespaced_pod(
        "default", label_selector=f"training.kubeflow.org/job-role={role}").items
    return sorted(pods, key=lambda p: p.metadata.creation_timestamp)


def _finish(backend, spec, handle, timeout: float = 240):
    status = wait_for(lambda: (s := backend.status(spec, handle)).state.finished and s, timeout=timeout)
    log = "\n".join(line.text for line in backend.logs(spec, handle))  # the newest launcher pod's
    assert status.state == JobState.SUCCEEDED, f"{status}\n{log[-3000:]}"
    return status, log


def _one(events: list[dict], kind: str) -> dict:
    found = [e for e in events if e["kind"] == kind]
    assert len(found) == 1, (kind, found)
    return found[0]


def test_a_launcher_pod_deleted_with_grace_checkpoints_and_the_jobs_retry_loses_no_step(cluster, backend, tmp_path):
    from kubernetes import client

    _thread, fake = cluster
    spec, handle, run_dir = _start(cluster, backend, tmp_path, "lane-evict", epochs=1)
    wait_for(lambda: len(_steps(run_dir)) >= 2, timeout=120)
    (launcher,) = _pods(backend, "launcher")
    # the scheduler preempts: a plain delete, so the kubelet SIGTERMs and waits the pod's grace period
    client.CoreV1Api(backend.clients().api).delete_namespaced_pod(launcher.metadata.name, "default")
    _status, log = _finish(backend, spec, handle)
    assert len(fake.launched) == 2  # the launcher Job counted the deleted pod failed and made another
    events = _events(run_dir)
    preempted, resumed = _one(events, "preempted"), _one(events, "resumed")
    assert preempted["checkpoint_s"] is not None and sorted(preempted["ranks"]) == [0, 1]  # both via mpirun
    assert (resumed["count"], resumed["step"], resumed["steps_lost"]) == (1, preempted["step"], 0)
    assert _steps(run_dir) == list(range(1, STEPS_PER_EPOCH + 1))  # no step taken twice
    assert '"kind":"resumed"' in log and '"steps_lost_total":0' in log  # the newest pod's log says so too


def test_a_lost_worker_node_costs_at_most_one_checkpoint_interval_and_the_run_goes_on(cluster, backend, tmp_path):
    from kubernetes import client

    _thread, _fake = cluster
    spec, handle, run_dir = _start(cluster, backend, tmp_path, "lane-node", epochs=2)
    wait_for(lambda: len(_steps(run_dir)) >= STEPS_PER_EPOCH + 2, timeout=120)  # one checkpoint written
    old = {p.metadata.name: p.metadata.uid for p in _pods(backend, "worker")}
    # the node is gone: its pod is force-deleted, its processes (rank 1) die with no signal to catch
    client.CoreV1Api(backend.clients().api).delete_namespaced_pod("lane-node-worker-1", "default",
                                                                  grace_period_seconds=0)
    # getOrCreateWorker: the operator makes the missing worker again (cleanPodPolicy removes both at the end)
    wait_for(lambda: {p.metadata.name: p.metadata.uid for p in _pods(backend, "worker")}.get("lane-node-worker-1")
             not in (None, old["lane-node-worker-1"]), timeout=30)
    status, log = _finish(backend, spec, handle)
    first, _last = _pods(backend, "launcher")  # the Job's retry: the failed pod stays, with its exit code
    code = first.status.container_statuses[0].state.terminated.exit_code
    assert code not in (0, exitcodes.PREEMPTED) and first.status.container_statuses[0].state.terminated.reason \
        == "Error"
    events = _events(run_dir)
    assert not [e for e in events if e["kind"] == "preempted"]  # a kill is no preemption
    resumed = _one(events, "resumed")
    assert resumed["step"] % STEPS_PER_EPOCH == 0 and 0 < resumed["steps_lost"] <= STEPS_PER_EPOCH
    assert resumed["steps_lost"] == max(s for s in _steps(run_dir)[:resumed["step"] + resumed["steps_lost"]]) \
        - resumed["step"]
    assert _steps(run_dir)[-1] == 2 * STEPS_PER_EPOCH and events[-1]["kind"] == "end"
    assert status.reason is not None and "retried 1x" in status.reason and f"exit code {code}" in status.reason
    assert f'"steps_lost_total":{resumed["steps_lost"]}' in log



def test_a_worker_pod_deleted_with_grace_checkpoints_its_ranks_and_the_retry_loses_no_step(cluster, backend,
                                                                                           tmp_path):
    # the worker init (its command) turns the pod's SIGTERM into SIGUSR1 to rank 1 and waits for its
    # checkpoint; sshd as PID 1 would have exited at once, taking rank 1 with it
    from kubernetes import client

    _thread, fake = cluster
    spec, handle, run_dir = _start(cluster, backend, tmp_path, "lane-drain", epochs=1)
    wait_for(lambda: len(_steps(run_dir)) >= 2, timeout=120)
    client.CoreV1Api(backend.clients().api).delete_namespaced_pod("lane-drain-worker-1", "default")
    _status, log = _finish(backend, spec, handle)
    assert len(fake.launched) == 2  # the launcher exited 75; the launcher Job's retry continued
    events = _events(run_dir)
    preempted, resumed = _one(events, "preempted"), _one(events, "resumed")
    assert preempted["checkpoint_s"] is not None and preempted["ranks"] == [1]  # only the drained pod's rank
    assert (resumed["count"], resumed["step"], resumed["steps_lost"]) == (1, preempted["step"], 0)
    assert _steps(run_dir) == list(range(1, STEPS_PER_EPOCH + 1))  # no step taken twice
    assert '"steps_lost_total":0' in log


def test_a_suspend_checkpoints_every_rank_and_the_resume_loses_no_step(cluster, backend, kubeconfig, tmp_path,
                                                                       monkeypatch):
    from lanenb.jobs import submit
    from lanenb.registry.jobs import JobRegistry

    monkeypatch.setenv("KUBECONFIG", str(kubeconfig))
    monkeypatch.setenv("LANENB_HOME", str(tmp_path / "home"))
    spec, run_dir = _spec(cluster, backend, tmp_path, "lane-pause", epochs=1)
    job = submit(spec, registry=JobRegistry(tmp_path / "jobs.sqlite3"))
    wait_for(lambda: len(_steps(run_dir)) >= 2, timeout=120)
    job.suspend()  # the operator deletes the launcher and both worker pods, with grace
    assert wait_for(lambda: (s := job.status()).state == JobState.SUSPENDED and s, timeout=30)
    # every pod's ranks checkpointed before their pods went (workers too: their init waited for them)
    wait_for(lambda: not _pods(backend, "launcher") and not _pods(backend, "worker"), timeout=60)
    preempted = _one(_events(run_dir), "preempted")
    assert preempted["checkpoint_s"] is not None and sorted(preempted["ranks"]) == [0, 1]
    assert _events(run_dir)[-1]["kind"] == "end" and _events(run_dir)[-1]["status"] == "preempted"
    job.resume()
    status = job.wait(timeout=240, poll=0.2)
    assert status.state == JobState.SUCCEEDED, status
    resumed = _one(_events(run_dir), "resumed")
    assert (resumed["count"], resumed["step"], resumed["steps_lost"]) == (1, preempted["step"], 0)
    assert _steps(run_dir) == list(range(1, STEPS_PER_EPOCH + 1))  # no step taken twice
