"""``%lanejobs --team`` over the emulated cluster of ``tests/k8s/team_scenario.py``: every job the
user may read with its user and why it waits, GPU capacity, the quota, and a second call served by
the same watching collector (no new list)."""

from __future__ import annotations

import pytest
from IPython.core.error import UsageError
from team_scenario import LEAD, kubeconfig_for, team_cluster


@pytest.fixture
def lead(tmp_path, monkeypatch):
    with team_cluster() as thread:
        monkeypatch.setenv("KUBECONFIG", str(kubeconfig_for(thread, tmp_path, LEAD)))
        monkeypatch.setenv("LANENB_USER", "bob")
        yield thread


def test_lanejobs_team_shows_every_users_jobs_capacity_and_quota(ip, lead, capsys):
    ip.run_line_magic("lanejobs", "--team")
    out = capsys.readouterr().out
    assert "lanenb jobs of the team (all namespaces)" in out
    lines = {line.split()[0]: line for line in out.splitlines() if line.split() and line.split()[0][:2] in ("a-", "b-")}
    assert sorted(lines) == ["a-done", "a-run", "a-wait", "b-image", "b-quota", "b-run"]
    assert "bob (you)" in lines["b-run"] and "carol" in lines["a-wait"]
    assert "pending: quota: gpu-quota (requests.nvidia.com/gpu 2 of 2 used, 1 requested)" in lines["b-quota"]
    assert "GPUs: 4 of 4 allocated, 0 free (gpu-node-0 2/2, gpu-node-1 2/2)" in out
    assert "quota team-b/gpu-quota: 2 of 2 requests.nvidia.com/gpu used, 0 free" in out
    listed = sum(1 for m, p in lead.emulator.served if m == "GET" and "watch=" not in p and "/log" not in p)
    ip.run_line_magic("lanejobs", "--team")
    assert "a-wait" in capsys.readouterr().out
    assert sum(1 for m, p in lead.emulator.served if m == "GET" and "watch=" not in p and "/log" not in p) == listed
    with pytest.raises(UsageError, match="--namespace and --context go with --team"):
        ip.run_line_magic("lanejobs", "--namespace team-a")
