"""A full disk (a 2 MiB tmpfs): clear errors, partial downloads kept, nothing half-extracted."""

from __future__ import annotations

import io
import os
import zipfile

import pytest
from fetch_support import LoopbackServer

from lanenb_trainer.datasets import DiskFullError, fetch_dataset

BIG = 3 * 2**20  # more than the 2 MiB tmpfs


def fetch(srv, to, **kw):
    return fetch_dataset("tusimple", to, parts=["train"], mirrors=[srv.url], default_urls=False,
                         progress=False, backoff=0.0, **kw)


@pytest.fixture
def big_server(archives):
    srv = LoopbackServer({**archives, "train_set.zip": os.urandom(BIG)}).start()
    yield srv
    srv.stop()


def test_a_download_larger_than_the_free_space_is_refused_before_writing(big_server, small_disk):
    with pytest.raises(DiskFullError, match=r"no space left in .*small/\.t\.downloads: needs 3\.0 MiB more") as err:
        fetch(big_server, small_disk / "t")
    assert isinstance(err.value, OSError) and err.value.errno == 28
    assert list(small_disk.iterdir()) == []


def test_a_disk_that_fills_mid_download_keeps_the_part_for_later(big_server, small_disk):
    big_server.faults.no_length.add("train_set.zip")  # no Content-Length: no pre-check possible
    with pytest.raises(DiskFullError, match=r"no space left in .*\.t\.downloads.*partial download is kept"):
        fetch(big_server, small_disk / "t")
    part = small_disk / ".t.downloads" / "train_set.zip.part"
    assert 0 < part.stat().st_size <= 2 * 2**20 and not (small_disk / "t").exists()


def test_a_disk_that_fills_while_extracting_leaves_no_half_dataset(archives, small_disk, tmp_path):
    padded = io.BytesIO()
    with zipfile.ZipFile(io.BytesIO(archives["train_set.zip"])) as src, \
            zipfile.ZipFile(padded, "w", zipfile.ZIP_DEFLATED) as dst:
        for info in src.infolist():
            dst.writestr(info, src.read(info))
        dst.writestr("clips/0313-1/padding.bin", b"\0" * BIG)  # compresses to a few KiB
    srv = LoopbackServer({**archives, "train_set.zip": padded.getvalue()}).start()
    try:
        with pytest.raises(DiskFullError, match=r"while extracting into .*small/\.t\.fetch-.*archives are kept"):
            fetch(srv, small_disk / "t", downloads=tmp_path / "dl")
    finally:
        srv.stop()
    assert list(small_disk.iterdir()) == []  # no dataset, no staging folder
    assert (tmp_path / "dl" / "train_set.zip").is_file()  # the next fetch extracts without downloading
