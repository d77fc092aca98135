"""OpenShift mode across simulated hosts: the MPIJob's pods run as the restricted SCC runs them,
an arbitrary non-root UID with GID 0 and no passwd entry, so the image's entrypoint
(trainer/entrypoint.sh) must give the UID a user name, and sshd must make its host keys and
listen on port 2222 without root; mpirun then trains across the hosts as that UID."""

from __future__ import annotations

import shutil
import tempfile
from pathlib import Path

import pytest
from cluster_support import SCC_GID, SCC_UID
from multihost_support import end_checksums, make_spec, single_host_run
from test_multihost import ENGINES, run_cluster

pytestmark = [pytest.mark.multihost, pytest.mark.slow, pytest.mark.usefixtures("machine")]


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
