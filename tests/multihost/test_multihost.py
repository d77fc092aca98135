"""Multi-host runs as the MPI Operator runs them: one network namespace per pod, sshd on the
workers, the launcher running exactly the MPIJob's command (see cluster_support)."""

from __future__ import annotations

import time

import pytest
from cluster_support import SimCluster
from multihost_support import cluster_for, end_checksums, make_spec, single_host_run

from lanenb_trainer.engines import horovod_available

pytestmark = [pytest.mark.multihost, pytest.mark.slow, pytest.mark.usefixtures("machine")]
RUN_TIMEOUT = 180  # seconds any one launcher may run; nothing waits longer

ENGINES = [pytest.param("ddp", id="ddp"),
           pytest.param("horovod", id="horovod", marks=pytest.mark.skipif(
               not horovod_available(), reason="horovod.torch not importable (scripts/install_horovod.sh)"))]


def wait_for_event(cluster: SimCluster, kind: str, timeout: float = 90) -> None:
    deadline = time.monotonic() + timeout
    while not cluster.events(kind):
        if cluster.launcher.proc.poll() is not None or time.monotonic() > deadline:
            raise AssertionError(f"no {kind} event:\n{cluster.output()}")
        time.sleep(0.2)


def run_cluster(spec, workdir, **kw) -> tuple[SimCluster, int]:
    """Bring the job's pods up, run its launcher to the end, tear down: the closed cluster
    and the launcher's exit code (``kw`` as :func:`cluster_for` takes them)."""
    cluster = cluster_for(spec, workdir, **kw)
    try:
        cluster.start()
        code = cluster.run_launcher(RUN_TIMEOUT)
    finally:
        cluster.close()
    return cluster, code


def fail_worker_1(spec, workdir, fault: str, settle: float = 0.0) -> tuple[SimCluster, int, float]:
    """Train until the first checkpoint, then apply ``fault`` ("kill_host" or "partition") to
    worker 1; returns the closed cluster, the launcher's exit code and the seconds it took to end."""
    cluster = cluster_for(spec, workdir)
    try:
        cluster.start()
        cluster.start_launcher()
        wait_for_event(cluster, "checkpoint")
        time.sleep(settle)
        faulted = time.monotonic()
        getattr(cluster, fault)(1)
        code = cluster.wait_launcher(RUN_TIMEOUT)
        took = time.monotonic() - faulted
    finally:
        cluster.close()
    return cluster, code, took


def host_lost(cluster: SimCluster) -> list:
    return [e for e in cluster.events("error") if e.get("type") == "HostLost"]


@pytest.mark.parametrize("engine", ENGINES)
@pytest.mark.parametrize("processes,slots", [(2, 1), (4, 2)], ids=["2hostsx1", "2hostsx2"])
def test_training_across_hosts_ends_with_the_single_host_parameters(engine, processes, slots, synth_volume, tmp_path):
    spec = make_spec(synth_volume, engine, processes, slots, run=tmp_path.name)
    cluster, code = run_cluster(spec, tmp_path / "cluster")
    assert code == 0, cluster.output()
    starts = cluster.events("start")
    assert {e["host"] for e in starts} == {f"mh-worker-{i}" for i in range(2)}  # ranks really on two hosts
    assert len(starts) == processes
    ends = end_checksums(cluster.events("end"))
    assert len(ends) == 1 and len(cluster.events("end")) == processes
    ref_code, ref = single_host_run(spec, tmp_path / "single")
    assert ref_code == 0 and ref == ends


@pytest.mark.parametrize("engine", ENGINES)
def test_killed_worker_host_fails_the_job_naming_it_and_resume_continues(engine, synth_volume, tmp_path):
    spec = make_spec(synth_volume, engine, 2, 1, run=tmp_path.name, epochs=40)
    cluster, code, took = fail_worker_1(spec, tmp_path / "a", "kill_host", settle=1.0)  # mid-epoch
    assert code != 0
    lost = host_lost(cluster)
    assert lost and lost[0]["hosts"] == ["mh-worker-1.mh-worker.default.svc"] and lost[0]["ranks"] == [1], \
        cluster.output()
    assert took < 10 + 30 + 15  # collective timeout + the launcher's failure grace + probing
    checkpoint = max(e["step"] for e in cluster.events("checkpoint"))

    # job.resume(): the same MPIJob with --resume, on fresh pods
    short = make_spec(synth_volume, engine, 2, 1, run=tmp_path.name, epochs=40, max_steps=checkpoint + 3)
    again, code = run_cluster(short, tmp_path / "b", resume=True)
    assert code == 0, again.output()
    start = again.events("start", rank=0)[0]
    assert start["resumed_from"] is not None
    assert min(e["step"] for e in again.events("step", rank=0)) == checkpoint + 1


@pytest.mark.parametrize("engine", ENGINES)
def test_partitioned_worker_fails_like_a_lost_one(engine, synth_volume, tmp_path):
    spec = make_spec(synth_volume, engine, 2, 1, run=tmp_path.name, epochs=40)
    cluster, code, _ = fail_worker_1(spec, tmp_path / "c", "partition")
    assert code != 0
    lost = host_lost(cluster)
    assert lost and lost[0]["hosts"] == ["mh-worker-1.mh-worker.default.svc"], cluster.output()


def test_slow_link_only_slows_the_run(synth_volume, tmp_path):
    spec = make_spec(synth_volume, "ddp", 2, 1, run=tmp_path.name)
    cluster = cluster_for(spec, tmp_path / "d")
    try:
        cluster.start()
        applied = cluster.shape("20mbit", delay_ms=20)
        code = cluster.run_launcher(RUN_TIMEOUT)
    finally:
        cluster.close()
    assert code == 0, f"{applied}\n{cluster.output()}"
    ref_code, ref = single_host_run(spec, tmp_path / "single")
    assert ref_code == 0 and end_checksums(cluster.events("end")) == ref


def test_launcher_waits_for_a_worker_whose_sshd_is_not_ready(synth_volume, tmp_path):
    # ssh's ConnectionAttempts=10 (the operator's OMPI_MCA_plm_rsh_args) gives up after ~10 s
    spec = make_spec(synth_volume, "ddp", 2, 1, run=tmp_path.name, max_steps=2)
    cluster, code = run_cluster(spec, tmp_path / "e", sshd_delay={1: 15.0})
    assert code == 0, cluster.output()
    waited = [line for line in cluster.output(100_000).splitlines() if "waiting for sshd on" in line]
    assert waited and "mh-worker-1.mh-worker.default.svc" in waited[0]
