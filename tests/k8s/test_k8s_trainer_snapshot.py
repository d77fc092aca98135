"""``--snapshot`` on Kubernetes: rank 0 of the trainer snapshots the PVC itself, with the pod's
service account, when training ends successfully (no notebook kernel involved).

The emulator checks bearer tokens (the service account's token, read from the service-account
directory that ``LANENB_SERVICEACCOUNT_DIR`` points at; ``LANENB_KUBE_API_URL`` points the
trainer at the emulator's plain-HTTP address), and every request the service account made
must be allowed by the Role in ``deploy/rbac-trainer.yaml``."""

from __future__ import annotations

import socket
import sys
from pathlib import Path

import pytest
import yaml

from lanenb.contract.spec import TrainSpec
from lanenb.contract.status import JobState
from lanenb.jobs import get_job, submit
from lanenb.registry.jobs import JobRegistry

REPO = Path(__file__).resolve().parents[2]
SA_USER = "system:serviceaccount:default:lanenb-trainer"
VERBS = {"POST": "create", "GET": "get", "PUT": "update", "PATCH": "patch", "DELETE": "delete"}


@pytest.fixture
def snapshot_cluster(cluster, tmp_path, monkeypatch):
    """The cluster with the fake CSI snapshot controller, token checks on, and a mounted
    service account (token + namespace) for the trainer."""
    from fake_snapshot_controller import FakeSnapshotController

    thread, fake = cluster
    controller = FakeSnapshotController(thread.emulator, root=tmp_path / "csi")
    thread.call(controller.attach)
    thread.emulator.tokens = {"emulator-token": "tester", "sa-token-123": SA_USER}
    sa = tmp_path / "serviceaccount"
    sa.mkdir()
    (sa / "token").write_text("sa-token-123\n")
    (sa / "namespace").write_text("default")
    monkeypatch.setenv("LANENB_SERVICEACCOUNT_DIR", str(sa))
    monkeypatch.setenv("LANENB_KUBE_API_URL", thread.url)
    return thread, fake, controller


def _allowed_by_rbac(served: list[tuple[str, str, str]]) -> list[tuple[str, str]]:
    """(verb, resource) the trainer's Role does NOT allow, among the service account's requests."""
    docs = list(yaml.safe_load_all((REPO / "deploy" / "rbac-trainer.yaml").read_text()))
    rules = next(d for d in docs if d["kind"] == "Role")["rules"]
    refused = []
    for user, method, path in served:
        if user != SA_USER:
            continue
        parts = path.strip("/").split("/")
        group = "" if parts[0] == "api" else parts[1]
        resource = parts[parts.index("namespaces") + 2]
        verb = VERBS[method]
        if not any(group in r["apiGroups"] and resource in r["resources"] and verb in r["verbs"] for r in rules):
            refused.append((verb, resource))
    return refused


def test_the_trainer_snapshots_the_pvc_with_its_service_account(snapshot_cluster, kubeconfig):
    import lanenb.snapshots as snaps
    from lanenb_trainer.k8s_snapshot import create_pvc_snapshot

    thread, _, controller = snapshot_cluster
    (thread.call(controller.add_pvc, "tusimple-data", "2Gi") / "model.pt").write_text("weights")
    result = create_pvc_snapshot("tusimple-data", "lane-7", labels={"role": "volume", "accuracy": "0.9100"},
                                 poll=0.05)
    assert (result.status, result.ready, result.error, result.namespace) == ("created", True, None, "default")
    found = snaps.list(labels={"job": "lane-7"}, backend="kubernetes", kubeconfig=str(kubeconfig))
    assert [s.id for s in found] == [result.name]
    assert found[0].volume == "tusimple-data" and found[0].labels["accuracy"] == "0.9100" and found[0].ready
    assert any(user == SA_USER and method == "POST" for user, method, _ in thread.emulator.served_as)
    assert _allowed_by_rbac(thread.emulator.served_as) == []


def test_a_failed_or_refused_snapshot_is_reported_not_raised(snapshot_cluster, monkeypatch, tmp_path):
    from lanenb_trainer.k8s_snapshot import create_pvc_snapshot

    thread, _, controller = snapshot_cluster
    thread.call(controller.add_pvc, "broken", "1Gi")
    controller.fail["broken"] = "driver says: out of snapshot quota"
    failed = create_pvc_snapshot("broken", "lane-8", poll=0.05)
    assert failed.status == "failed" and failed.name and "out of snapshot quota" in failed.error
    (tmp_path / "serviceaccount" / "token").write_text("stolen-token")
    refused = create_pvc_snapshot("broken", "lane-8", poll=0.05)
    assert refused.status == "failed" and refused.name is None
    assert "401" in refused.error and "rbac-trainer.yaml" in refused.error and "stolen-token" not in refused.error
    monkeypatch.setenv("LANENB_SERVICEACCOUNT_DIR", str(tmp_path / "nowhere"))
    missing = create_pvc_snapshot("broken", "lane-8")
    assert missing.status == "failed" and "no service-account token" in missing.error


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.mark.slow
def test_a_successful_training_run_leaves_a_labelled_snapshot_the_job_lists(snapshot_cluster, kubeconfig,
                                                                              tmp_path, monkeypatch):
    """The real trainer (2 ranks) through the MPIJob; the kernel side does nothing but wait."""
    from lanenb_trainer.data.synth import synthesize

    thread, fake, controller = snapshot_cluster
    volume = thread.call(controller.add_pvc, "tusimple-data", "2Gi")
    synthesize(volume / "tusimple", frames=6, width=320, height=180, progress=False)
    monkeypatch.setenv("KUBECONFIG", str(kubeconfig))
    monkeypatch.setenv("LANENB_HOME", str(tmp_path / "home"))
    fake.extra_env = {"MASTER_ADDR": "127.0.0.1", "MASTER_PORT": str(_free_port()), "OMP_NUM_THREADS": "1"}
    spec = TrainSpec(
        dataset=str(volume / "tusimple"), backend="kubernetes", image="registry.example.com/lanenb-trainer:0.1",
        name="lane-snap", processes=2, batch_size=1, epochs=1, max_steps=2, use_val=False,
        volumes=[f"tusimple-data:{volume}"], enable_snapshot=True, pvc_name="tusimple-data",
        k8s={"service_account": "lanenb-trainer"},
        extra_args=["--img-height", "64", "--img-width", "128"])
    job = submit(spec, registry=JobRegistry(tmp_path / "jobs.sqlite3"))
    status = job.wait(timeout=300, poll=0.2)
    events = list(job.events())
    assert status.state == JobState.SUCCEEDED, status
    [event] = [e for e in events if e.kind == "snapshot"]
    assert event.rank == 0 and event["status"] == "created" and event["ready"] is True, event
    made = get_job("lane-snap", registry=JobRegistry(tmp_path / "jobs.sqlite3")).snapshots()
    assert [s.id for s in made] == [event["snapshot"]]
    assert made[0].volume == "tusimple-data" and made[0].labels["job"] == "lane-snap"
    assert (controller._snapshot_dir(event["snapshot"], "default") / "tusimple").is_dir()  # the data was cut
    assert _allowed_by_rbac(thread.emulator.served_as) == []


def test_retrain_from_a_cluster_snapshot_mounts_the_restored_pvc_in_place_of_the_old_one(
        snapshot_cluster, kubeconfig, tmp_path, monkeypatch):
    from kube_emulator import MPIJOBS, PVCS

    import lanenb
    from lanenb_trainer.k8s_snapshot import create_pvc_snapshot

    thread, fake, controller = snapshot_cluster
    fake.rewrite_argv = lambda argv: [sys.executable, "-c", "print('trained')"]
    monkeypatch.setenv("KUBECONFIG", str(kubeconfig))
    monkeypatch.setenv("LANENB_HOME", str(tmp_path / "home"))
    registry = JobRegistry(tmp_path / "jobs.sqlite3")
    (thread.call(controller.add_pvc, "tusimple-data", "2Gi") / "label_data.json").write_text("v1")
    first = submit(TrainSpec(dataset="/mnt/data/tusimple", backend="kubernetes", image="reg.example/t:1",
                             name="lane-k1", epochs=2, volumes=["tusimple-data:/mnt/data"], enable_snapshot=True,
                             pvc_name="tusimple-data", k8s={"service_account": "lanenb-trainer"}), registry=registry)
    assert first.wait(timeout=60, poll=0.1).state == JobState.SUCCEEDED
    made = create_pvc_snapshot("tusimple-data", "lane-k1", labels={"role": "volume"}, poll=0.05)
    again = lanenb.retrain(made.name, "tusimple-v1", backend="kubernetes", registry=registry,
                          store_opts={"kubeconfig": str(kubeconfig)}, name="lane-k2")
    assert [(v.name, v.mount_path) for v in again.spec.volumes] == [("tusimple-v1", "/mnt/data")]
    assert (again.spec.pvc_name, again.spec.dataset, again.spec.epochs) == ("tusimple-v1", "/mnt/data/tusimple", 2)
    pvc = thread.call(thread.emulator.get, PVCS, "default", "tusimple-v1")
    assert pvc["spec"]["dataSource"]["name"] == made.name
    mpijob = thread.call(thread.emulator.get, MPIJOBS, "default", "lane-k2")
    volumes = mpijob["spec"]["mpiReplicaSpecs"]["Worker"]["template"]["spec"]["volumes"]
    claims = {v["persistentVolumeClaim"]["claimName"] for v in volumes if "persistentVolumeClaim" in v}
    assert claims == {"tusimple-v1"}
    assert again.wait(timeout=60, poll=0.1).state == JobState.SUCCEEDED
    assert (controller.volume_dir("tusimple-v1") / "label_data.json").read_text() == "v1"
