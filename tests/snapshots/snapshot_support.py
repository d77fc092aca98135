"""The two snapshot stores behind one test harness, so one contract test runs on both.

A harness makes volumes with files, reads them back and names new restore targets: a
directory for the local (restic) store, a PVC whose data lives in the fake CSI driver's
directory for the Kubernetes store.
"""

from __future__ import annotations

import sys
import textwrap
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "k8s"))


def write_files(root: Path, files: dict[str, str | None]) -> None:
    """Write ``files`` (relative path -> text; ``None`` deletes) under ``root``."""
    for rel, text in files.items():
        path = root / rel
        if text is None:
            path.unlink()
            continue
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)


def read_files(root: Path) -> dict[str, str]:
    return {str(p.relative_to(root)): p.read_text() for p in sorted(root.rglob("*")) if p.is_file()}


class LocalHarness:
    backend = "local"
    can_diff = True

    def __init__(self, tmp_path: Path) -> None:
        from lanenb.snapshots.local import ResticStore

        self.tmp = tmp_path
        self.store = ResticStore()

    def make_volume(self, name: str, files: dict[str, str | None]) -> str:
        root = self.tmp / name
        root.mkdir(parents=True)
        write_files(root, files)
        return str(root)

    def path(self, volume: str) -> Path:
        return Path(volume)

    def edit(self, volume: str, files: dict[str, str | None]) -> None:
        write_files(self.path(volume), files)

    def read(self, volume: str) -> dict[str, str]:
        return read_files(self.path(volume))

    def target(self, name: str) -> str:
        return str(self.tmp / name)

    def exists(self, volume: str) -> bool:
        return self.path(volume).exists()


class KubernetesHarness(LocalHarness):
    backend = "kubernetes"
    can_diff = False

    def __init__(self, tmp_path: Path, thread: Any, controller: Any, kubeconfig: Path) -> None:
        from lanenb.snapshots.csi import CsiStore

        self.tmp = tmp_path
        self.thread, self.controller = thread, controller
        self.store = CsiStore("default", kubeconfig=str(kubeconfig), timeout=20, poll=0.05)

    def make_volume(self, name: str, files: dict[str, str | None]) -> str:
        root = self.thread.call(self.controller.add_pvc, name, "2Gi")
        write_files(root, files)
        return name

    def path(self, volume: str) -> Path:
        return self.controller.volume_dir(volume)

    def target(self, name: str) -> str:
        return name

    def exists(self, volume: str) -> bool:
        from kube_emulator import PVCS

        return self.thread.call(self.thread.emulator.get, PVCS, "default", volume) is not None

    def read(self, volume: str) -> dict[str, str]:
        """A restored PVC's data appears once the fake driver provisioned it."""
        import time

        deadline = time.monotonic() + 10
        while not self.path(volume).exists() and time.monotonic() < deadline:
            time.sleep(0.02)
        return read_files(self.path(volume))


def counting_restic(directory: Path) -> tuple[str, Path]:
    """A ``restic`` that logs each sub-command to a file, then runs the real restic: how many
    times a store operation opens the repository (each open costs ~0.5 s of key derivation)."""
    import shutil

    real = shutil.which("restic")
    assert real is not None
    log = directory / "restic-calls.log"
    wrapper = directory / "restic-counting"
    wrapper.write_text(f'#!/bin/sh\nprintf "%s\\n" "$1" >> "{log}"\nexec "{real}" "$@"\n')
    wrapper.chmod(0o755)
    return str(wrapper), log


def calls(log: Path) -> list[str]:
    """The restic sub-commands logged so far (and forget them)."""
    found = log.read_text().split() if log.exists() else []
    log.write_text("")
    return found


# a "training" program for --snapshot jobs: rank 0 writes a checkpoint and metrics.json with the
# accuracy given; "fail" makes rank 1 fail, "lose-data" deletes the dataset before the snapshot
SNAPSHOT_PROGRAM = textwrap.dedent("""
    import json, os, sys
    rank = int(os.environ.get("OMPI_COMM_WORLD_RANK", "0"))
    mode, accuracy = sys.argv[1], sys.argv[2]
    if mode == "fail" and rank == 1:
        sys.exit(3)
    if mode == "lose-data" and rank == 0:  # the dataset is gone by the time it is snapshotted
        import shutil
        shutil.rmtree(os.environ["LANE_DATA"])
    if rank == 0:
        run = os.environ["LANE_RUN_DIR"]
        os.makedirs(os.path.join(run, "checkpoints"), exist_ok=True)
        with open(os.path.join(run, "checkpoints", "best.pt"), "wb") as fh:
            fh.write(accuracy.encode() * 100)
        with open(os.path.join(run, "metrics.json"), "w") as fh:
            json.dump({"accuracy": float(accuracy)}, fh)
    print("done", rank, flush=True)
""")


def snapshot_job_runner(tmp_path: Path) -> Callable[..., tuple[Any, Any, Path, Path]]:
    """``run(mode="ok", snapshot=True, name=..., accuracy="0.9125")`` -> (job, status, dataset, run dir):
    a 2-rank local job of ``SNAPSHOT_PROGRAM`` on a small dataset folder, waited for."""
    import shutil

    import pytest

    from lanenb.jobs import TrainSpec, submit

    if shutil.which("mpirun") is None:
        pytest.skip("mpirun (Open MPI) is not installed")
    program = tmp_path / "program.py"
    program.write_text(SNAPSHOT_PROGRAM)
    data = tmp_path / "dataset"
    write_files(data, {"label_data.json": '{"lanes": []}\n', "clips/0530/1/20.jpg": "frame"})

    def run(mode: str = "ok", snapshot: bool = True, name: str = "snap-job", accuracy: str = "0.9125"):
        run_dir = tmp_path / f"run-{name}"
        spec = TrainSpec(dataset=str(data), processes=2, run_dir=str(run_dir), name=name,
                         env={"LANE_RUN_DIR": str(run_dir), "LANE_DATA": str(data)}, enable_snapshot=snapshot)
        job = submit(spec, program=[sys.executable, str(program), mode, accuracy], trainer_args=False)
        return job, job.wait(timeout=240), data, run_dir

    return run
