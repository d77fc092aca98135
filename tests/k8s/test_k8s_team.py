"""The team view (``lanenb.team``) against the emulator: several users' MPIJobs, why each pending
one waits, GPU capacity and quota, what RBAC keeps from a user who may read one namespace,
Stop only where RBAC allows, and a view kept by watches (no list per refresh)."""

from __future__ import annotations

import json
import re
import time

import pytest
from kube_emulator import MPIJOBS
from team_scenario import ALICE, LEAD, VIEWER, kubeconfig_for, mpijob, team_cluster

from lanenb.cli import main
from lanenb.kube.client import load_clients
from lanenb.kube.identity import submitter, user_label_value
from lanenb.team import TeamConfirmationError, TeamPermissionError, stop_team_job
from lanenb.team.collector import TeamCollector


@pytest.fixture
def team(tmp_path):
    """The emulator holding ``team_scenario.build_team``'s cluster, with RBAC on."""
    with team_cluster() as thread:
        yield thread, tmp_path


def collect(team, user: str, namespaces=None, *, watch: bool = False) -> TeamCollector:
    thread, tmp = team
    clients = load_clients(kubeconfig=str(kubeconfig_for(thread, tmp, user)))
    return TeamCollector(clients, namespaces, user=ALICE).start(watch=watch)


def rows(view) -> dict[str, dict]:
    return {j["name"]: j for j in view.to_dict()["jobs"]}


def test_the_team_view_shows_every_users_jobs_and_why_each_pending_one_waits(team):
    view = collect(team, LEAD).view()
    got = rows(view)
    assert view.scope == "cluster"
    assert {n: (j["user"], j["namespace"], j["state"]) for n, j in got.items()} == {
        "a-run": ("alice", "team-a", "running"), "a-wait": ("carol", "team-a", "pending"),
        "a-done": ("alice", "team-a", "succeeded"), "b-run": ("bob", "team-b", "running"),
        "b-quota": ("bob", "team-b", "pending"), "b-image": ("dave", "team-b", "pending")}
    assert got["a-wait"]["status"] == "pending: Unschedulable: insufficient nvidia.com/gpu on 2 nodes"
    assert got["b-quota"]["status"] == ("pending: quota: gpu-quota (requests.nvidia.com/gpu 2 of 2 used, "
                                        "1 requested)")
    assert got["b-image"]["status"] == "pending: image pull: ImagePullBackOff (registry.example.com/typo:1)"
    assert (got["a-wait"]["size"], got["a-wait"]["gpus"]) == ("4 ranks (2x2 GPU)", 4)
    # progress, ETA, headline and GPU use from the running job's launcher events
    run = got["a-run"]
    assert run["progress"] == pytest.approx(0.5) and run["eta_s"] == pytest.approx(480)  # 25 steps in 240 s
    assert run["gpu_util"] == pytest.approx(87.0) and "0.9100" in run["headline"]
    assert 590 < run["run_s"] < 700 and run["nodes"] == ["gpu-node-0"] and run["gpus_held"] == 2
    assert run["mine"] and not got["b-run"]["mine"]
    # capacity by node and in total, quota used against hard
    data = view.to_dict()
    assert data["gpus"] == {"total": 4, "allocated": 4, "free": 0} and not data["partial_nodes"]
    assert [(n["node"], n["allocated"], n["free"]) for n in data["nodes"]] == [("gpu-node-0", 2, 0),
                                                                             ("gpu-node-1", 2, 0)]
    assert [(q["namespace"], q["used"], q["hard"]) for q in data["quotas"]] == [("team-b", 2, 2)]
    # start estimates from the running jobs' ends: a-run by its ETA (8 min) frees 2 GPUs, b-run by its
    # deadline (1 h) 2 more: a-wait needs 4; b-quota needs 1 of team-b's quota, which b-run holds
    assert re.fullmatch(r"estimate: could start in ~(59m \d+s|1h 0m), when team-a/a-run \(ETA\), team-b/b-run "
                        r"\(deadline\) end", got["a-wait"]["start_estimate"])
    assert re.fullmatch(r"estimate: could start in ~(59m \d+s|1h 0m), when team-b/b-run \(deadline\) ends",
                        got["b-quota"]["start_estimate"])
    assert got["b-image"]["start_estimate"] is None  # an image, not capacity: no estimate
    assert view.unreadable == []
    assert all(j["can_cancel"] == (j["state"] != "succeeded") for j in got.values())


def test_a_user_who_may_read_one_namespace_sees_it_and_is_told_what_was_refused(team):
    view = collect(team, ALICE, ["team-a", "team-b"]).view()
    assert sorted(rows(view)) == ["a-done", "a-run", "a-wait"]
    refused = {(u.what, u.namespace) for u in view.unreadable}
    assert {("MPIJobs", "team-b"), ("pods", "team-b"), ("events", "team-b"), ("resourcequotas", "team-b"),
            ("nodes", None)} == refused
    text = view.text()
    assert "cannot read MPIJobs in team-b (403): their jobs are not listed" in text
    assert "cannot read nodes across the cluster (403): no GPU capacity by node" in text
    assert "a-wait: no estimate: the nodes' GPU capacity is not readable" in text
    # without namespaces: the cluster-wide list is refused, so her context's namespace, said so
    view = collect(team, ALICE).view()
    assert view.scope == "namespaces" and view.namespaces == ["team-a"]
    assert ("MPIJobs", None) in {(u.what, u.namespace) for u in view.unreadable}
    assert rows(view)["a-run"]["can_cancel"]


def test_stop_is_offered_and_allowed_only_where_rbac_lets_the_delete_through(team, monkeypatch):
    thread, tmp = team
    assert not any(j["can_cancel"] for j in rows(collect(team, VIEWER).view()).values())
    monkeypatch.setenv("KUBECONFIG", str(kubeconfig_for(thread, tmp, ALICE)))
    with pytest.raises(TeamPermissionError, match="may not delete MPIJobs in namespace 'team-b'"):
        stop_team_job("team-b", "b-run", "b-run")
    with pytest.raises(TeamConfirmationError, match="confirm='b-ru': repeat the job's name"):
        stop_team_job("team-b", "b-run", "b-ru")
    assert thread.call(thread.emulator.get, MPIJOBS, "team-b", "b-run") is not None
    monkeypatch.setenv("KUBECONFIG", str(kubeconfig_for(thread, tmp, LEAD)))
    assert stop_team_job("team-b", "b-run", "team-b/b-run")["stopped"]
    assert thread.call(thread.emulator.get, MPIJOBS, "team-b", "b-run") is None


def test_a_watching_view_follows_changes_without_listing_again(team):
    thread, _ = team
    collector = collect(team, LEAD, watch=True)
    try:
        collector.view()
        lists = [p for m, p in thread.emulator.served if m == "GET" and "watch=" not in p and "/log" not in p]
        thread.call(thread.emulator.create, MPIJOBS, "team-a", mpijob("team-a", "a-new", "erin"))
        deadline = time.monotonic() + 10
        while "a-new" not in rows(collector.view()):
            assert time.monotonic() < deadline, "the new job never reached the view"
            time.sleep(0.05)
        t0 = time.thread_time()
        for _ in range(10):
            collector.view()
        assert (time.thread_time() - t0) / 10 < 0.05
        again = [p for m, p in thread.emulator.served if m == "GET" and "watch=" not in p and "/log" not in p]
        assert again == lists, "a refresh listed again instead of reading the watched state"
    finally:
        collector.close()


def test_cli_jobs_list_team_prints_the_table_and_json(team, monkeypatch, capsys):
    thread, tmp = team
    monkeypatch.setenv("KUBECONFIG", str(kubeconfig_for(thread, tmp, ALICE)))
    monkeypatch.setenv("LANENB_USER", "alice")
    assert main(["jobs", "list", "--team"]) == 0
    out = capsys.readouterr().out
    assert "lanenb jobs of the team (team-a)" in out
    assert "a-wait  carol" in out and "alice (you)" in out and "b-run" not in out
    assert "pending: Unschedulable: insufficient nvidia.com/gpu on 2 nodes" in out
    assert main(["jobs", "list", "--team", "--namespace", "team-b", "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["jobs"] == [] and data["unreadable"][0]["what"] == "MPIJobs"
    assert main(["jobs", "list", "--namespace", "team-b"]) == 2


def test_cli_cancel_team_deletes_a_teammates_job_only_where_rbac_allows_and_when_confirmed(team, monkeypatch, capsys):
    thread, tmp = team
    monkeypatch.setenv("KUBECONFIG", str(kubeconfig_for(thread, tmp, ALICE)))
    assert main(["jobs", "cancel", "--team", "team-b/b-run", "--confirm", "b-run"]) == 2
    assert "may not delete MPIJobs in namespace 'team-b'" in capsys.readouterr().err
    monkeypatch.setenv("KUBECONFIG", str(kubeconfig_for(thread, tmp, LEAD)))
    assert main(["jobs", "cancel", "--team", "team-b/b-run"]) == 2
    assert "add --confirm b-run" in capsys.readouterr().err
    assert main(["jobs", "cancel", "--team", "b-run", "--confirm", "b-run"]) == 2
    assert "'b-run': give the team view's NAMESPACE/NAME" in capsys.readouterr().err
    assert main(["jobs", "cancel", "b-run", "--confirm", "b-run"]) == 2  # one's own jobs need no --confirm
    assert thread.call(thread.emulator.get, MPIJOBS, "team-b", "b-run") is not None
    assert main(["jobs", "cancel", "--team", "team-b/b-run", "--confirm", "b-run"]) == 0
    assert "team-b/b-run: deleted" in capsys.readouterr().out
    assert thread.call(thread.emulator.get, MPIJOBS, "team-b", "b-run") is None


def test_submit_labels_the_job_with_the_submitters_name_as_a_valid_label(team, monkeypatch):
    from lanenb.backends.kubernetes.backend import KubernetesBackend
    from lanenb.contract.spec import TrainSpec

    thread, tmp = team
    monkeypatch.setenv("JUPYTERHUB_USER", "Erin.O'Neil@example.com")
    monkeypatch.delenv("LANENB_USER", raising=False)
    backend = KubernetesBackend(kubeconfig=kubeconfig_for(thread, tmp, LEAD))
    backend.submit(TrainSpec(dataset="/data/t", backend="kubernetes", image="img:1", name="erin-1",
                             namespace="team-a", volumes=["data:/data"]))
    meta = thread.call(thread.emulator.get, MPIJOBS, "team-a", "erin-1")["metadata"]
    assert meta["labels"]["lanenb.io/user"] == "Erin.O_Neil_example.com"
    assert meta["annotations"]["lanenb.io/user"] == "Erin.O'Neil@example.com"
    view = TeamCollector(backend.clients(), ["team-a"], user="Erin.O'Neil@example.com").start(watch=False).view()
    assert rows(view)["erin-1"]["user"] == "Erin.O'Neil@example.com" and rows(view)["erin-1"]["mine"]


@pytest.mark.parametrize("name, label", [
    ("alice", "alice"), ("alice@example.com", "alice_example.com"), ("-bob-", "bob"), ("jürgen", "j_rgen"),
    ("@@@", "unknown"), ("a" * 70, "a" * 63), ("x" * 62 + "-y", "x" * 62),
])
def test_user_names_become_valid_label_values(name, label):
    assert user_label_value(name) == label


def test_the_submitter_is_lanenb_user_then_the_hub_user_then_the_os_account():
    assert submitter({"LANENB_USER": "svc", "JUPYTERHUB_USER": "hub"}) == "svc"
    assert submitter({"JUPYTERHUB_USER": "hub"}) == "hub"
    assert submitter({}) not in ("", None)


def test_many_distinct_namespace_lists_keep_a_bounded_pool_of_watching_collectors(team, monkeypatch):
    """Issue 43: every distinct ?namespace= list started a collector (~7 threads, 5 watches, kept
    600 s): 30 requests added 210 threads. Lists are sorted and capped, the pool bounded."""
    import threading

    import lanenb.team as team_module
    from lanenb.errors import UserError

    thread, tmp = team
    monkeypatch.setenv("KUBECONFIG", str(kubeconfig_for(thread, tmp, LEAD)))
    team_module.close_shared()
    before = threading.active_count()
    try:
        a = team_module.shared_collector(namespaces=["team-b", "team-a"])
        assert team_module.shared_collector(namespaces=["team-a", "team-b", "team-a"]) is a  # one set, one collector
        made = [team_module.shared_collector(namespaces=["team-a", f"extra-{i}"]) for i in range(8)]
        time.sleep(0.5)
        full = threading.active_count()  # the pool at its size
        made += [team_module.shared_collector(namespaces=["team-a", f"extra-{i}"]) for i in range(8, 30)]
        assert len(team_module._SHARED) == team_module.MAX_SHARED
        assert not a.watching and not made[0].watching and made[-1].watching  # the oldest were closed
        deadline = time.monotonic() + 10
        while threading.active_count() > full + 2:  # closed collectors' threads end: no growth per request
            assert time.monotonic() < deadline, (before, full, threading.active_count())
            time.sleep(0.1)
        with pytest.raises(UserError, match=r"namespaces: 33 given, at most 32"):
            team_module.shared_collector(namespaces=[f"ns-{i}" for i in range(33)])
        with pytest.raises(UserError, match=r"namespace"):
            team_module.shared_collector(namespaces=["Bad_NS"])
    finally:
        team_module.close_shared()


def test_a_team_stop_never_deletes_a_job_that_took_the_name_or_another_tools_mpijob(team, monkeypatch):
    """Issue 43: without --uid, a stop deleted whichever MPIJob held the name by then; a 409 still
    answered stopped: True; an MPIJob lanenb did not start could be deleted too."""
    thread, tmp = team
    monkeypatch.setenv("KUBECONFIG", str(kubeconfig_for(thread, tmp, LEAD)))
    old_uid = thread.call(thread.emulator.get, MPIJOBS, "team-b", "b-run")["metadata"]["uid"]
    thread.call(thread.emulator.delete, MPIJOBS, "team-b", "b-run")
    thread.call(thread.emulator.create, MPIJOBS, "team-b", mpijob("team-b", "b-run", "frank"))  # a new job, same name
    done = stop_team_job("team-b", "b-run", "b-run", uid=old_uid)
    assert done["stopped"] is False and "belongs to another job now" in done["reason"]
    assert thread.call(thread.emulator.get, MPIJOBS, "team-b", "b-run") is not None  # the newcomer is untouched
    gone = stop_team_job("team-b", "no-such", "no-such")
    assert gone["stopped"] is False and "does not exist" in gone["reason"]
    foreign = mpijob("team-b", "their-run", "frank")
    foreign["metadata"]["labels"]["app.kubernetes.io/managed-by"] = "kubeflow-pipelines"
    thread.call(thread.emulator.create, MPIJOBS, "team-b", foreign)
    with pytest.raises(TeamPermissionError, match="was not started by lanenb"):
        stop_team_job("team-b", "their-run", "their-run")
    assert thread.call(thread.emulator.get, MPIJOBS, "team-b", "their-run") is not None
