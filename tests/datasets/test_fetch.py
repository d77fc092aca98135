"""``fetch_dataset`` against a loopback HTTP server serving archives in the real TuSimple layout."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest
from fetch_support import LoopbackServer, closed_port_url, tusimple_archives

from lanenb.errors import UserError
from lanenb_trainer.data.check import check_dataset
from lanenb_trainer.datasets import (
    ChecksumError,
    CorruptArchiveError,
    DestinationError,
    IncompleteDatasetError,
    NetworkError,
    SourceNotFoundError,
    UnknownDatasetError,
    fetch_dataset,
)
from lanenb_trainer.datasets.fetch import RECORD


def fetch(server, to: Path, **kw):
    kw.setdefault("mirrors", [server.url] if server is not None else [])
    kw.setdefault("progress", False)
    return fetch_dataset("tusimple", to, default_urls=False, backoff=0.0, **kw)


def siblings(path: Path) -> list[str]:
    return sorted(p.name for p in path.parent.iterdir() if p.name != path.name)


def test_fetch_unpacks_the_official_archives_into_the_tusimple_layout_and_records_them(server, archives, tmp_path):
    to = tmp_path / "data" / "tusimple"
    result = fetch(server, to)
    assert sorted(p.name for p in to.iterdir()) == [
        RECORD, "clips", "label_data_0313.json", "label_data_0531.json", "label_data_0601.json",
        "test_label.json", "test_tasks_0627.json"]
    assert sorted(p.name for p in (to / "clips").iterdir()) == ["0313-1", "0530", "0531", "0601"]
    assert check_dataset(to) == []
    record = json.loads((to / RECORD).read_text())
    assert {a["filename"]: a["sha256"] for a in record["archives"]} == {
        name: hashlib.sha256(data).hexdigest() for name, data in archives.items()}
    assert {a["filename"]: a["size"] for a in result.archives} == {n: len(d) for n, d in archives.items()}
    assert siblings(to) == []  # archives deleted, no staging folder left


def test_a_complete_dataset_is_checked_not_fetched_again(server, tmp_path):
    to = tmp_path / "tusimple"
    fetch(server, to)
    before = len(server.requests)
    again = fetch(server, to)
    assert again.already_complete and len(server.requests) == before
    assert "nothing fetched" in str(again)


def test_one_part_fetches_only_its_archives(server, tmp_path):
    to = tmp_path / "test-only"
    fetch(server, to, parts=["test"])
    assert {name for name, _ in server.requests} == {"test_set.zip", "test_label.json"}
    assert (to / "test_label.json").is_file() and not list(to.glob("label_data_*.json"))


def test_a_train_archive_wrapped_in_one_folder_is_unwrapped(tusimple_tree, tmp_path):
    srv = LoopbackServer(tusimple_archives(tusimple_tree, wrap_train=True)).start()
    try:
        fetch(srv, tmp_path / "t", parts=["train"])
    finally:
        srv.stop()
    assert (tmp_path / "t" / "label_data_0313.json").is_file() and (tmp_path / "t" / "clips" / "0531").is_dir()
    assert not (tmp_path / "t" / "train_set").exists()


def test_a_connection_cut_mid_file_is_resumed_with_a_range_request(server, archives, tmp_path):
    server.faults.cut["train_set.zip"] = (10_000, 1)
    result = fetch(server, tmp_path / "t", parts=["train"])
    assert server.ranges("train_set.zip") == [None, "bytes=10000-"]
    assert result.archives[0]["sha256"] == hashlib.sha256(archives["train_set.zip"]).hexdigest()


def test_a_download_cut_every_time_keeps_its_part_and_the_next_fetch_resumes_it(server, archives, tmp_path):
    to = tmp_path / "t"
    server.faults.cut["train_set.zip"] = (7_000, 2)
    with pytest.raises(NetworkError, match=r"train_set\.zip.*resumes there") as err:
        fetch(server, to, parts=["train"], retries=1)
    assert isinstance(err.value, ConnectionError) and isinstance(err.value, UserError)
    part = tmp_path / ".t.downloads" / "train_set.zip.part"
    assert part.stat().st_size == 14_000 and not to.exists()
    fetch(server, to, parts=["train"])
    assert server.ranges("train_set.zip") == [None, "bytes=7000-", "bytes=14000-"]
    assert check_dataset(to) == []


def test_a_server_that_ignores_range_starts_the_file_over(server, tmp_path):
    cache = tmp_path / "dl"
    cache.mkdir()
    (cache / "train_set.zip.part").write_bytes(b"garbage that must not stay at the start")
    server.faults.ignore_range = True
    fetch(server, tmp_path / "t", parts=["train"], downloads=cache)
    assert server.ranges("train_set.zip") == ["bytes=39-"]
    assert check_dataset(tmp_path / "t") == []


def test_404_at_every_url_names_each_url_and_creates_nothing(tmp_path):
    empty = LoopbackServer({}).start()
    try:
        with pytest.raises(SourceNotFoundError, match=r"train_set\.zip: not found at any URL .*"
                                                      r"/train_set\.zip: HTTP 404") as err:
            fetch(empty, tmp_path / "t", parts=["train"])
    finally:
        empty.stop()
    assert isinstance(err.value, FileNotFoundError)
    assert not (tmp_path / "t").exists() and siblings(tmp_path / "t") == []


def test_a_404_mirror_falls_back_to_the_next_one(server, tmp_path):
    empty = LoopbackServer({}).start()
    try:
        fetch(None, tmp_path / "t", parts=["test"], mirrors=[empty.url, server.url])
    finally:
        empty.stop()
    assert [n for n, _ in empty.requests] == ["test_set.zip", "test_label.json"]
    assert (tmp_path / "t" / "test_label.json").is_file()


def test_no_network_is_a_network_error_naming_the_url(tmp_path):
    url = closed_port_url()
    with pytest.raises(NetworkError, match=rf"{url}/test_set\.zip: no connection .*[Rr]efused"):
        fetch(None, tmp_path / "t", parts=["test"], mirrors=[url], retries=0)


def test_a_wrong_checksum_deletes_the_download_and_says_both_digests(server, archives, tmp_path):
    pinned = {"datasets": {"tusimple": {"sha256": {"train_set.zip": "0" * 64}}}}
    with pytest.raises(ChecksumError, match=r"sha256 [0-9a-f]{64}, expected 0{64}"):
        fetch(server, tmp_path / "t", parts=["train"], config=pinned)
    assert siblings(tmp_path / "t") == [] and not (tmp_path / "t").exists()  # nothing kept
    digest = hashlib.sha256(archives["train_set.zip"]).hexdigest()
    good = {"datasets": {"tusimple": {"sha256": {"train_set.zip": digest}}}}
    assert fetch(server, tmp_path / "t", parts=["train"], config=good).archives[0]["url"].startswith(server.url)


def test_mirrors_and_pins_come_from_config_yaml_and_the_environment(server, archives, tmp_path, monkeypatch):
    home = tmp_path / "home"
    home.mkdir()
    sha = hashlib.sha256(archives["test_set.zip"]).hexdigest()
    (home / "config.yaml").write_text(f"datasets:\n  tusimple:\n    mirrors: [{server.url}]\n"
                                      f"    sha256:\n      test_set.zip: {sha}\n")
    monkeypatch.setenv("LANENB_HOME", str(home))
    empty = LoopbackServer({}).start()
    monkeypatch.setenv("LANENB_TUSIMPLE_MIRRORS", empty.url)
    try:
        fetch_dataset("tusimple", tmp_path / "t", parts=["test"], default_urls=False, progress=False)
    finally:
        empty.stop()
    assert [n for n, _ in empty.requests] == ["test_set.zip", "test_label.json"]  # env first, then config
    (home / "config.yaml").write_text("datasets:\n  tusimple:\n    mirrors: [ftp://nope]\n")
    with pytest.raises(UserError, match=r"mirror='ftp://nope'"):
        fetch_dataset("tusimple", tmp_path / "u", parts=["test"], default_urls=False, progress=False)


def test_a_truncated_archive_is_corrupt_deleted_and_nothing_is_moved_into_place(archives, tmp_path):
    srv = LoopbackServer({**archives, "train_set.zip": archives["train_set.zip"][:-200]}).start()
    try:
        with pytest.raises(CorruptArchiveError, match=r"train_set\.zip is not a readable zip archive"):
            fetch(srv, tmp_path / "t", parts=["train"])
    finally:
        srv.stop()
    assert not (tmp_path / "t").exists()
    assert siblings(tmp_path / "t") == []  # the bad archive deleted, its empty folder too


def test_extracted_data_failing_data_check_is_not_moved_into_place(archives, tmp_path):
    bad = archives["test_label.json"] + b'{"lanes": [], "h_samples": [10], "raw_file": "clips/none/20.jpg"}\n'
    srv = LoopbackServer({**archives, "test_label.json": bad}).start()
    try:
        with pytest.raises(IncompleteDatasetError, match=r"test_label\.json:\d+: image not found"):
            fetch(srv, tmp_path / "t", parts=["test"])
    finally:
        srv.stop()
    assert not (tmp_path / "t").exists() and siblings(tmp_path / "t") == [".t.downloads"]


def test_a_non_empty_incomplete_destination_is_refused_and_left_untouched(server, tmp_path):
    to = tmp_path / "mine"
    to.mkdir()
    (to / "notes.txt").write_text("my data")
    with pytest.raises(DestinationError, match=r"to='.*mine' is not empty and is not a complete tusimple"):
        fetch(server, to)
    assert [p.name for p in to.iterdir()] == ["notes.txt"] and server.requests == []


def test_an_empty_destination_directory_is_filled(server, tmp_path):
    to = tmp_path / "empty"
    to.mkdir()
    fetch(server, to, parts=["test"])
    assert (to / "test_label.json").is_file()


@pytest.mark.parametrize("name, kwargs, message", [
    ("kitti", {}, r"dataset='kitti': known datasets are tusimple, culane"),
    ("tusimple", {"parts": ["val"]}, r"part='val': tusimple has parts train, test"),
    ("tusimple", {"urls": {"train.zip": ["http://x/train.zip"]}}, r"unknown archive\(s\) train\.zip"),
    ("culane", {}, r"no URL for driver_23_30frame\.tar\.gz: CULane is published on Google Drive"),
])
def test_bad_requests_name_the_bad_value(name, kwargs, message, tmp_path):
    with pytest.raises(UserError, match=message):
        fetch_dataset(name, tmp_path / "x", progress=False, **kwargs)
    assert not (tmp_path / "x").exists()


def test_unknown_dataset_is_a_value_error():
    with pytest.raises(ValueError):
        fetch_dataset("nope", "/tmp/never", progress=False)
    assert issubclass(UnknownDatasetError, ValueError)


def test_progress_callback_sees_download_and_extract_of_every_archive(server, archives, tmp_path):
    seen: dict[tuple[str, str], tuple[int, int | None]] = {}
    def progress(stage: str, name: str, done: int, total: int | None) -> None:
        seen[stage, name] = (done, total)

    fetch(server, tmp_path / "t", progress=progress)
    for name, data in archives.items():
        assert seen[("download", name)] == (len(data), len(data))
        assert seen[("extract", name)][0] == seen[("extract", name)][1]
