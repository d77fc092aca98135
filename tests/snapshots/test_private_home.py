"""Issue 31, finding 9: ``$LANENB_HOME`` and every folder lanenb makes in it are owner-only
(0700), whoever makes them first and whatever the umask, and an existing folder is tightened."""

from __future__ import annotations

import os
import shutil
import stat
from pathlib import Path

import pytest

from lanenb.home import make_private_dir
from lanenb.snapshots.local import ResticStore


def _mode(path: Path) -> int:
    return stat.S_IMODE(os.lstat(path).st_mode)


@pytest.fixture
def umask_022():
    old = os.umask(0o022)  # the usual default: mkdir without a mode gives 0755
    yield
    os.umask(old)


def _open_folders(root: Path) -> list[str]:
    """Folders under ``root`` (itself included) that others may read or enter."""
    folders = [root, *(p for p in root.rglob("*") if p.is_dir() and not p.is_symlink())]
    return [f"{p} {oct(_mode(p))}" for p in folders if _mode(p) & 0o077]


def test_a_first_snapshot_makes_a_private_home(restic_installed, umask_022, lanenb_home, tmp_path):
    shutil.rmtree(lanenb_home, ignore_errors=True)  # a machine where lanenb never ran
    volume = tmp_path / "vol"
    volume.mkdir()
    (volume / "a.txt").write_text("x")
    ResticStore().create(volume, {"role": "run"})
    assert _mode(lanenb_home) == 0o700
    assert _open_folders(lanenb_home) == []


def test_a_home_made_open_by_an_older_lanenb_is_tightened_by_the_next_snapshot(restic_installed, umask_022,
                                                                                lanenb_home, tmp_path):
    for folder in (lanenb_home, lanenb_home / "snapshots"):
        folder.mkdir(exist_ok=True)
        os.chmod(folder, 0o755)
    volume = tmp_path / "vol"
    volume.mkdir()
    (volume / "a.txt").write_text("x")
    ResticStore().create(volume, {"role": "run"})
    assert [_mode(lanenb_home), _mode(lanenb_home / "snapshots"), _mode(lanenb_home / "snapshots" / "meta")] == \
        [0o700] * 3


def test_make_private_dir_tightens_the_folder_and_the_home_above_it(umask_022, lanenb_home):
    runs = lanenb_home / "runs"
    runs.mkdir(parents=True)
    (runs / "old").mkdir()
    for folder in (lanenb_home, runs, runs / "old"):
        os.chmod(folder, 0o755)
    make_private_dir(runs / "old")
    assert [_mode(lanenb_home), _mode(runs), _mode(runs / "old")] == [0o700] * 3


def test_make_private_dir_outside_the_home_tightens_only_the_folder_itself(umask_022, tmp_path):
    shared = tmp_path / "team-disk"
    run = shared / "run-1"
    run.mkdir(parents=True)
    os.chmod(shared, 0o755)
    os.chmod(run, 0o750)
    assert make_private_dir(run) == run
    assert (_mode(shared), _mode(run)) == (0o755, 0o700)  # the team's folder is not lanenb's to change


def test_make_private_dir_on_a_file_names_it(tmp_path):
    path = tmp_path / "a-file"
    path.write_text("x")
    with pytest.raises(NotADirectoryError, match="a-file"):
        make_private_dir(path)
