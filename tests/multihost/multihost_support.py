"""Session fixtures and helpers for tests/multihost: the machine prepared once, leftovers removed
before and after the session, a tiny synthetic dataset on a shared "PVC" directory, MPIJobs built
by lanenb's own manifest builder, and single-host reference runs."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from cluster_support import SimCluster, cleanup_leftovers, prepare_machine, unavailable

from lanenb.backends.kubernetes.manifests import build_mpijob
from lanenb.contract.spec import TrainSpec
from lanenb.launch.lines import LogLine
from lanenb.launch.mpirun import launch_env, run_local

JOB = "mh"
NAMESPACE = "default"
TINY_ARGS = ["--img-height", "64", "--img-width", "160", "--log-every", "1", "--warmup-steps", "2", "--seed", "7"]


@pytest.fixture(scope="session")
def machine():
    """Skip when this machine cannot host network namespaces; clean up leftovers before and after."""
    why = unavailable()
    if why:
        pytest.skip(why)
    cleanup_leftovers()  # namespaces an earlier, crashed session left behind
    prepare_machine()
    yield
    left = cleanup_leftovers()
    assert not left, f"namespaces left behind by a test: {left}"


@pytest.fixture(scope="session")
def synth_volume(tmp_path_factory) -> Path:
    """The "PVC" every simulated host mounts at the same path (a shared directory)."""
    from lanenb_trainer.data.synth import synthesize

    volume = tmp_path_factory.mktemp("pvc")
    synthesize(volume / "tusimple", 40, seed=3, width=320, height=180, test_fraction=0.2, progress=False)
    return volume


def make_spec(volume: Path, engine: str, processes: int, slots: int, *, run: str, openshift: bool = False,
              **kw: Any) -> TrainSpec:
    extra = [*TINY_ARGS, "--collective-timeout", str(kw.pop("collective_timeout", 10))]
    return TrainSpec(dataset=str(volume / "tusimple"), backend="kubernetes", image="lanenb-trainer:test", name=JOB,
                     volumes=[f"pvc:{volume}"], processes=processes, engine=engine, batch_size=2,
                     use_val=False, env={"LANENB_THREADS": "1"}, run_dir=str(volume / "runs" / run),
                     extra_args=extra, k8s={"slots_per_worker": slots, "openshift": openshift}, **kw)


def cluster_for(spec: TrainSpec, workdir: Path, *, resume: bool = False, **kw: Any) -> SimCluster:
    workdir.mkdir(parents=True, exist_ok=True)
    return SimCluster(build_mpijob(spec, namespace=NAMESPACE, resume=resume), workdir, **kw)


def single_host_run(spec: TrainSpec, run_dir: Path) -> tuple[int, set[str]]:
    """The same trainer flags on one host (local mpirun), as the reference: its exit code and
    the parameter checksums of its ``end`` events."""
    lines: list[LogLine] = []
    env = launch_env(extra={"LANENB_THREADS": "1"})
    code = run_local(spec.processes, spec.trainer_args(str(run_dir)), env=env, on_line=lines.append, grace=5)
    return code, {ln.event["param_checksum"] for ln in lines if ln.event and ln.event.kind == "end"}


def end_checksums(events: list[dict[str, Any]]) -> set[str]:
    return {e["param_checksum"] for e in events if e.get("status") == "completed"}
