"""A sweep whose trials run on the kubernetes backend, end to end: the detached driver submits
each trial as an MPIJob over HTTP (the real ``kubernetes`` client against the API-server emulator
of ``tests/k8s``), labelled with its sweep and trial; the fake MPI Operator plays the launcher pod
(a process that prints the trainer's ``eval`` events, better for a larger ``--lr``), the driver
reads them from the launcher's log and reports them to Optuna, and the trial Optuna prunes is
cancelled through the Job API: its MPIJob deleted, its pod killed, the why on the job's record."""

from __future__ import annotations

import os
import subprocess
import sys
import time

import pytest
from k8s_harness import add_pvc  # tests/k8s, on the path by this folder's conftest
from kube_emulator import MPIJOBS, PODS

from lanenb.jobs import JobState, TrainSpec, get_job
from lanenb.sweeps import sweep

IMAGE = "registry.example.com/lanenb-trainer:0.1"
K8S_FLAGS = ["--backend", "kubernetes", "--namespace", "default", "--image", IMAGE, "--pvc", "data:/mnt",
             "--data", "/mnt/tusimple"]


def _flag(argv: list[str], flag: str, default: str) -> str:
    """The last value of ``flag`` in the launcher's argv (the trainer's flags: the last one wins)."""
    found = [argv[i + 1] for i, a in enumerate(argv[:-1]) if a == flag]
    return found[-1] if found else default


def played_launcher(argv: list[str]) -> list[str]:
    """What the fake kubelet runs for the launcher: one ``eval`` event per epoch, tagged as mpirun
    tags rank 0; accuracy 0.9 (+0.01 an epoch) for ``--lr`` >= 1e-3, 0.1 below, where the run
    then hangs (a loser the pruner must stop)."""
    lr, epochs = float(_flag(argv, "--lr", "0.01")), int(_flag(argv, "--epochs", "1"))
    good = lr >= 1e-3
    code = ("import time\nfrom lanenb_trainer.events import emit\n"
            f"for e in range({epochs}):\n"
            "    time.sleep(0.3)\n"
            "    print('[1,0]<stdout>:', end='', flush=True)\n"
            f"    emit('eval', 0, split='val', epoch=e, step=e, accuracy={0.9 if good else 0.1} + 0.01 * e, "
            "fp=0.1, fn=0.1, frames=4)\n"
            f"    {'pass' if good else 'time.sleep(120)'}\n")
    return [sys.executable, "-c", code]


@pytest.fixture
def kube(cluster, kubeconfig, monkeypatch):
    """The emulated cluster with the ``data`` PVC, reached by the driver through ``KUBECONFIG``."""
    thread, fake = cluster
    monkeypatch.setenv("KUBECONFIG", str(kubeconfig))
    add_pvc(thread)
    fake.rewrite_argv = played_launcher
    return thread, fake


def _mpijobs(thread, selector: str) -> dict[str, dict[str, str]]:
    return {j["metadata"]["name"]: j["metadata"]["labels"]
            for j in thread.call(thread.emulator.list, MPIJOBS, "default", selector)}


def _until(check, timeout: float = 20.0):
    deadline = time.monotonic() + timeout
    while not (found := check()):
        if time.monotonic() > deadline:
            raise AssertionError(f"not within {timeout} s")
        time.sleep(0.1)
    return found


def test_a_sweep_runs_its_trials_as_labelled_mpijobs_and_deletes_the_pruned_one(kube):
    thread, fake = kube
    spec = TrainSpec(dataset="/mnt/tusimple", backend="kubernetes", image=IMAGE, namespace="default",
                     volumes=["data:/mnt"], processes=1, epochs=3)
    s = sweep(spec, {"lr": "1e-6..1e-1:log"}, name="kube", trials=3, pruner="median",
              first=[{"lr": 0.01}, {"lr": 0.02}, {"lr": 1e-6}])
    assert s.wait(timeout=90) == "finished", s.log()
    rows = s.trials()
    assert [(r.number, r.state, r.job) for r in rows] == [
        (0, "complete", "kube-0"), (1, "complete", "kube-1"), (2, "pruned", "kube-2")], s.log()
    # every validation result reached the study as it arrived, from the launcher pod's log
    assert s.curves() == {0: {1: 0.9, 2: 0.91, 3: 0.92}, 1: {1: 0.9, 2: 0.91, 3: 0.92}, 2: {1: 0.1}}
    assert s.best["number"] == 0 and s.best["value"] == pytest.approx(0.92)
    why = rows[2].why
    assert why.startswith("pruned at epoch 1: val.accuracy 0.100, the other trials' median there 0.900"), s.log()
    # the MPIJobs carry the sweep and the trial; the pruned one was deleted (pods and all)
    assert _mpijobs(thread, "lanenb.io/sweep=kube").keys() == {"kube-0", "kube-1"}
    assert _mpijobs(thread, "lanenb.io/sweep=kube,lanenb.io/trial=1").keys() == {"kube-1"}
    pods = thread.call(thread.emulator.list, PODS, "default", "lanenb.io/trial=0")  # workers: cleaned up at the end
    assert [p["metadata"]["labels"]["training.kubeflow.org/job-name"] for p in pods] == ["kube-0"]
    _until(lambda: not thread.call(thread.emulator.list, PODS, "default",
                                   "training.kubeflow.org/job-name=kube-2"))
    assert not fake.processes  # the hanging loser's process was killed with its pod
    pruned = get_job("kube-2").status()
    assert pruned.state is JobState.CANCELLED and pruned.reason == why  # said on the job's record too
    assert get_job("kube-0").status().state is JobState.SUCCEEDED
    # the winner on two ranks: same per-rank rate by the linear rule (the trainer multiplies it by
    # the ranks), labelled as the sweep's retrain of trial 0, and said so under the table
    again = s.retrain(processes=2, epochs=1)
    assert again.wait(timeout=30).state is JobState.SUCCEEDED
    assert again.spec.processes == 2 and again.spec.extra_args[-2:] == ["--lr", "0.01"]
    retrained = _mpijobs(thread, "lanenb.io/retrain-of=0")
    assert list(retrained) == ["kube-best"] and retrained["kube-best"]["lanenb.io/sweep"] == "kube"
    assert "trial 0 (the best) at 2 rank(s) x batch 8 = 16 images per step" in s.size_note(processes=2)


def test_lanenb_sweep_start_with_the_kubernetes_flags(kube):
    thread, _fake = kube
    done = subprocess.run([sys.executable, "-m", "lanenb", "sweep", "start", *K8S_FLAGS, "-np", "1", "--epochs", "2",
                           "--lr", "0.01,0.03", "--sampler", "grid", "--trials", "2", "--name", "kcli", "--wait"],
                          capture_output=True, text=True, env=dict(os.environ), timeout=120)
    assert done.returncode == 0, done.stderr
    assert "sweep kcli: finished, 2/2 trial(s), grid + asha" in done.stdout, done.stdout
    jobs = _mpijobs(thread, "lanenb.io/sweep=kcli")
    assert {name: labels["lanenb.io/trial"] for name, labels in jobs.items()} == {"kcli-0": "0", "kcli-1": "1"}
    assert all(get_job(name).status().state is JobState.SUCCEEDED for name in jobs)
