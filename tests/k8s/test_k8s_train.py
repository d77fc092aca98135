"""One real training run through the Kubernetes code path: MPIJob over HTTP -> fake operator ->
the launcher's mpirun argv run locally -> the real trainer on 2 ranks, synthetic TuSimple data
-> events read back from the launcher pod's log by ``KubernetesBackend.logs(follow=True)``."""

from __future__ import annotations

import importlib.util
import socket

import pytest

from lanenb.analysis.doctor import diagnose
from lanenb.analysis.runstate import RunState
from lanenb.contract.spec import TrainSpec
from lanenb.contract.status import JobState
from lanenb_trainer.events import parse_line

pytestmark = pytest.mark.slow

def _trainer_ready() -> bool:
    if any(importlib.util.find_spec(m) is None for m in ("lanenb_trainer.data.synth", "lanenb_trainer.train")):
        return False
    import lanenb_trainer.models as models

    return hasattr(models, "build_model")


if not _trainer_ready():
    pytest.skip("the trainer, its models or its synthetic data generator are not in this build",
                allow_module_level=True)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_real_training_through_the_mpijob(cluster, backend, tmp_path):
    from kubernetes import client

    from lanenb_trainer.data.synth import synthesize

    _thread, fake = cluster
    volume = tmp_path / "pvc"
    synthesize(volume / "tusimple", frames=6, width=320, height=180, progress=False)
    # The PVC the job mounts must exist (the fake scheduler checks, like the real one).
    api = backend.clients().api
    client.CoreV1Api(api).create_namespaced_persistent_volume_claim("default", {
        "metadata": {"name": "tusimple-data"},
        "spec": {"accessModes": ["ReadWriteMany"], "resources": {"requests": {"storage": "1Gi"}}}})
    # In the fake cluster the PVC "mounts" at the same path on this machine; the worker-0
    # rendezvous address of the manifest resolves to this host.
    fake.extra_env = {"MASTER_ADDR": "127.0.0.1", "MASTER_PORT": str(free_port()), "OMP_NUM_THREADS": "1"}
    spec = TrainSpec(
        dataset=str(volume / "tusimple"), backend="kubernetes", image="registry.example.com/lanenb-trainer:0.1",
        name="lane-real", processes=2, batch_size=1, epochs=1, max_steps=2, use_val=False,
        volumes=[f"tusimple-data:{volume}"],
        extra_args=["--img-height", "64", "--img-width", "128", "--log-every", "1", "--timing-every", "1"],
    )
    handle = backend.submit(spec)
    assert handle["run_dir"] == f"{volume}/lanenb-runs/lane-real"
    lines = list(backend.logs(spec, handle, follow=True))
    status = backend.status(spec, handle)
    text = "\n".join(f"[{l.rank}] {l.text}" for l in lines)
    assert status.state == JobState.SUCCEEDED, f"{status}\n{text[-3000:]}"
    events = [e for e in (parse_line(l.text) for l in lines) if e is not None]
    kinds = {e.kind for e in events}
    assert {"start", "step", "end"} <= kinds, text[-3000:]
    assert {l.rank for l in lines if parse_line(l.text)} == {0, 1}  # both ranks reported through mpirun tags
    steps = [e for e in events if e.kind == "step" and e.rank == 0]
    assert steps and all(isinstance(e.get("loss"), (int, float)) for e in steps)
    # the launcher really ran the manifest's mpirun argv (made local: oversubscribe + this python)
    assert fake.launched and "mpirun" in fake.launched[0] and "lanenb_trainer" in fake.launched[0]
    assert (volume / "lanenb-runs" / "lane-real" / "events.jsonl").exists()
    # the doctor reads a cluster run as a local one: every rank's timing windows come through the
    # launcher pod's log, fold into the reducer and give a verdict with a per-rank breakdown
    timing = [e for e in events if e.kind == "timing"]
    assert {e.rank for e in timing} == {0, 1} and all(e.get("step_s", 0) > 0 for e in timing)
    state = RunState()
    for line in lines:
        state.fold_line(line)
    assert set(state.breakdown()) == {0, 1}
    assert diagnose(state).kind in {"healthy", "input-bound", "straggler", "exchange-bound"}
