"""mpirun argv building and the reassembly of Open MPI's chunked, tagged output."""

from __future__ import annotations

import subprocess
import sys

import pytest

from lanenb.launch.mpirun import LaunchError, TaggedOutputParser, build_mpirun_argv, trainer_argv


def test_argv_is_a_list_running_the_trainer_module():
    argv = build_mpirun_argv(3, ["--data", "/d e"], env={"NCCL_DEBUG": "INFO"}, python="/py",
                             hosts=["a:2", "b:1"], allow_root=True)
    assert argv[:3] == ["mpirun", "-np", "3"]
    for flag in ("--oversubscribe", "--tag-output", "--allow-run-as-root"):
        assert flag in argv
    assert argv[argv.index("--host") + 1] == "a:2,b:1"
    exported = [argv[i + 1] for i, a in enumerate(argv) if a == "-x"]
    assert exported == ["MASTER_ADDR", "MASTER_PORT", "PYTHONUNBUFFERED", "NCCL_DEBUG"]
    assert (argv[-5:] == ["/py", "-u", "-m", "lanenb_trainer", "--data"]
            or argv[-6:-2] == ["/py", "-u", "-m", "lanenb_trainer"])
    assert argv[-1] == "/d e"  # one argv element: never split by a shell
    assert "--allow-run-as-root" not in build_mpirun_argv(1, [], allow_root=False)


@pytest.mark.parametrize("processes", [0, -2, "2", True])
def test_bad_process_counts(processes):
    with pytest.raises(LaunchError, match=f"processes must be an integer >= 1, got {processes!r}"):
        build_mpirun_argv(processes, [])


def test_bad_export_name():
    with pytest.raises(LaunchError, match="cannot export 'A B'"):
        build_mpirun_argv(1, [], env=["A B"])


def test_trainer_argv():
    assert trainer_argv(data="/d", batch_size=4, use_val=False, use_workers=True, weights=None) == [
        "--data", "/d", "--batch-size", "4", "--no-use-val", "--use-workers"]


def test_parser_reassembles_chunked_lines():
    p = TaggedOutputParser()
    out = []
    out += p.feed("[1,0]<stdout>:@lanenb {\"kind\":\"lo[1,1]<stdout>:hello from 1\n")
    out += p.feed("[1,0]<stderr>:warning\n")
    out += p.feed("[1,0]<stdout>:g\",\"rank\":0,\"message\":\"x\"}\n")
    out += p.feed("mpirun noticed something\n")
    got = [(ln.rank, ln.stream, ln.text) for ln in out]
    assert got == [
        (1, "stdout", "hello from 1"),
        (0, "stderr", "warning"),
        (0, "stdout", '@lanenb {"kind":"log","rank":0,"message":"x"}'),
        (None, "mpirun", "mpirun noticed something"),
    ]
    assert out[2].event is not None and out[2].event.kind == "log"
    assert out[0].tagged() == "[1] hello from 1"


def test_real_mpirun_long_lines_arrive_whole(tmp_path):
    """Open MPI re-tags every ~4 KiB chunk; the parser must hand back the original lines."""
    from lanenb.launch.mpirun import find_mpirun, iter_output

    script = tmp_path / "talk.py"
    script.write_text("import os,sys\nr=os.environ['OMPI_COMM_WORLD_RANK']\n"
                      "for n in (10, 5000, 20000):\n    sys.stdout.write(r+'x'*n+'END\\n'); sys.stdout.flush()\n")
    argv = build_mpirun_argv(2, [], python=sys.executable)
    argv = argv[: argv.index(sys.executable)] + [sys.executable, str(script)]
    argv[0] = find_mpirun()
    proc = subprocess.run(argv, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    lines = [ln for ln in iter_output(proc.stdout.splitlines(keepends=True)) if ln.rank is not None]
    for rank in (0, 1):
        mine = sorted(len(ln.text) for ln in lines if ln.rank == rank)
        assert mine == [14, 5004, 20004]
        assert all(ln.text.startswith(str(rank)) and ln.text.endswith("END") for ln in lines if ln.rank == rank)
