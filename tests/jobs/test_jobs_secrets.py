"""Issue 31, finding 1: a secret a rank prints reads ``<redacted>`` for every reader of the job
(another kernel's ``get_job``, ``Job.poll``, ``lanenb jobs logs`` in another process), on the
local backend too, though the registry keeps no value to compare with."""

from __future__ import annotations

import json
import os
import subprocess
import sys

from lanenb.contract.redact import REDACTED
from lanenb.jobs import JobState, TrainSpec, get_job, submit

SECRET = "wandb-7f3a9c1e5b2d"
PROXY_PASSWORD = "pr0xy-pass-99"
PRINTS = ("import os; print('key', os.environ['WANDB_API_KEY']); "
          "print('proxy password', os.environ['HTTPS_PROXY'].split(':')[2].split('@')[0])")


def test_a_printed_secret_reads_redacted_for_every_reader_of_a_local_job(tmp_path, lanenb_home):
    env = {"WANDB_API_KEY": SECRET, "HTTPS_PROXY": f"http://me:{PROXY_PASSWORD}@proxy:3128"}
    spec = TrainSpec(dataset=str(tmp_path), processes=1, run_dir=str(tmp_path / "run"), env=env, name="lane-leaky")
    job = submit(spec, program=[sys.executable, "-c", PRINTS], trainer_args=False)
    assert job.wait(timeout=60).state is JobState.SUCCEEDED
    assert SECRET in (tmp_path / "run" / "job.log").read_text()  # the rank really printed it, in its own run dir

    again = get_job("lane-leaky")  # another kernel: only the registry row (values redacted) to go on
    assert again.spec.env["WANDB_API_KEY"] == REDACTED
    texts = [line.text for line in again.logs()]
    assert any(t.endswith(f"key {REDACTED}") for t in texts), texts
    assert any(t.endswith(f"proxy password {REDACTED}") for t in texts), texts
    polled = [u.line.text for u in again.poll().updates if u.line is not None]  # what the sidebar's feed reads
    assert any(t.endswith(f"key {REDACTED}") for t in polled), polled
    assert not any(SECRET in t or PROXY_PASSWORD in t for t in texts + polled)

    cli = subprocess.run([sys.executable, "-m", "lanenb", "jobs", "logs", "lane-leaky"], capture_output=True,
                         text=True, timeout=120, env={**os.environ, "LANENB_HOME": str(lanenb_home)})
    assert cli.returncode == 0, cli.stderr
    assert f"key {REDACTED}" in cli.stdout and SECRET not in cli.stdout and PROXY_PASSWORD not in cli.stdout

    stored = json.dumps([p.read_bytes().decode("latin-1") for p in lanenb_home.rglob("*") if p.is_file()
                         and p.suffix != ".log"])
    assert SECRET not in stored and PROXY_PASSWORD not in stored  # registry, fingerprints: no value


def test_an_inherited_or_escaped_secret_reads_redacted_too(tmp_path, lanenb_home, monkeypatch):
    """Issue 43: the ranks inherit the kernel's environment, so its secret-named variables are
    fingerprinted at submit; and a value an ``@lanenb`` event carries JSON-escaped ("quote",
    non-ASCII) or a traceback carries repr-escaped is found in those spellings too."""
    inherited = "inh3rited-s3cret-value"
    quoted = 'pä"ss\\word-1234567'
    monkeypatch.setenv("CORP_SECRET_KEY", inherited)
    prints = ("import json, os; print('env', os.environ['CORP_SECRET_KEY']); "
              "print('@lanenb ' + json.dumps({'v': 1, 't': 1.0, 'rank': 0, 'kind': 'error', "
              "'message': 'bad ' + os.environ['DB_PASSWORD']})); print(repr(os.environ['DB_PASSWORD']))")
    spec = TrainSpec(dataset=str(tmp_path), processes=1, run_dir=str(tmp_path / "run"), name="lane-escaped",
                     env={"DB_PASSWORD": quoted})
    job = submit(spec, program=[sys.executable, "-c", prints], trainer_args=False)
    assert job.wait(timeout=60).state is JobState.SUCCEEDED
    raw = (tmp_path / "run" / "job.log").read_text()
    assert inherited in raw and json.dumps(quoted)[1:-1] in raw  # the rank printed both spellings
    texts = [line.text for line in get_job("lane-escaped").logs()]
    assert any(t.endswith(f"env {REDACTED}") for t in texts), texts
    joined = "\n".join(texts)
    for spelling in (inherited, quoted, json.dumps(quoted)[1:-1], repr(quoted)[1:-1]):
        assert spelling not in joined, spelling
    (event,) = [e for e in get_job("lane-escaped").events() if e.kind == "error"]
    assert event["message"] == f"bad {REDACTED}"
