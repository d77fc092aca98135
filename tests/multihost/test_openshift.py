"""OpenShift mode across simulated hosts: the MPIJob's pods run as the restricted SCC runs them,
an arbitrary non-root UID with GID 0 and no passwd entry, so the image's entrypoint
(trainer/entrypoint.sh) must give the UID a user name, and sshd must make its host keys and
listen on port 2222 without root; mpirun then trains across the hosts as that UID."""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
from pathlib import Path

import pytest
from cluster_support import IMAGE_FILES, SCC_GID, SCC_UID
from multihost_support import end_checksums, make_spec, single_host_run
from test_multihost import ENGINES, run_cluster

ENTRYPOINT = IMAGE_FILES["/usr/local/bin/lanenb-entrypoint"]
AS_SCC_USER = ["setpriv", f"--reuid={SCC_UID}", f"--regid={SCC_GID}", "--clear-groups"]
as_root = pytest.mark.skipif(os.geteuid() != 0 or not shutil.which("setpriv") or not shutil.which("unshare"),
                             reason="needs root, setpriv and unshare (util-linux) to run as another UID")


def entrypoint_as_scc_user(home: Path, *argv: str, passwd: Path | None = None) -> subprocess.CompletedProcess:
    """``lanenb-entrypoint ARGV`` as the SCC's UID; with ``passwd``, that file is the container's
    /etc/passwd (bind-mounted in a private mount namespace, as the image's own copy)."""
    inner = [*AS_SCC_USER, "env", "-i", "PATH=/usr/bin:/bin", f"HOME={home}", "sh", ENTRYPOINT, *argv]
    if passwd is not None:
        inner = ["unshare", "--mount", "--propagation", "private", "sh", "-c",
                 'mount --bind "$0" /etc/passwd && exec "$@"', str(passwd), *inner]
    return subprocess.run(inner, capture_output=True, text=True, timeout=30, check=False)


@pytest.fixture
def reachable_tmp():
    """A scratch folder other UIDs can enter (pytest's tmp_path sits under root's 0700 folder)."""
    path = Path(tempfile.mkdtemp(prefix="lnbmh-ep-"))
    path.chmod(0o755)
    yield path
    shutil.rmtree(path, ignore_errors=True)


@as_root
def test_the_entrypoint_names_the_arbitrary_uid_so_ssh_has_a_user(reachable_tmp):
    home = reachable_tmp / "home"
    home.mkdir()
    home.chmod(0o777)  # an emptyDir
    passwd = reachable_tmp / "passwd"
    shutil.copy("/etc/passwd", passwd)
    passwd.chmod(0o664)  # chmod g=u /etc/passwd, as trainer/Dockerfile leaves it
    done = entrypoint_as_scc_user(home, "sh", "-c", 'id -un; echo "$HOME"', passwd=passwd)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["mpiuser", str(home)]
    assert f"mpiuser:x:{SCC_UID}:{SCC_GID}:lanenb:{home}:/bin/sh" in passwd.read_text().splitlines()
    again = entrypoint_as_scc_user(home, "id", "-un", passwd=passwd)  # a restart adds no second entry
    assert again.stdout.strip() == "mpiuser" and passwd.read_text().count(f":{SCC_UID}:") == 1


@as_root
def test_the_entrypoint_refuses_an_image_whose_passwd_it_cannot_extend(tmp_path):
    done = entrypoint_as_scc_user(tmp_path / "home", "true")  # the machine's /etc/passwd: 0644
    assert done.returncode == 1
    assert f"uid {SCC_UID} has no /etc/passwd entry and /etc/passwd is not writable" in done.stderr
    assert "chmod g=u /etc/passwd" in done.stderr


@pytest.fixture(scope="module")
def group_volume():
    """A "PVC" the arbitrary UID can use, as an OpenShift volume is (group 0, group-writable)."""
    from lanenb_trainer.data.synth import synthesize

    volume = Path(tempfile.mkdtemp(prefix="lnbmh-pvc-"))
    try:
        volume.chmod(0o775)
        synthesize(volume / "tusimple", 40, seed=3, width=320, height=180, test_fraction=0.2, progress=False)
        (volume / "runs").mkdir(mode=0o775)
        (volume / "runs").chmod(0o775)
        yield volume
    finally:
        shutil.rmtree(volume, ignore_errors=True)


@pytest.mark.parametrize("engine", ENGINES)
@pytest.mark.multihost
@pytest.mark.slow
@pytest.mark.usefixtures("machine")
def test_openshift_mode_trains_across_hosts_as_an_arbitrary_non_root_uid(engine, group_volume, tmp_path):
    spec = make_spec(group_volume, engine, 2, 1, run=f"{engine}-{tmp_path.name}", openshift=True)
    cluster, code = run_cluster(spec, tmp_path / "cluster")
    assert code == 0, cluster.output()
    assert cluster.run_as == {"launcher": (SCC_UID, SCC_GID), "worker": (SCC_UID, SCC_GID)}
    assert {e["host"] for e in cluster.events("start")} == {"mh-worker-0", "mh-worker-1"}
    # rank 0 wrote its run directory as the pod's UID, not as root
    events = Path(spec.run_dir) / "events.jsonl"
    assert events.stat().st_uid == SCC_UID and events.stat().st_gid == SCC_GID
    # every pod's entrypoint named the UID in its own /etc/passwd; the machine's is untouched
    for host in cluster.hosts:
        passwd = (tmp_path / "cluster" / host.hostname / "passwd").read_text()
        assert f"mpiuser:x:{SCC_UID}:{SCC_GID}:lanenb:/home/mpiuser:/bin/sh" in passwd.splitlines()
    assert f":{SCC_UID}:" not in Path("/etc/passwd").read_text()
    ends = end_checksums(cluster.events("end"))
    ref_code, ref = single_host_run(spec, tmp_path / "single")
    assert len(ends) == 1 and ref_code == 0 and ref == ends
