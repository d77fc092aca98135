"""The MPIJob worker's init (``python -m lanenb_trainer.worker_init -- sshd ...``) for real, as a process
tree on this machine: an sshd stand-in (its child) that started a stand-in rank, as sshd -> orted ->
rank does in a worker pod. The pod's SIGTERM must reach the rank as SIGUSR1 (a preemption) and be
waited for before sshd is stopped: sshd as PID 1 would exit at once and take the ranks with it."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import psutil
import pytest
from polling import wait_for

from lanenb_trainer import exitcodes
from lanenb_trainer.worker_init import is_rank_cmdline

# The stand-in rank: a package named like the trainer, run as ``python -m lanenb_trainer`` from its
# folder (cwd first on sys.path), so its command line is a rank's. It checkpoints (a file) on SIGUSR1.
RANK_MAIN = textwrap.dedent("""
    import os, signal, sys, time
    out = sys.argv[1]
    def stop(signum, _frame):
        time.sleep(0.5)  # writing the checkpoint: sshd must not be stopped meanwhile
        with open(os.path.join(out, "checkpoint"), "w") as fh:
            fh.write(signal.Signals(signum).name)
        sys.exit(75)
    signal.signal(signal.SIGUSR1, signal.SIG_IGN if "--ignore" in sys.argv else stop)
    open(os.path.join(out, f"rank-up-{os.getpid()}"), "w").close()
    time.sleep(120)
""")
# The sshd stand-in: starts the rank below itself, says which signals it got, and on SIGTERM
# stops (killing what is left of its rank, as the kernel would) with exit code 7.
SSHD = textwrap.dedent("""
    import os, signal, subprocess, sys, time
    out, fake, *rank_args = sys.argv[1:]
    rank = subprocess.Popen([sys.executable, "-m", "lanenb_trainer", out, *rank_args], cwd=fake)
    def note(signum, _frame):
        with open(os.path.join(out, "sshd-signals"), "a") as fh:
            fh.write(f"{signal.Signals(signum).name} rank_exit={rank.poll()}\\n")
        if signum == signal.SIGTERM:
            rank.kill()
            sys.exit(7)
    for s in (signal.SIGTERM, signal.SIGHUP):
        signal.signal(s, note)
    if "--exit-now" in rank_args:
        rank.kill(); rank.wait(); sys.exit(3)
    while True:
        time.sleep(0.1)
""")


@pytest.fixture
def tree(tmp_path: Path):
    """``start(*rank_args, grace=S)`` -> (init process, out dir); everything started is killed after."""
    fake = tmp_path / "image"
    (fake / "lanenb_trainer").mkdir(parents=True)
    (fake / "lanenb_trainer" / "__init__.py").write_text("")
    (fake / "lanenb_trainer" / "__main__.py").write_text(RANK_MAIN)
    (tmp_path / "sshd.py").write_text(SSHD)
    out = tmp_path / "out"
    out.mkdir()
    started: list[subprocess.Popen] = []

    def start(*rank_args: str, grace: float = 20.0) -> tuple[subprocess.Popen, Path]:
        init = subprocess.Popen([sys.executable, "-m", "lanenb_trainer.worker_init", "--grace", str(grace), "--",
                                 sys.executable, str(tmp_path / "sshd.py"), str(out), str(fake), *rank_args],
                                stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        started.append(init)
        return init, out

    yield start
    for p in started:  # the whole tree: the sshd stand-in holds the init's stdout open
        try:
            below = psutil.Process(p.pid).children(recursive=True)
        except psutil.NoSuchProcess:
            below = []
        for proc in [*below, p]:
            try:
                proc.kill()
            except (psutil.NoSuchProcess, ProcessLookupError):
                pass
        p.communicate(timeout=10)
    for f in out.glob("rank-up-*"):  # a rank left behind by an init that was gone first
        try:
            os.kill(int(f.name.rsplit("-", 1)[1]), signal.SIGKILL)
        except ProcessLookupError:
            pass


def _rank_up(out: Path) -> int:
    found = wait_for(lambda: sorted(out.glob("rank-up-*")), timeout=30)
    return int(found[0].name.rsplit("-", 1)[1])


def _sshd_signals(out: Path) -> list[str]:
    path = out / "sshd-signals"
    return path.read_text().splitlines() if path.exists() else []


def test_the_pods_sigterm_checkpoints_the_rank_before_sshd_is_stopped(tree, tmp_path):
    init, out = tree()
    _rank_up(out)
    # a trainer process outside the init's tree (another job on this machine): never signalled
    other_out = tmp_path / "other"
    other_out.mkdir()
    other = subprocess.Popen([sys.executable, "-m", "lanenb_trainer", str(other_out)], cwd=tmp_path / "image")
    try:
        _rank_up(other_out)
        t0 = time.monotonic()
        init.send_signal(signal.SIGTERM)
        said, _ = init.communicate(timeout=30)
        assert init.returncode == 7, said  # the child's exit code
        assert time.monotonic() - t0 < 10
        assert (out / "checkpoint").read_text() == "SIGUSR1"
        # sshd got SIGTERM only once the rank had checkpointed and exited 75
        assert _sshd_signals(out) == [f"SIGTERM rank_exit={exitcodes.PREEMPTED}"]
        assert "asked rank process" in said
        assert other.poll() is None and not (other_out / "checkpoint").exists()
    finally:
        other.kill()
        other.wait()


def test_a_rank_that_does_not_stop_is_waited_for_at_most_the_grace(tree):
    init, out = tree("--ignore", grace=2.0)
    _rank_up(out)
    t0 = time.monotonic()
    init.send_signal(signal.SIGTERM)
    said, _ = init.communicate(timeout=30)
    waited = time.monotonic() - t0
    assert init.returncode == 7 and 2.0 <= waited < 8, (waited, said)
    assert _sshd_signals(out) == ["SIGTERM rank_exit=None"]  # still running when sshd was stopped
    assert "still running after 2s" in said and not (out / "checkpoint").exists()


def test_other_signals_go_to_the_child_and_its_own_exit_ends_the_init(tree):
    init, out = tree()
    _rank_up(out)
    init.send_signal(signal.SIGHUP)
    wait_for(lambda: _sshd_signals(out), timeout=10)
    assert _sshd_signals(out) == ["SIGHUP rank_exit=None"] and init.poll() is None
    assert not (out / "checkpoint").exists()  # SIGHUP is no preemption
    done, _ = tree("--exit-now")
    done.communicate(timeout=30)
    assert done.returncode == 3


def test_a_command_that_does_not_exist_is_named():
    said = subprocess.run([sys.executable, "-m", "lanenb_trainer.worker_init", "--", "/nonexistent/sshd", "-De"],
                          capture_output=True, text=True, timeout=30)
    assert said.returncode == 127 and "'/nonexistent/sshd'" in said.stderr


@pytest.mark.parametrize(("argv", "rank"), [
    (["python", "-m", "lanenb_trainer", "--epochs", "1"], True),
    (["/opt/conda/bin/python3.11", "-u", "-m", "lanenb_trainer"], True),
    (["python", "-W", "ignore", "-mlanenb_trainer"], True),
    (["python", "-m", "lanenb_trainer.worker_init", "--", "/usr/sbin/sshd", "-De"], False),
    (["python", "-m", "lanenb_trainer.launcher", "--", "mpirun"], False),
    (["/usr/sbin/sshd", "-De"], False),
    (["orted", "-mca", "ess", "env", "python", "-m", "lanenb_trainer"], False),
    (["python", "train.py", "-m", "lanenb_trainer"], False),
])
def test_which_command_lines_are_ranks(argv, rank):
    assert is_rank_cmdline(argv) is rank
