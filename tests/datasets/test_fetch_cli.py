"""``lanenb data fetch`` and ``python -m lanenb.datasets.fetch``: one JSON line on success,
``error: ...`` and exit 2 on a user error."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from lanenb.cli import main
from lanenb_trainer.datasets.errors import SourceNotFoundError
from lanenb_trainer.datasets.fetch import parse_url_args


def test_cli_fetches_with_explicit_urls_and_prints_the_record(server, tmp_path, capsys):
    to = tmp_path / "t"
    rc = main(["data", "fetch", "tusimple", "--to", str(to), "--parts", "test", "--quiet", "--no-default-urls",
               "--url", f"{server.url}/test_set.zip", "--url", f"test_label.json={server.url}/test_label.json"])
    out = capsys.readouterr()
    assert rc == 0, out.err
    record = json.loads(out.out.strip().splitlines()[-1])
    assert record["root"] == str(to)
    assert [a["filename"] for a in record["archives"]] == ["test_set.zip", "test_label.json"]
    assert main(["data", "fetch", "tusimple", "--to", str(to), "--parts", "test", "--quiet"]) == 0
    assert "is complete (checked); nothing fetched" in capsys.readouterr().err


def test_cli_without_any_url_for_an_archive_says_so_before_downloading(server, tmp_path, capsys):
    rc = main(["data", "fetch", "tusimple", "--to", str(tmp_path / "t"), "--quiet", "--no-default-urls",
               "--url", f"{server.url}/test_set.zip", "--parts", "test"])
    assert rc == 2 and "no URL for test_label.json: pass --url or --mirror" in capsys.readouterr().err
    assert server.requests == []


def test_cli_reports_a_404_as_one_error_line_with_exit_2(server, tmp_path, capsys):
    rc = main(["data", "fetch", "tusimple", "--to", str(tmp_path / "t"), "--quiet", "--no-default-urls",
               "--url", f"test_set.zip={server.url}/missing.zip", "--mirror", server.url, "--parts", "test"])
    err = capsys.readouterr().err
    assert rc == 2 and err.startswith("lanenb data fetch: error: test_set.zip: not found at any URL")
    assert "Traceback" not in err


def test_module_entry_point_runs_the_same_fetcher(server, tmp_path):
    proc = subprocess.run([sys.executable, "-m", "lanenb.datasets.fetch", "tusimple", "--to", str(tmp_path / "t"),
                           "--parts", "test", "--mirror", server.url, "--no-default-urls", "--quiet"],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout.splitlines()[-1])["dataset"] == "tusimple"


def test_trainer_module_entry_point_runs_without_a_runpy_warning():
    """The cluster fetch Job's command; the package must not import the module it runs."""
    proc = subprocess.run([sys.executable, "-W", "error::RuntimeWarning", "-m", "lanenb_trainer.datasets.fetch",
                           "--help"], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0 and "--to" in proc.stdout, proc.stderr
    assert "RuntimeWarning" not in proc.stderr


@pytest.mark.parametrize("value, message", [
    ("http://h/x/train.zip", r"--url 'http://h/x/train.zip': 'train.zip' is not an archive of tusimple"),
    ("labels=http://h/x", r"'labels' is not an archive of tusimple"),
])
def test_url_flags_naming_no_archive_are_refused(value, message):
    with pytest.raises(SourceNotFoundError, match=message):
        parse_url_args([value], "tusimple")


def test_url_flags_map_to_archives():
    assert parse_url_args(["http://h/a/train_set.zip?sig=1", "test_set.zip=https://h/b"], "tusimple") == {
        "train_set.zip": ["http://h/a/train_set.zip?sig=1"], "test_set.zip": ["https://h/b"]}
