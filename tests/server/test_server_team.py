"""The sidebar's Team section through a real Jupyter server: ``GET /lanenb/team`` against the
emulated cluster (``tests/k8s/team_scenario.py``), as a user who may read one namespace; Stop of a
teammate's job is refused where RBAC refuses it (403) and without the job's name (400). The
payload's keys are the ones ``extension/src/team.ts`` declares."""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

import pytest
from server_support import body_of
from tornado.httpclient import HTTPClientError

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "k8s"))

from k8s_harness import REPO
from kube_emulator import MPIJOBS
from team_scenario import ALICE, kubeconfig_for, team_cluster


@pytest.fixture
def alice(tmp_path, monkeypatch):
    with team_cluster() as thread:
        monkeypatch.setenv("KUBECONFIG", str(kubeconfig_for(thread, tmp_path, ALICE)))
        monkeypatch.setenv("LANENB_USER", "alice")
        yield thread


def _interface(name: str) -> set[str]:
    """The field names of ``export interface NAME { ... }`` in team.ts (one level, no nesting)."""
    text = (REPO / "extension" / "src" / "team.ts").read_text()
    body = re.search(r"export interface " + name + r" \{(.*?)\n\}", text, re.S)
    assert body, f"team.ts declares no interface {name}"
    return set(re.findall(r"^\s+(\w+)\??:", body.group(1), re.M))


async def test_the_team_route_lists_what_the_user_may_read_and_says_what_was_refused(jp_fetch, alice):
    view = body_of(await jp_fetch("lanenb", "team", params=[("namespace", "team-a"), ("namespace", "team-b")]))
    jobs = {j["name"]: j for j in view["jobs"]}
    assert sorted(jobs) == ["a-done", "a-run", "a-wait"]
    assert jobs["a-wait"]["waiting"] == {"kind": "gpu", "text": "Unschedulable: insufficient nvidia.com/gpu on 2 nodes"}
    assert jobs["a-run"]["mine"] and jobs["a-run"]["can_cancel"] and jobs["a-run"]["progress"] == 0.5
    assert {(u["what"], u["namespace"]) for u in view["unreadable"]} >= {("MPIJobs", "team-b"), ("nodes", None)}
    # the payload has exactly the fields team.ts declares
    assert set(view) == _interface("ITeamView")
    assert set(view["jobs"][0]) == _interface("ITeamJob")
    assert set(view["unreadable"][0]) == _interface("ITeamUnreadable")
    again = body_of(await jp_fetch("lanenb", "team", params=[("namespace", "team-a"), ("namespace", "team-b")]))
    assert [j["name"] for j in again["jobs"]] == [j["name"] for j in view["jobs"]]  # the same watching collector


async def test_stopping_a_teammates_job_needs_rbac_and_its_name(jp_fetch, alice):
    with pytest.raises(HTTPClientError) as err:
        await jp_fetch("lanenb", "team", "team-b", "b-run", "stop", method="POST",
                       body=json.dumps({"confirm": "b-run"}))
    assert err.value.code == 403
    with pytest.raises(HTTPClientError) as err:
        await jp_fetch("lanenb", "team", "team-a", "a-wait", "stop", method="POST", body=json.dumps({"confirm": "x"}))
    assert err.value.code == 400
    assert alice.call(alice.emulator.get, MPIJOBS, "team-a", "a-wait") is not None
    reply = body_of(await jp_fetch("lanenb", "team", "team-a", "a-wait", "stop", method="POST",
                                   body=json.dumps({"confirm": "a-wait"})))
    assert reply["stopped"] and alice.call(alice.emulator.get, MPIJOBS, "team-a", "a-wait") is None
