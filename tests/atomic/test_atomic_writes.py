"""Atomic writes: readers see the old file or the new one, never a torn one or a stray temp."""

import os
import stat

import pytest

from lanenb_trainer import atomic


def test_write_then_replace_keeps_umask_permissions(tmp_path):
    target = atomic.write_text(tmp_path / "sub" / "a.json", "one")
    assert target.read_text() == "one"
    umask = os.umask(0)
    os.umask(umask)
    assert stat.S_IMODE(target.stat().st_mode) == 0o666 & ~umask
    atomic.write_json(target, {"k": [1, 2]})
    assert target.read_text() == '{\n  "k": [\n    1,\n    2\n  ]\n}\n'
    assert sorted(p.name for p in target.parent.iterdir()) == ["a.json"]


def test_failure_mid_write_leaves_the_old_file_and_no_temp(tmp_path):
    target = tmp_path / "ckpt.bin"
    atomic.write_bytes(target, b"old")
    with pytest.raises(RuntimeError, match="disk full"), atomic.atomic_open(target, "wb") as fh:
        fh.write(b"half")
        raise RuntimeError("disk full")
    assert target.read_bytes() == b"old"
    assert [p.name for p in tmp_path.iterdir()] == ["ckpt.bin"]


def test_only_write_modes(tmp_path):
    with pytest.raises(ValueError, match="mode 'w' or 'wb', not 'a'"), atomic.atomic_open(tmp_path / "x", "a"):
        pass
