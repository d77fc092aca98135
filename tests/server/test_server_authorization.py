"""The server asks Jupyter's ``Authorizer`` before every lanenb route, as Jupyter's own handlers
do: a read-only user (JupyterHub's read-only sharing) sees jobs and snapshots but cannot stop a
job or restore a snapshot; a restore also needs write access to the server's files; and a
restore never lands in a hidden folder (``.ipython/profile_default/startup`` would run as code
in every new kernel) unless the server allows hidden files."""

from __future__ import annotations

import json
import shutil

import pytest
from jupyter_server.auth.authorizer import Authorizer
from load_jobs import record_job
from server_support import body_of
from tornado.httpclient import HTTPClientError

import lanenb.snapshots as snaps


class ReadOnlyAuthorizer(Authorizer):
    """A viewer: may read every resource, write or execute none (JupyterHub read-only sharing)."""

    def is_authorized(self, handler, user, action, resource) -> bool:
        return action == "read"


class NoFileWritesAuthorizer(Authorizer):
    """May do anything but write the server's files (``contents``)."""

    def is_authorized(self, handler, user, action, resource) -> bool:
        return not (resource == "contents" and action == "write")


def _config(**server) -> dict:
    return {"ServerApp": {"jpserver_extensions": {"lanenb": True}, **server}}


@pytest.fixture
def snapshot(tmp_path):
    if shutil.which("restic") is None:
        pytest.skip("restic is not installed (Debian package restic; scripts/setup.sh)")
    volume = tmp_path / "dataset"
    volume.mkdir()
    (volume / "a.txt").write_text("one")
    return snaps.create(str(volume), {"job": "lane-1"}, name="v1")


async def _refused(fetch, *parts, **kwargs) -> tuple[int, str]:
    with pytest.raises(HTTPClientError) as err:
        await fetch(*parts, **kwargs)
    return err.value.code, json.loads(err.value.response.body)["message"]


class TestReadOnlyUser:
    @pytest.fixture
    def jp_server_config(self):
        return _config(authorizer_class=ReadOnlyAuthorizer)

    async def test_a_viewer_reads_jobs_and_snapshots(self, jp_fetch, lanenb_home, snapshot):
        record_job(lanenb_home, "done", state="succeeded", running_here=False)
        (lanenb_home / "runs" / "done" / "job.log").write_text("[1,0]<stdout>:hello\n")
        assert [j["name"] for j in body_of(await jp_fetch("lanenb", "jobs"))["jobs"]] == ["done"]
        assert body_of(await jp_fetch("lanenb", "jobs", "done"))["name"] == "done"
        lines = body_of(await jp_fetch("lanenb", "jobs", "done", "updates"))["updates"]
        assert any(u.get("line", {}).get("text") == "hello" for u in lines)
        assert body_of(await jp_fetch("lanenb", "jobs", "done", "metrics"))["name"] == "done"
        listed = body_of(await jp_fetch("lanenb", "snapshots"))["snapshots"]
        assert [s["id"] for s in listed] == [snapshot.id]
        diff = body_of(await jp_fetch("lanenb", "snapshots", "diff", params={"a": snapshot.id, "b": snapshot.id}))
        assert diff["changes"] == []

    async def test_a_viewer_cannot_stop_a_job(self, jp_fetch):
        code, message = await _refused(jp_fetch, "lanenb", "jobs", "lane-x", "stop", method="POST",
                                       body=json.dumps({"confirm": "lane-x"}))
        assert code == 403 and "not authorized to write on resource: lanenb" in message

    async def test_a_viewer_cannot_restore_a_snapshot(self, jp_fetch, jp_root_dir, snapshot):
        code, message = await _refused(jp_fetch, "lanenb", "snapshots", snapshot.id, "restore", method="POST",
                                       body=json.dumps({"new_volume": "restored"}))
        assert code == 403 and "not authorized to write" in message
        assert list(jp_root_dir.iterdir()) == []


class TestUserWhoMayNotWriteFiles:
    @pytest.fixture
    def jp_server_config(self):
        return _config(authorizer_class=NoFileWritesAuthorizer)

    async def test_a_restore_needs_write_access_to_the_files(self, jp_fetch, jp_root_dir, snapshot):
        code, message = await _refused(jp_fetch, "lanenb", "snapshots", snapshot.id, "restore", method="POST",
                                       body=json.dumps({"new_volume": "restored"}))
        assert code == 403 and "resource: contents" in message
        assert list(jp_root_dir.iterdir()) == []
        code, message = await _refused(jp_fetch, "lanenb", "jobs", "lane-x", "stop", method="POST",
                                       body=json.dumps({"confirm": "lane-x"}))
        assert code == 404 and "lane-x" in message  # a stop is lanenb's own write: let through


@pytest.mark.parametrize("new_volume", [".ipython/profile_default/startup", "notes/.hidden/v1"])
async def test_a_restore_into_a_hidden_path_is_refused_by_default(jp_fetch, jp_root_dir, snapshot, new_volume):
    code, message = await _refused(jp_fetch, "lanenb", "snapshots", snapshot.id, "restore", method="POST",
                                   body=json.dumps({"new_volume": new_volume}))
    assert code == 400
    assert f"{new_volume!r} is a hidden path" in message and "allow_hidden is False" in message
    assert list(jp_root_dir.iterdir()) == []


async def test_a_visible_link_to_a_hidden_folder_is_refused_too(jp_fetch, jp_root_dir, snapshot):
    (jp_root_dir / ".ipython").mkdir()
    (jp_root_dir / "profile").symlink_to(jp_root_dir / ".ipython")
    code, message = await _refused(jp_fetch, "lanenb", "snapshots", snapshot.id, "restore", method="POST",
                                   body=json.dumps({"new_volume": "profile/startup"}))
    assert code == 400 and "'.ipython/startup' is a hidden path" in message
    assert list((jp_root_dir / ".ipython").iterdir()) == []


class TestServerThatAllowsHiddenFiles:
    @pytest.fixture
    def jp_server_config(self):
        return {**_config(), "ContentsManager": {"allow_hidden": True}}

    async def test_a_hidden_target_is_restored(self, jp_fetch, jp_root_dir, snapshot):
        reply = body_of(await jp_fetch("lanenb", "snapshots", snapshot.id, "restore", method="POST",
                                       body=json.dumps({"new_volume": ".versions/v1"})))
        target = jp_root_dir / ".versions" / "v1"
        assert reply["volume"] == str(target.resolve()) and (target / "a.txt").read_text() == "one"
