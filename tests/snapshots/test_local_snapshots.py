"""The local (restic) store's own guarantees: a killed or interrupted snapshot leaves nothing
visible and never touches the source, concurrent snapshots are safe, unchanged data is not
stored twice, the key file is private."""

from __future__ import annotations

import hashlib
import json
import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from ctrl_c import default_sigint
from polling import wait_for

import lanenb.snapshots as snaps
from lanenb.snapshots.local import ResticStore, rename_noreplace

pytestmark = pytest.mark.usefixtures("restic_installed")

CREATE = textwrap.dedent("""
    import sys
    import lanenb.snapshots as snaps
    print(snaps.create(sys.argv[1], {"who": sys.argv[2]}).id, flush=True)
""")


def _tree_digest(root: Path) -> dict[str, str]:
    return {str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(root.rglob("*")) if p.is_file()}


def _random_volume(root: Path, files: int, size: int) -> Path:
    root.mkdir(parents=True)
    for i in range(files):
        (root / f"f{i:04d}.bin").write_bytes(os.urandom(size))
    return root


@pytest.mark.parametrize("sig", [signal.SIGKILL, signal.SIGINT])
def test_an_interrupted_snapshot_leaves_no_snapshot_and_an_untouched_source(tmp_path, sig):
    store = ResticStore()
    store._ensure_repo()
    vol = _random_volume(tmp_path / "vol", 24, 2 << 20)
    before = _tree_digest(vol)
    proc = subprocess.Popen([sys.executable, "-c", CREATE, str(vol), "victim"], start_new_session=True,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, preexec_fn=default_sigint)
    locks = store.repo / "locks"
    wait_for(lambda: any(locks.iterdir()) or proc.poll() is not None, 60, what="restic's repository lock",
             interval=0.001)
    # restic holds its lock while it works: it is mid-snapshot now (a real kill, not a mock)
    if sig == signal.SIGKILL:
        os.killpg(proc.pid, signal.SIGKILL)  # the kernel and restic die at once
    else:
        os.kill(proc.pid, signal.SIGINT)  # Ctrl-C in the caller only: it must stop restic itself
    out, err = proc.communicate(timeout=60)
    assert proc.returncode != 0 and out == "", err
    if sig == signal.SIGINT:
        assert "KeyboardInterrupt" in err
        wait_for(lambda: subprocess.run(["pgrep", "-g", str(proc.pid), "restic"], capture_output=True).returncode,
                 60, what="restic to be gone")
    assert snaps.list() == []
    assert _tree_digest(vol) == before
    after = snaps.create(vol, {"who": "retry"})  # the repository is usable, stale locks or not
    assert [s.id for s in snaps.list()] == [after.id]
    assert snaps.verify(after.id)
    snaps.delete(after.id)  # prune takes the exclusive lock despite the dead process's lock
    assert snaps.list() == []


def test_concurrent_snapshots_of_one_volume_both_complete(tmp_path):
    vol = _random_volume(tmp_path / "vol", 20, 1 << 20)
    ResticStore()._ensure_repo()
    procs = [subprocess.Popen([sys.executable, "-c", CREATE, str(vol), who], stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True) for who in ("first", "second")]
    ids = []
    for proc in procs:
        out, err = proc.communicate(timeout=300)
        assert proc.returncode == 0, err
        ids.append(out.strip())
    assert sorted(s.id for s in snaps.list(vol)) == sorted(ids)
    assert {s.labels["who"] for s in snaps.list(vol)} == {"first", "second"}
    for snap_id in ids:
        assert snaps.verify(snap_id)
        assert _tree_digest(Path(snaps.restore(snap_id, str(tmp_path / snap_id)))) == _tree_digest(vol)


def test_unchanged_data_is_not_stored_twice_and_one_changed_file_stores_about_that_file(tmp_path):
    store = ResticStore()
    vol = _random_volume(tmp_path / "vol", 50, 200_000)  # 10 MB
    first = store.create(vol)
    again = store.create(vol)
    (vol / "f0007.bin").write_bytes(os.urandom(300_000))
    changed = store.create(vol)
    added = {s.id: json.loads((store.meta_dir / f"{store._find(s.id)['id']}.json").read_text())["data_added"]
             for s in (first, again, changed)}
    assert added[first.id] >= 10_000_000
    assert added[again.id] < 0.01 * 10_000_000
    assert 300_000 <= added[changed.id] < 300_000 + 100_000
    assert [c.path for c in store.diff(again.id, changed.id).changes] == ["/f0007.bin"]


def test_the_password_file_is_private_and_never_shown(tmp_path, capfd):
    vol = _random_volume(tmp_path / "vol", 2, 100)
    snap = snaps.create(vol, progress=True)
    snaps.restore(snap.id, str(tmp_path / "out"), progress=True)
    store = ResticStore()
    assert store.password_file.stat().st_mode & 0o777 == 0o600
    secret = store.password_file.read_text()
    out, err = capfd.readouterr()
    assert len(secret) >= 32 and secret not in out + err + repr(snap) + repr(snaps.list())


def test_verify_finds_a_damaged_repository(tmp_path):
    vol = _random_volume(tmp_path / "vol", 3, 100_000)
    snap = snaps.create(vol)
    store = ResticStore()
    packs = [p for p in (store.repo / "data").rglob("*") if p.is_file()]
    for pack in packs:  # bit rot, same sizes (deleted packs would make restic retry reads for minutes)
        pack.write_bytes(os.urandom(pack.stat().st_size))
    result = snaps.verify(snap.id)
    assert not result.ok and "restic check failed" in result.detail


def test_a_restore_target_that_appears_meanwhile_is_never_replaced(tmp_path):
    src, dst = tmp_path / "src", tmp_path / "dst"
    src.mkdir()
    dst.mkdir()  # even an empty directory: plain rename() would silently replace it
    with pytest.raises(FileExistsError):
        rename_noreplace(src, dst)
    assert src.is_dir() and dst.is_dir()


def test_unknown_store_names_list_the_available_ones():
    with pytest.raises(snaps.StoreError, match="unknown snapshot store 'zfs'; available snapshot stores: csi, "
                                               "kubernetes, local"):
        snaps.get_store("zfs")


def test_a_missing_restic_is_explained(tmp_path):
    vol = _random_volume(tmp_path / "vol", 1, 10)
    with pytest.raises(snaps.SnapshotError, match=r"restic executable 'no-restic-here' was not found.*Debian"):
        ResticStore(restic="no-restic-here").create(vol)
