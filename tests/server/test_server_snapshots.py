"""Snapshots through the server extension with the real restic store: list (newest first, with
the job that made it), diff, restore into a new directory of the server's root (never over
existing data), and the 4xx answers for bad ids and targets."""

from __future__ import annotations

import json
import shutil

import pytest
from server_support import body_of
from tornado.httpclient import HTTPClientError

import lanenb.snapshots as snaps


@pytest.fixture
def versions(tmp_path):
    if shutil.which("restic") is None:
        pytest.skip("restic is not installed (Debian package restic; scripts/setup.sh)")
    volume = tmp_path / "dataset"
    volume.mkdir()
    (volume / "a.txt").write_text("one")
    first = snaps.create(str(volume), {"job": "lane-1"}, name="v1")
    (volume / "b.txt").write_text("two two")
    (volume / "a.txt").write_text("changed")
    second = snaps.create(str(volume), name="v2")
    return volume, first, second


async def test_snapshots_are_listed_newest_first_with_their_job(jp_fetch, versions):
    volume, first, second = versions
    listed = body_of(await jp_fetch("lanenb", "snapshots"))["snapshots"]
    assert [s["id"] for s in listed] == [second.id, first.id]
    assert listed[1]["job"] == "lane-1" and listed[0]["job"] is None
    assert listed[0]["volume"] == str(volume) and listed[0]["name"] == "v2"
    only = body_of(await jp_fetch("lanenb", "snapshots", params={"job": "lane-1"}))["snapshots"]
    assert [s["id"] for s in only] == [first.id]


async def test_diff_names_the_added_and_changed_files(jp_fetch, versions):
    _, first, second = versions
    diff = body_of(await jp_fetch("lanenb", "snapshots", "diff", params={"a": first.id, "b": second.id}))
    changes = {c["path"].lstrip("/"): c["change"] for c in diff["changes"]}
    assert changes == {"b.txt": "added", "a.txt": "changed"}
    assert "1 added, 0 removed, 1 changed" in diff["summary"]


async def test_restore_goes_into_a_new_directory_of_the_server_root(jp_fetch, jp_root_dir, versions):
    _, first, _ = versions
    reply = body_of(await jp_fetch("lanenb", "snapshots", first.id, "restore", method="POST",
                                   body=json.dumps({"new_volume": "restored/v1"})))
    target = jp_root_dir / "restored" / "v1"
    assert reply == {"id": first.id, "volume": str(target.resolve())}
    assert (target / "a.txt").read_text() == "one" and not (target / "b.txt").exists()
    with pytest.raises(HTTPClientError) as err:  # never over existing data
        await jp_fetch("lanenb", "snapshots", first.id, "restore", method="POST",
                       body=json.dumps({"new_volume": "restored/v1"}))
    assert err.value.code == 409 and "already exists" in json.loads(err.value.response.body)["message"]
    assert (target / "a.txt").read_text() == "one"


@pytest.mark.parametrize("snapshot, body, status, message", [
    ("first", {"new_volume": "../outside"}, 400, "must be a new directory inside the server's root"),
    ("first", {"new_volume": "/tmp/elsewhere"}, 400, "must be a new directory inside the server's root"),
    ("first", {"new_volume": ""}, 400, "new_volume='': give the name of a new directory"),
    ("first", {}, 400, "new_volume=None"),
    ("deadbeef", {"new_volume": "x"}, 404, "deadbeef"),
])
async def test_bad_restores_are_refused_with_a_message(jp_fetch, jp_root_dir, versions, snapshot, body, status,
                                                      message):
    snap_id = versions[1].id if snapshot == "first" else snapshot
    with pytest.raises(HTTPClientError) as err:
        await jp_fetch("lanenb", "snapshots", snap_id, "restore", method="POST", body=json.dumps(body))
    assert err.value.code == status and message in json.loads(err.value.response.body)["message"]
    assert sorted(p.name for p in jp_root_dir.iterdir()) == []


async def test_diff_needs_two_known_ids(jp_fetch, versions):
    with pytest.raises(HTTPClientError) as err:
        await jp_fetch("lanenb", "snapshots", "diff", params={"a": versions[1].id})
    assert err.value.code == 400 and "diff needs two snapshot ids" in json.loads(err.value.response.body)["message"]
    with pytest.raises(HTTPClientError) as err:
        await jp_fetch("lanenb", "snapshots", "diff", params={"a": versions[1].id, "b": "nope"})
    assert err.value.code == 404
