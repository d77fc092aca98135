"""The sweep's three faces take the same flags: ``lanenb.sweeps.sweep`` (the other tests),
``%lanesweep`` in a real IPython shell and ``lanenb sweep`` as a real process."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest
from IPython.core.error import UsageError

from lanenb.jobs import JobState, get_job

TINY = "-np 1 --epochs 1 --batch-size 4 --img-height 64 --img-width 160"


@pytest.fixture(scope="module")
def ip():
    from ipshell import session_shell

    return session_shell()


def test_lanesweep_searches_the_flags_given_as_ranges_and_lists(ip, sweep_data):
    s = ip.run_line_magic("lanesweep", f"--data {sweep_data} {TINY} --lr 1e-3..3e-2:log --momentum 0.8,0.9 "
                                       "--name magic --trials 1 --wait")
    assert s.state == "finished", s.log()
    (row,) = s.trials()
    assert row.state == "complete" and set(row.params) == {"lr", "momentum"} and 1e-3 <= row.params["lr"] <= 3e-2
    job = get_job("magic-0")
    assert job.status().state is JobState.SUCCEEDED
    assert job.spec.extra_args[-4:] == ["--lr", str(row.params["lr"]), "--momentum", str(row.params["momentum"])]
    assert "sweep magic: finished, 1/1 trial(s)" in s.table().text()
    assert ip.run_line_magic("lanesweep", "--attach magic").best["job"] == "magic-0"


@pytest.mark.parametrize("line, said", [
    ("--data {data} --lr 0.1", "nothing to search: give at least one flag a range or a list"),
    ("--data {data} --lr 1..0.1", "--lr '1..0.1': the low bound must be below the high one"),
    ("--data {data} --backbone small,vgg99", "--backbone small,vgg99: 'vgg99' is not a valid value"),
    ("--data {data} --lr 1e-3..1e-1 --sampler annealing", "argument --sampler: invalid choice: 'annealing'"),
    ("--attach nowhere", "no sweep named 'nowhere'"),
])
def test_lanesweep_says_what_is_wrong_in_one_line(ip, sweep_data, line, said):
    with pytest.raises(UsageError) as err:
        ip.run_line_magic("lanesweep", line.format(data=sweep_data))
    assert said in str(err.value)


def test_lanenb_sweep_on_the_command_line(sweep_data):
    def lanenb(*argv: str) -> subprocess.CompletedProcess:
        return subprocess.run([sys.executable, "-m", "lanenb", "sweep", *argv], capture_output=True, text=True,
                              env=dict(os.environ), timeout=300)

    done = lanenb("start", "--data", str(sweep_data), *TINY.split(), "--batch-size", "2,4", "--name", "cli",
                  "--trials", "1", "--sampler", "grid", "--wait")
    assert done.returncode == 0, done.stderr
    assert "sweep cli started: 1 trial(s)" in done.stdout
    assert "sweep cli: finished, 1/1 trial(s), grid + asha" in done.stdout
    shown = lanenb("show", "cli")
    assert shown.returncode == 0 and "cli-0" in shown.stdout and "batch_size" in shown.stdout
    listed = lanenb("list")
    assert listed.stdout.startswith("cli\tfinished\t1 trial(s)\tbest: ")
    missing = lanenb("show", "nope")
    assert missing.returncode == 2 and missing.stderr.strip() == "error: no sweep named 'nope'; there are: cli"
