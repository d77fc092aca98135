"""Safe extraction: hostile zip and tar members are refused before anything is written."""

from __future__ import annotations

import io
import os
import tarfile
import zipfile
from pathlib import Path

import pytest
from fetch_support import LoopbackServer, malicious_tar, malicious_zip

from lanenb_trainer.datasets import UnsafeArchiveError, fetch_dataset
from lanenb_trainer.datasets.archives import extract
from lanenb_trainer.datasets.progress import make_progress

BARS = make_progress(False)


def write(tmp_path: Path, name: str, data: bytes) -> Path:
    path = tmp_path / name
    path.write_bytes(data)
    return path


def tree(path: Path) -> list[str]:
    return sorted(str(p.relative_to(path)) for p in path.rglob("*")) if path.exists() else []


@pytest.mark.parametrize("kind, member", [
    ("dotdot", "clips/../../escaped.txt"),
    ("absolute", "/tmp/lanenb-absolute-escape.txt"),
    ("symlink", "clips/link"),
    ("device", "clips/dev"),
])
def test_a_hostile_zip_member_refuses_the_whole_archive(kind, member, tmp_path):
    dest = tmp_path / "box" / "dest"
    with pytest.raises(UnsafeArchiveError, match=rf"evil\.zip: .*{member!r}".replace("/", r"/")):
        extract(write(tmp_path, "evil.zip", malicious_zip(kind)), "zip", dest, bar_factory=BARS)
    assert tree(dest) == []  # not even the harmless member before it
    assert tree(tmp_path / "box") == ["dest"] and not Path("/tmp/lanenb-absolute-escape.txt").exists()


@pytest.mark.parametrize("kind, member", [
    ("dotdot", "../escaped.txt"),
    ("absolute", "/tmp/lanenb-absolute-escape.txt"),
    ("symlink", "list/link"),
    ("hardlink", "list/passwd"),
    ("fifo", "list/pipe"),
    ("hardlink-through-symlink", "list/alias"),
    ("hardlink-to-nothing", "list/ghost"),
])
def test_a_hostile_tar_member_refuses_the_whole_archive(kind, member, tmp_path):
    dest = tmp_path / "box" / "dest"
    with pytest.raises(UnsafeArchiveError, match=rf"evil\.tar\.gz: .*{member!r}"):
        extract(write(tmp_path, "evil.tar.gz", malicious_tar(kind)), "tar", dest, bar_factory=BARS)
    assert tree(dest) == [] and tree(tmp_path / "box") == ["dest"]
    assert not Path("/tmp/lanenb-absolute-escape.txt").exists()


def test_links_that_stay_inside_are_extracted_as_links(tmp_path):
    import stat

    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as zf:
        zf.writestr("a/data.txt", "x")
        info = zipfile.ZipInfo("b/link")
        info.external_attr = (stat.S_IFLNK | 0o777) << 16
        zf.writestr(info, "../a/data.txt")
    dest = tmp_path / "d"
    extract(write(tmp_path, "ok.zip", buf.getvalue()), "zip", dest, bar_factory=BARS)
    assert os.readlink(dest / "b" / "link") == "../a/data.txt" and (dest / "b" / "link").read_text() == "x"


def test_a_tar_hard_link_to_a_file_stored_before_it_is_extracted_as_a_link(tmp_path):
    import tarfile

    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as tf:
        data = tarfile.TarInfo("./clips/0/20.jpg")
        data.size = 3
        tf.addfile(data, io.BytesIO(b"jpg"))
        same = tarfile.TarInfo("clips/1/20.jpg")
        same.type, same.linkname = tarfile.LNKTYPE, "./clips/0/20.jpg"
        tf.addfile(same)
    dest = tmp_path / "d"
    extract(write(tmp_path, "ok.tar", buf.getvalue()), "tar", dest, bar_factory=BARS)
    first, second = dest / "clips" / "0" / "20.jpg", dest / "clips" / "1" / "20.jpg"
    assert second.read_bytes() == b"jpg" and os.stat(first).st_ino == os.stat(second).st_ino


def test_a_zip_member_written_through_a_symlinked_folder_is_refused(tmp_path):
    """An in-tree link to a folder that is itself outside (made by an earlier archive) is caught
    by the real-path check at write time."""
    dest = tmp_path / "d"
    (dest).mkdir()
    outside = tmp_path / "outside"
    outside.mkdir()
    os.symlink(outside, dest / "clips")
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as zf:
        zf.writestr("clips/x.txt", "pwned")
    with pytest.raises(UnsafeArchiveError, match=r"'clips/x\.txt' would be written through a link outside"):
        extract(write(tmp_path, "t.zip", buf.getvalue()), "zip", dest, bar_factory=BARS)
    assert list(outside.iterdir()) == []


def test_a_malicious_train_archive_stops_the_fetch_and_is_deleted(archives, tmp_path):
    srv = LoopbackServer({**archives, "train_set.zip": malicious_zip("dotdot")}).start()
    try:
        with pytest.raises(UnsafeArchiveError,
                           match=r"train_set\.zip: member 'clips/\.\./\.\./escaped\.txt' climbs out"):
            fetch_dataset("tusimple", tmp_path / "t", parts=["train"], mirrors=[srv.url], default_urls=False,
                          progress=False)
    finally:
        srv.stop()
    assert sorted(p.name for p in tmp_path.iterdir()) == []  # no dataset, no staging, no archive
    assert not (tmp_path.parent / "escaped.txt").exists()


def test_tar_archives_extract_with_their_folders(tmp_path):
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz") as tf:
        data = b"/driver_23_30frame/a.MP4/00000.jpg\n"
        info = tarfile.TarInfo("list/test.txt")
        info.size = len(data)
        tf.addfile(info, io.BytesIO(data))
    dest = tmp_path / "d"
    extract(write(tmp_path, "list.tar.gz", buf.getvalue()), "tar", dest, bar_factory=BARS)
    assert (dest / "list" / "test.txt").read_bytes() == data


# ---------------------------------------------------------------- issue 31, finding 7: chained links
def _zip_with_links(members: list[tuple[str, str | None]]) -> bytes:
    """A zip of ``(name, link target)`` members; a None target makes a small file."""
    import stat

    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as zf:
        for name, target in members:
            if target is None:
                zf.writestr(name, "data")
                continue
            info = zipfile.ZipInfo(name)
            info.external_attr = (stat.S_IFLNK | 0o777) << 16
            zf.writestr(info, target)
    return buf.getvalue()


def _tar_with_links(members: list[tuple[str, str | None]]) -> bytes:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz") as tf:
        for name, target in members:
            info = tarfile.TarInfo(name)
            if target is None:
                info.size = 4
                tf.addfile(info, io.BytesIO(b"data"))
            else:
                info.type, info.linkname = tarfile.SYMTYPE, target
                tf.addfile(info)
    return buf.getvalue()


CHAINS = {
    # the reported one: each target stays inside as text, the second one climbs out through the first
    "through-a-link": ([("clips/ok.txt", None), ("d/l", ".."), ("d/l/d/l/x", "../../../..")], "d/l/d/l/x"),
    # a link made harmless-looking first, then a later link turns its path into a way out
    "later-link": ([("clips/ok.txt", None), ("d/a", "q/../.."), ("d/q", "..")], "d/a"),
    # a loop of links is refused, not followed forever
    "loop": ([("a", "b/x"), ("b", "a/y")], None),
}


@pytest.mark.parametrize("fmt", ["zip", "tar"])
@pytest.mark.parametrize("chain", sorted(CHAINS))
def test_chained_links_that_leave_the_destination_refuse_the_archive(fmt, chain, tmp_path):
    members, named = CHAINS[chain]
    data = _zip_with_links(members) if fmt == "zip" else _tar_with_links(members)
    archive = write(tmp_path, f"chain.{'zip' if fmt == 'zip' else 'tar.gz'}", data)
    dest = tmp_path / "box" / "dest"
    with pytest.raises(UnsafeArchiveError, match=rf"chain\.(zip|tar\.gz): .*{named!r}" if named else "loop of links"):
        extract(archive, fmt, dest, bar_factory=BARS)
    assert tree(dest) == []  # refused before anything was written
    for path in [dest, *dest.rglob("*")] if dest.exists() else []:
        assert os.path.realpath(path).startswith(os.path.realpath(dest)), f"{path} leads outside"


@pytest.mark.parametrize("fmt", ["zip", "tar"])
def test_links_through_links_that_stay_inside_still_extract(fmt, tmp_path):
    members = [("a/data.txt", None), ("b", "a"), ("c/link", "../b/data.txt")]
    data = _zip_with_links(members) if fmt == "zip" else _tar_with_links(members)
    dest = tmp_path / "d"
    extract(write(tmp_path, f"ok.{'zip' if fmt == 'zip' else 'tar.gz'}", data), fmt, dest, bar_factory=BARS)
    assert (dest / "c" / "link").read_text() == "data" and os.readlink(dest / "b") == "a"


def test_a_link_leaving_through_a_link_already_in_the_destination_is_removed_and_refused(tmp_path):
    """The archive alone looks safe; the destination already holds ``up -> ..``: the on-disk
    check after the links are made catches it and leaves none of them behind."""
    dest = tmp_path / "box" / "dest"
    dest.mkdir(parents=True)
    os.symlink("..", dest / "up")
    data = _zip_with_links([("x.txt", None), ("esc", "up/..")])
    with pytest.raises(UnsafeArchiveError, match=r"link 'esc' resolves outside the destination on disk"):
        extract(write(tmp_path, "t.zip", data), "zip", dest, bar_factory=BARS)
    assert not os.path.lexists(dest / "esc")
