"""The MPIJob builder: CRD-schema validity (shared/crds), the fields the issue asks for, the
trainer entry point matching trainer/Dockerfile, and clear errors for bad input."""

from __future__ import annotations

import json
import re

import jsonschema
import pytest
import yaml
from k8s_harness import REPO, shared_dir

from lanenb.backends.kubernetes.backend import InvalidNameError, ManifestError, build_mpijob, render
from lanenb.backends.kubernetes.manifests import LAUNCHER_WRAPPER, TRAINER_ENTRYPOINT, WORKER_INIT, mpirun_argv
from lanenb.contract.spec import SpecError, TrainSpec
from lanenb.kube.identity import submitter, user_label_value
from lanenb.kube.objects import build_restored_pvc, build_volume_snapshot

IMAGE = "registry.example.com/lanenb-trainer:0.1"

VARIANTS = {
    "minimal": {},
    "runai-guide": dict(processes=3, gpus=1, large_shm=True, volumes=["pvc-download-tusimple-data-0:/mnt"],
                        env=["USE_WORKERS=true", "NUM_WORKERS=4", "BATCH_SIZE=33", "USE_VAL=false"],
                        enable_snapshot=True, pvc_name="pvc-download-tusimple-data-0",
                        k8s={"runai_project": "team-a", "service_account": "trainer"}),
    "openshift-ib": dict(processes=16, gpus=1, k8s={
        "slots_per_worker": 8, "nccl_env": {"NCCL_DEBUG": "INFO", "NCCL_IB_DISABLE": "0"},
        "rdma_resources": {"rdma/shared_ib": 1}, "node_selector": {"nvidia.com/gpu.present": "true"},
        "tolerations": [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}],
        "clean_pod_policy": "All", "ttl_seconds_after_finished": 3600,
        "active_deadline_seconds": 86400}),
    "openshift-restricted": dict(processes=4, large_shm=True, k8s={"slots_per_worker": 2, "openshift": True}),
    "resources": dict(cpu="4", memory="16Gi", volumes=["data:/data:ro", "out:/out"], image_pull_policy="Always",
                      dataset="/data/tusimple"),
    "labelled": dict(k8s={"labels": {"lanenb.io/sweep": "lr-search", "lanenb.io/trial": "3", "team": ""}}),
}


def spec_for(**kw) -> TrainSpec:
    base = dict(dataset="/mnt/tusimple", backend="kubernetes", image=IMAGE, name="lane-unit", volumes=["data:/mnt"])
    base.update(kw)
    return TrainSpec(**base)


@pytest.mark.parametrize("variant", sorted(VARIANTS))
def test_every_generated_mpijob_validates_against_the_crd(variant, mpijob_schema):
    job = build_mpijob(spec_for(**VARIANTS[variant]))
    jsonschema.validate(job, mpijob_schema)
    # the operator's own rules (not in the schema): exactly one launcher, allowed restart policies
    launcher = job["spec"]["mpiReplicaSpecs"]["Launcher"]
    assert launcher["replicas"] == 1
    for replica in job["spec"]["mpiReplicaSpecs"].values():
        assert replica["restartPolicy"] == "Never" and "restartPolicy" not in replica["template"]["spec"]


def test_extra_labels_go_on_the_mpijob_and_both_pod_templates_beside_lanenbs_own():
    labels = {"lanenb.io/sweep": "lr-search", "lanenb.io/trial": "3"}
    job = build_mpijob(spec_for(k8s={"labels": labels}))
    for where in (job["metadata"], *(r["template"]["metadata"] for r in job["spec"]["mpiReplicaSpecs"].values())):
        assert where["labels"] == {**labels, "app.kubernetes.io/managed-by": "lanenb", "app.kubernetes.io/name":
                                   "lanenb-trainer", "app.kubernetes.io/instance": "lane-unit",
                                   "lanenb.io/user": user_label_value(submitter())}
    assert "lanenb.io/sweep: lr-search" in render(spec_for(k8s={"labels": labels}))


def test_schema_check_is_not_vacuous(mpijob_schema):
    job = build_mpijob(spec_for())
    job["spec"]["slotsPerWorker"] = "two"
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(job, mpijob_schema)


def test_runai_guide_job_has_gpus_shm_pvc_env_placement():
    job = build_mpijob(spec_for(**VARIANTS["runai-guide"]))
    assert job["metadata"]["namespace"] == "runai-team-a"
    assert job["metadata"]["labels"]["app.kubernetes.io/managed-by"] == "lanenb"
    assert job["metadata"]["labels"]["app.kubernetes.io/instance"] == "lane-unit"
    worker = job["spec"]["mpiReplicaSpecs"]["Worker"]
    assert worker["replicas"] == 3
    pod = worker["template"]["spec"]
    assert pod["schedulerName"] == "runai-scheduler" and pod["serviceAccountName"] == "trainer"
    container = pod["containers"][0]
    assert container["resources"]["limits"]["nvidia.com/gpu"] == 1
    mounts = {m["mountPath"]: m for m in container["volumeMounts"]}
    vols = {v["name"]: v for v in pod["volumes"]}
    assert vols[mounts["/dev/shm"]["name"]]["emptyDir"] == {"medium": "Memory"}
    assert vols[mounts["/mnt"]["name"]]["persistentVolumeClaim"]["claimName"] == "pvc-download-tusimple-data-0"
    env = {e["name"]: e.get("value") for e in container["env"]}
    assert env["USE_WORKERS"] == "true" and env["BATCH_SIZE"] == "33" and env["PYTHONUNBUFFERED"] == "1"
    assert job["metadata"]["annotations"]["lanenb/run-dir"] == "/mnt/lanenb-runs/lane-unit"


def test_ib_job_passes_nccl_env_and_rdma_and_run_policy():
    job = build_mpijob(spec_for(**VARIANTS["openshift-ib"]))
    spec = job["spec"]
    assert spec["slotsPerWorker"] == 8 and spec["mpiReplicaSpecs"]["Worker"]["replicas"] == 2
    assert spec["runPolicy"] == {"cleanPodPolicy": "All", "backoffLimit": 3, "ttlSecondsAfterFinished": 3600,
                                 "activeDeadlineSeconds": 86400}
    worker = spec["mpiReplicaSpecs"]["Worker"]["template"]["spec"]
    limits = worker["containers"][0]["resources"]["limits"]
    assert limits == {"nvidia.com/gpu": 8, "rdma/shared_ib": 1}
    assert worker["containers"][0]["securityContext"]["capabilities"]["add"] == ["IPC_LOCK"]
    assert worker["nodeSelector"] == {"nvidia.com/gpu.present": "true"}
    assert worker["tolerations"][0]["key"] == "nvidia.com/gpu"
    args = spec["mpiReplicaSpecs"]["Launcher"]["template"]["spec"]["containers"][0]["args"]
    exported = [args[i + 1] for i, a in enumerate(args) if a == "-x"]
    assert "NCCL_DEBUG" in exported and "NCCL_IB_DISABLE" in exported


def test_resources_and_read_only_volumes():
    job = build_mpijob(spec_for(**VARIANTS["resources"]))
    worker = job["spec"]["mpiReplicaSpecs"]["Worker"]["template"]["spec"]
    c = worker["containers"][0]
    assert c["resources"] == {"limits": {"cpu": "4", "memory": "16Gi"}, "requests": {"cpu": "4", "memory": "16Gi"}}
    assert c["imagePullPolicy"] == "Always"
    claims = {v["persistentVolumeClaim"]["claimName"]: v["persistentVolumeClaim"] for v in worker["volumes"]}
    assert claims["data"].get("readOnly") is True and "readOnly" not in claims["out"]
    # the run dir goes to the first writable volume, never a read-only one
    assert job["metadata"]["annotations"]["lanenb/run-dir"] == "/out/lanenb-runs/lane-unit"


@pytest.mark.parametrize(("grace", "waits"), [(None, "50"), (120, "110"), (12, "10")])
def test_workers_run_sshd_under_the_init_that_lets_their_ranks_checkpoint_first(grace, waits):
    from lanenb_trainer.worker_init import is_rank_cmdline

    job = build_mpijob(spec_for(k8s={"termination_grace_seconds": grace}))
    pod = job["spec"]["mpiReplicaSpecs"]["Worker"]["template"]["spec"]
    # the pod's SIGTERM reaches the ranks as a preemption; sshd is stopped once they checkpointed,
    # or after the grace less a margin for sshd's and the init's exit (before the kubelet's SIGKILL)
    assert pod["containers"][0]["command"] == [*WORKER_INIT, "--grace", waits, "--", "/usr/sbin/sshd", "-De"]
    assert WORKER_INIT == ["python", "-m", "lanenb_trainer.worker_init"]
    assert int(waits) < pod["terminationGracePeriodSeconds"]
    assert is_rank_cmdline(TRAINER_ENTRYPOINT)  # the init finds the processes the launcher starts


def test_launcher_runs_mpirun_argv_with_the_trainer_entry_point():
    spec = spec_for(processes=4, max_steps=10)
    job = build_mpijob(spec)
    c = job["spec"]["mpiReplicaSpecs"]["Launcher"]["template"]["spec"]["containers"][0]
    wrapped = c["command"] + c["args"]
    assert wrapped[:4] == LAUNCHER_WRAPPER  # waits for the workers' sshd, names a lost host
    argv = wrapped[4:]
    assert argv == mpirun_argv(spec) and argv[0] == "mpirun"
    assert argv[argv.index("-np") + 1] == "4"
    i = argv.index("lanenb_trainer") - 2
    assert argv[i:i + 3] == TRAINER_ENTRYPOINT
    assert argv[i + 3:] == spec.trainer_args("/mnt/lanenb-runs/lane-unit")
    assert all(isinstance(a, str) for a in argv) and not any(a in ("sh", "bash", "-c") for a in argv)


def test_manifest_entry_point_matches_the_dockerfile():
    dockerfile = (REPO / "trainer" / "Dockerfile").read_text()
    entry = re.search(r"^ENTRYPOINT\s+(\[.*\])\s*$", dockerfile, re.M)
    assert entry, "trainer/Dockerfile has no exec-form ENTRYPOINT"
    assert json.loads(entry.group(1)) == TRAINER_ENTRYPOINT
    assert "openssh-server" in dockerfile and "mpirun" in " ".join(build_mpijob(spec_for())["spec"]
                                                                  ["mpiReplicaSpecs"]["Launcher"]["template"]
                                                                  ["spec"]["containers"][0]["args"])
    assert "CMAKE_CXX_STANDARD 17" in dockerfile and "HOROVOD_GPU_OPERATIONS=NCCL" in dockerfile


def test_render_is_yaml_of_the_same_object(mpijob_schema):
    spec = spec_for(**VARIANTS["runai-guide"])
    text = render(spec)
    assert "&id" not in text  # no YAML anchors: kubectl users read this
    loaded = yaml.safe_load(text)
    assert loaded == build_mpijob(spec)
    jsonschema.validate(loaded, mpijob_schema)


def test_missing_image_is_a_clear_error():
    with pytest.raises(ManifestError, match=r"image=None: the kubernetes backend needs a container image"):
        build_mpijob(spec_for(image=None))


def test_bad_names_are_rejected_with_the_value():
    with pytest.raises(SpecError, match="Lane_Job"):
        spec_for(name="Lane_Job")
    spec = spec_for()
    spec.name = "x" * 64  # mutated after construction: the builder checks again
    with pytest.raises(InvalidNameError, match="is 64 characters; the limit is 63"):
        build_mpijob(spec)
    spec = spec_for()
    spec.namespace = "Team_A"
    with pytest.raises(InvalidNameError, match="namespace 'Team_A' must be an RFC 1123 label"):
        build_mpijob(spec)


def test_volume_snapshot_and_restore_validate(snapshot_schema):
    snap = build_volume_snapshot("pvc-download-tusimple-data-0", "snap-pvc-lane-unit", "runai-team-a",
                                 "netapp-csi-snapclass")
    jsonschema.validate(snap, snapshot_schema)
    assert snap["spec"]["source"] == {"persistentVolumeClaimName": "pvc-download-tusimple-data-0"}
    example = yaml.safe_load((shared_dir() / "crds" / "restore.yaml").read_text())
    pvc = build_restored_pvc("snap-pvc-lane-unit", "restored", "runai-team-a", "100Gi", "azurenetappfiles")
    assert pvc["spec"]["dataSource"] == {"kind": "VolumeSnapshot", "apiGroup": "snapshot.storage.k8s.io",
                                         "name": "snap-pvc-lane-unit"}
    assert set(pvc["spec"]) >= set(example["spec"]) - {"volumeMode"}
    with pytest.raises(InvalidNameError, match="'Snap_1'"):
        build_volume_snapshot("data", "Snap_1", "default")


def test_shared_dir_env_override(monkeypatch, tmp_path):
    monkeypatch.setenv("LANENB_SHARED", str(tmp_path))
    with pytest.raises(pytest.skip.Exception, match=str(tmp_path)):
        shared_dir()
