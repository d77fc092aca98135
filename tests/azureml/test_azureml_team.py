"""The team view's AzureML part: a workspace's lanenb jobs (everyone's) beside the cluster's,
read through the SDK against recorded HTTP (``team_jobs.json``: two pages, a job lanenb did not
submit, a queued one, a failed one on a deleted cluster)."""

from __future__ import annotations

import pytest
from azureml_replay import WORKSPACE

from lanenb.backends.azureml.workspace import WorkspaceRef
from lanenb.errors import UserError
from lanenb.registry.jobs import JobRegistry
from lanenb.team import close_shared, team_view
from lanenb.team.azureml import WorkspaceJobs, configured_workspace


@pytest.fixture
def no_cluster(tmp_path, monkeypatch):
    monkeypatch.setenv("KUBECONFIG", str(tmp_path / "no-kubeconfig"))
    yield
    close_shared()


def _reader(replayed, recording: str) -> tuple[WorkspaceJobs, object]:
    opts, http = replayed(recording)
    opts.pop("poll_interval")
    return WorkspaceJobs(WorkspaceRef(**WORKSPACE), client_kwargs=opts), http


def test_a_workspaces_lanenb_jobs_are_rows_with_user_state_size_and_why_they_wait(replayed, no_cluster):
    reader, http = _reader(replayed, "team_jobs.json")
    JobRegistry().add("lane-bob-1", "azureml", {"name": "lane-bob-1", "backend": "azureml"}, None)  # mine
    view = team_view(azureml=reader)
    http.assert_done()  # both pages read; the GPU cluster's size asked once for two jobs
    rows = {j.name: j for j in view.jobs}
    assert sorted(rows) == ["lane-alice-2", "lane-bob-1", "lane-dave-1"]  # not the job lanenb did not submit
    alice, bob, dave = rows["lane-alice-2"], rows["lane-bob-1"], rows["lane-dave-1"]
    assert (alice.user, alice.state, alice.size, alice.gpus_held, alice.mine) == (
        "Alice Example", "running", "16 ranks (2x8 GPU)", 16, False)
    assert (bob.user, bob.mine, bob.status_text()) == (
        "Bob Builder", True, "pending: waiting for nodes of the compute cluster (its size or the subscription's quota)")
    assert (dave.state, dave.gpus, dave.run_s(0)) == ("failed", 0, 1200.0)  # its cluster is gone: size unknown
    assert dave.status_text() == "failed: AzureML reports Failed: rank 1 exited with code 1"
    assert not any(j.can_cancel for j in view.jobs)  # read-only: Azure RBAC cannot be asked beforehand
    text = view.text()
    assert "AzureML workspace lanes-ws" in text and "Bob Builder (you)" in text and "azureml:lanes-ws" in text
    # no cluster configured: the view says so instead of failing
    assert any(u.what == "MPIJobs" and "not reachable" in u.text() for u in view.unreadable)
    # drawn again within the TTL: from memory (the recording has nothing more to answer)
    assert [j.name for j in team_view(azureml=reader).jobs] == [j.name for j in view.jobs]


def test_a_workspace_that_refuses_the_list_is_named_under_the_table(replayed, no_cluster):
    reader, http = _reader(replayed, "team_jobs_forbidden.json")
    view = team_view(azureml=reader)
    http.assert_done()
    assert view.jobs == []
    (refused,) = [u for u in view.unreadable if u.what == "AzureML jobs"]
    assert refused.text() == "cannot read AzureML jobs in azureml:lanes-ws (403): the workspace's jobs are not listed"
    assert "AuthorizationFailed" not in refused.text() and "jobs/read" in refused.message
    assert refused.text() in view.text()


def test_the_workspace_comes_from_where_the_azureml_backend_finds_it(monkeypatch, tmp_path, no_cluster):
    assert configured_workspace() is None
    with pytest.raises(UserError, match="AZUREML_WORKSPACE_NAME"):
        team_view(azureml=True)
    monkeypatch.setenv("AZURE_SUBSCRIPTION_ID", WORKSPACE["subscription_id"])
    monkeypatch.setenv("AZURE_RESOURCE_GROUP", WORKSPACE["resource_group"])
    monkeypatch.setenv("AZUREML_WORKSPACE_NAME", WORKSPACE["workspace"])
    found = configured_workspace()
    assert found is not None and found.to_dict() == WORKSPACE and "AZUREML_WORKSPACE_NAME" in found.found_in
