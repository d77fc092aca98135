"""Preemption on Kubernetes: the launcher Job's retries (``k8s.backoff_limit``, now 3 by default)
continue from the run's checkpoint, a preempted launcher is said to be preempted, and the MPIJob
launcher wrapper turns "mpirun was SIGTERMed, the ranks checkpointed" into exit 75."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import textwrap

import pytest
from polling import wait_for

from lanenb.contract.spec import TrainSpec
from lanenb.contract.status import JobState
from lanenb_trainer import exitcodes
from lanenb_trainer.events import format_event

IMAGE = "registry.example.com/lanenb-trainer:0.1"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _add_pvc(backend, name: str) -> None:
    from kubernetes import client

    client.CoreV1Api(backend.clients().api).create_namespaced_persistent_volume_claim("default", {
        "metadata": {"name": name},
        "spec": {"accessModes": ["ReadWriteMany"], "resources": {"requests": {"storage": "1Gi"}}}})


def _launcher(code: str, *args: str) -> subprocess.CompletedProcess:
    """``python -m lanenb_trainer.launcher -- python -c CODE``: the launcher container's wrapper."""
    return subprocess.run([sys.executable, "-m", "lanenb_trainer.launcher", "--", sys.executable, "-c", code, *args],
                          capture_output=True, text=True, timeout=60)


def test_the_launcher_says_preempted_when_mpirun_was_signalled_and_the_ranks_checkpointed():
    # a SIGTERMed mpirun exits 1 even when every rank checkpointed and exited 75 (Open MPI 4.1)
    line = "[1,0]<stdout>:" + format_event("preempted", 0, step=6, ranks=[1], checkpoint_s=0.1)
    said = _launcher(f"import sys; print({line!r}, flush=True); sys.exit(1)")
    assert said.returncode == exitcodes.PREEMPTED and line in said.stdout
    failed = _launcher("import sys; print('[1,0]<stdout>:step 1', flush=True); sys.exit(1)")
    assert failed.returncode == 1  # a failure stays one


def test_the_pods_sigterm_reaches_every_rank_through_mpirun_as_a_preemption(tmp_path):
    """The launcher pod's SIGTERM becomes a SIGUSR1 to mpirun, which passes it on to every rank
    (a SIGTERMed mpirun would SIGKILL them a second later, mid-checkpoint)."""
    import shutil
    import signal
    import time

    if shutil.which("mpirun") is None:
        pytest.skip("mpirun (Open MPI) is not installed")
    rank = tmp_path / "rank.py"
    rank.write_text(textwrap.dedent("""
        import os, signal, sys, time
        r = os.environ["OMPI_COMM_WORLD_RANK"]
        def stop(signum, _frame):
            time.sleep(1.5)  # a checkpoint being written: no SIGKILL comes meanwhile
            print(f"rank {r} checkpointed after {signal.Signals(signum).name}", flush=True)
            # The first rank to exit 75 makes mpirun end the others: exit well after every
            # rank has said it checkpointed, so a loaded machine's skew cannot hide one.
            time.sleep(1.0)
            sys.exit(75)
        signal.signal(signal.SIGUSR1, stop)
        print(f"rank {r} up", flush=True)
        time.sleep(60)
    """))
    root = ["--allow-run-as-root"] if os.geteuid() == 0 else []
    proc = subprocess.Popen([sys.executable, "-m", "lanenb_trainer.launcher", "--", "mpirun", "-np", "2",
                             "--oversubscribe", *root, sys.executable, str(rank)],
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    up = 0
    assert proc.stdout is not None
    for line in proc.stdout:
        up += line.startswith("rank ") and line.rstrip().endswith(" up")
        if up == 2:
            break
    t0 = time.monotonic()
    proc.send_signal(signal.SIGTERM)
    out, _ = proc.communicate(timeout=60)
    assert proc.returncode == exitcodes.PREEMPTED, out
    assert "rank 0 checkpointed after SIGUSR1" in out and "rank 1 checkpointed after SIGUSR1" in out
    assert time.monotonic() - t0 < 20


def test_a_launcher_preempted_with_no_retry_left_is_preempted(cluster, backend):
    _, fake = cluster
    _add_pvc(backend, "data")
    line = "[1,0]<stdout>:" + format_event("preempted", 0, step=6, ranks=[1], checkpoint_s=0.1)
    code = f"import sys; print({line!r}, flush=True); sys.exit(75)"
    fake.rewrite_argv = lambda argv: [sys.executable, "-c", code]
    spec = TrainSpec(dataset="/data/tusimple", backend="kubernetes", image=IMAGE, processes=2, name="lane-cut",
                     volumes=["data:/data"], k8s={"backoff_limit": 0})
    handle = backend.submit(spec)
    status = wait_for(lambda: (s := backend.status(spec, handle)).state.finished and s, timeout=60)
    assert status.state == JobState.PREEMPTED and status.exit_code == exitcodes.PREEMPTED
    assert "SIGTERM stopped every rank" in status.reason and "k8s.backoff_limit" in status.reason


@pytest.mark.slow
def test_the_operators_retry_of_a_preempted_launcher_continues_from_the_checkpoint(cluster, backend, tmp_path):
    from lanenb_trainer.data.synth import synthesize

    _thread, fake = cluster
    volume = tmp_path / "pvc"
    synthesize(volume / "tusimple", frames=12, width=320, height=180, progress=False)
    _add_pvc(backend, "tusimple-data")
    fake.extra_env = {"MASTER_ADDR": "127.0.0.1", "MASTER_PORT": str(_free_port()), "OMP_NUM_THREADS": "1"}
    # rank 1 gets a real SIGTERM once 2 steps are done (the trainer's test hook), in the first launch only
    spec = TrainSpec(
        dataset=str(volume / "tusimple"), backend="kubernetes", image=IMAGE, name="lane-spot", processes=2,
        batch_size=1, epochs=1, max_steps=5, use_val=False, volumes=[f"tusimple-data:{volume}"],
        env={"LANENB_FAULT_RANK": "1", "LANENB_FAULT_STEP": "2", "LANENB_FAULT_SIGNAL": "TERM"},
        extra_args=["--img-height", "64", "--img-width", "128", "--log-every", "1", "--no-tensorboard"],
    )
    handle = backend.submit(spec)  # k8s.backoff_limit: the default
    status = wait_for(lambda: (s := backend.status(spec, handle)).state.finished and s, timeout=240)
    log = "\n".join(line.text for line in backend.logs(spec, handle))
    tail = log[-3000:]
    assert status.state == JobState.SUCCEEDED, f"{status}\n{tail}"
    assert len(fake.launched) == 2  # the launcher Job made a second pod after the first exited 75
    run_dir = volume / "lanenb-runs" / "lane-spot"
    events = [json.loads(x) for x in (run_dir / "events.jsonl").read_text().splitlines()]
    kinds = [e["kind"] for e in events]
    preempted = events[kinds.index("preempted")]
    resumed = events[kinds.index("resumed")]
    assert (preempted["step"], preempted["ranks"]) == (3, [1])
    assert (resumed["count"], resumed["step"], resumed["steps_lost"], resumed["automatic"]) == (1, 3, 0, True)
    assert kinds.count("start") == 2 and kinds[-1] == "end" and events[-1]["status"] == "stopped"  # --max-steps
    assert [e["step"] for e in events if e["kind"] == "step"] == [1, 2, 3, 4, 5]  # no step taken twice
    # the newest launcher pod's log (what every view reads) has the resume and its totals
    assert '"kind":"resumed"' in log and '"count":1' in log


def test_launcher_sources_stay_stdlib_only():
    # the launcher pod runs the wrapper before any rank: exitcodes must not pull torch in
    code = textwrap.dedent("""
        import sys
        import lanenb_trainer.launcher
        assert "torch" not in sys.modules, sorted(m for m in sys.modules if m.startswith("torch"))
    """)
    subprocess.run([sys.executable, "-c", code], check=True, timeout=60)


def test_the_worker_init_imports_nothing_but_the_stdlib():
    # every worker pod's first process (lanenb_trainer.worker_init): no torch, numpy, nor another
    # trainer module that could pull them in later
    code = textwrap.dedent("""
        import sys
        before = set(sys.modules)
        import lanenb_trainer.worker_init
        new = {m for m in set(sys.modules) - before if m.split(".")[0] not in sys.stdlib_module_names}
        assert new <= {"lanenb_trainer", "lanenb_trainer.worker_init"}, sorted(new)
    """)
    subprocess.run([sys.executable, "-c", code], check=True, timeout=60)
