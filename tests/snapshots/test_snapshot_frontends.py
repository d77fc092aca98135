"""``lanenb snap``, ``%lanesnap`` and ``SnapshotBrowser`` over the real local store."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from IPython.core.error import UsageError

import lanenb.snapshots as snaps
from lanenb.cli import main as cli_main

pytestmark = pytest.mark.usefixtures("restic_installed")


@pytest.fixture(scope="module")
def ip():
    from IPython import get_ipython
    from IPython.testing.globalipapp import start_ipython

    shell = start_ipython() or get_ipython()  # one shell per process: another test may have started it
    shell.run_line_magic("load_ext", "lanenb")
    return shell


@pytest.fixture
def two_versions(tmp_path: Path):
    vol = tmp_path / "data"
    vol.mkdir()
    (vol / "a.txt").write_text("one")
    first = snaps.create(vol, {"job": "lane-1", "accuracy": "0.9100"})
    (vol / "a.txt").write_text("one, then two")
    (vol / "b.txt").write_text("new")
    second = snaps.create(vol, {"job": "lane-2", "accuracy": "0.9350"})
    return vol, first, second


def test_cli_lists_diffs_restores_and_refuses_an_existing_target(two_versions, tmp_path, capsys):
    vol, first, second = two_versions
    assert cli_main(["snap", "list"]) == 0
    listing = capsys.readouterr().out
    assert first.id in listing and second.id in listing and "lane-2" in listing and "0.9350" in listing
    assert cli_main(["snap", "diff", first.id, second.id]) == 0
    out = capsys.readouterr().out
    assert "1 added, 0 removed, 1 changed" in out and "+ /b.txt" in out and "M /a.txt  3 B -> 13 B" in out
    assert cli_main(["snap", "restore", first.id, str(tmp_path / "v1")]) == 0
    assert (tmp_path / "v1" / "a.txt").read_text() == "one"
    assert cli_main(["snap", "restore", second.id, str(vol)]) == 2
    assert "already exists" in capsys.readouterr().err
    assert (vol / "a.txt").read_text() == "one, then two"
    assert cli_main(["snap", "show", "nothere"]) == 2
    assert "no local snapshot 'nothere'" in capsys.readouterr().err


def test_the_console_script_runs_snap(two_versions):
    _, first, _ = two_versions
    out = subprocess.run([sys.executable, "-m", "lanenb", "snap", "verify", first.id], capture_output=True, text=True)
    assert out.returncode == 0 and f"{first.id}: ok" in out.stdout


def test_lanesnap_magic_shows_diffs_and_restores(ip, two_versions, tmp_path, capsys):
    vol, first, second = two_versions
    ip.run_line_magic("lanesnap", f"diff {first.id} {second.id}")
    assert "1 added, 0 removed, 1 changed" in capsys.readouterr().out
    ip.run_line_magic("lanesnap", f"restore {second.id} {tmp_path / 'v2'}")
    assert (tmp_path / "v2" / "b.txt").read_text() == "new"
    with pytest.raises(UsageError, match="already exists"):
        ip.run_line_magic("lanesnap", f"restore {first.id} {vol}")
    with pytest.raises(UsageError, match="invalid choice: 'explode'"):
        ip.run_line_magic("lanesnap", "explode")
    ip.run_line_magic("lanesnap", f"delete {first.id}")
    assert [s.id for s in snaps.list()] == [second.id]


def test_lanesnap_magic_takes_snapshot_objects_from_the_namespace(ip, two_versions, tmp_path, capsys):
    """``$first`` expands to the Snapshot's id (its ``str`` is a many-word description), and
    ``{expr}`` and plain values still expand as IPython does."""
    _, first, second = two_versions
    ip.user_ns.update({"first": first, "pair": (first, second), "where": tmp_path / "from-object"})
    ip.run_line_magic("lanesnap", "diff $first {pair[1]}")
    assert "1 added, 0 removed, 1 changed" in capsys.readouterr().out
    ip.run_line_magic("lanesnap", "restore {pair[1]} $where")
    assert (tmp_path / "from-object" / "b.txt").read_text() == "new"
    ip.run_line_magic("lanesnap", "verify $first")
    assert f"{first.id}: ok" in capsys.readouterr().out


def test_browser_diffs_two_picked_versions_and_restores_only_after_confirm(ip, two_versions, tmp_path):
    from lanenb.notebook import SnapshotBrowser

    vol, first, second = two_versions
    browser = SnapshotBrowser()
    assert "lane-1" in browser.table.value and "0.9350" in browser.table.value
    assert [value for _, value in browser.pick.options] == [first.id, second.id]
    browser.pick.value = (second.id, first.id)
    browser.diff_button.click()
    assert "1 added, 0 removed, 1 changed" in browser.result.value and "/b.txt" in browser.result.value
    browser.pick.value = (first.id,)
    browser.restore_button.click()
    assert browser.confirm_box.layout.display == "flex" and not (tmp_path / "v1").exists()
    browser.new_name.value = str(vol)  # an existing directory: refused, untouched
    browser.confirm_button.click()
    assert "already exists" in browser.message.value and (vol / "b.txt").exists()
    browser.new_name.value = str(tmp_path / "v1")
    browser.confirm_button.click()
    assert (tmp_path / "v1" / "a.txt").read_text() == "one" and "restored" in browser.message.value
    browser.pick.value = (first.id,)
    browser.diff_button.click()
    assert "pick exactly two" in browser.message.value
