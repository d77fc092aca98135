"""One mpirun argv builder for local jobs and the MPIJob launcher."""

from __future__ import annotations

import sys

from lanenb.backends.kubernetes.manifests import TRAINER_ENTRYPOINT, mpirun_argv
from lanenb.backends.local.backend import LocalBackend
from lanenb.jobs import TrainSpec
from lanenb.launch import rankguard


def _mpi_options(argv: list[str], program_start: int) -> list[str]:
    return argv[1:program_start]


def test_local_and_kubernetes_launchers_share_rank_placement_and_tagging(tmp_path):
    spec = TrainSpec(dataset=str(tmp_path), processes=3, env={"LANE_X": "1"})
    k8s = mpirun_argv(spec, "/mnt/runs/x")
    local_backend = LocalBackend(program=[sys.executable, "prog.py"], trainer_args=False, grace=2.5)
    local = local_backend.launcher_argv(spec, tmp_path)
    k8s_opts = _mpi_options(k8s, k8s.index(TRAINER_ENTRYPOINT[0]))
    local_opts = _mpi_options(local, local.index(sys.executable))
    for opts in (k8s_opts, local_opts):
        assert opts[:2] == ["-np", "3"]
        for flag, value in (("--bind-to", "none"), ("--map-by", "slot")):
            assert opts[opts.index(flag) + 1] == value
        assert "--tag-output" in opts
    assert "LANE_X" in [k8s_opts[i + 1] for i, o in enumerate(k8s_opts) if o == "-x"]
    assert "LANE_X" in [local_opts[i + 1] for i, o in enumerate(local_opts) if o == "-x"]
    # what differs is what should: one machine vs a hostfile, the image's entry point
    assert "--oversubscribe" in local_opts and "--oversubscribe" not in k8s_opts
    assert k8s[k8s.index(TRAINER_ENTRYPOINT[0]):][:3] == TRAINER_ENTRYPOINT


def test_local_ranks_run_behind_the_guard(tmp_path):
    spec = TrainSpec(dataset=str(tmp_path), processes=2)
    argv = LocalBackend(program=[sys.executable, "prog.py"], trainer_args=False).launcher_argv(spec, tmp_path)
    i = argv.index(rankguard.__file__)
    assert argv[i - 1] == sys.executable and argv[i + 1:] == [sys.executable, "prog.py"]
