"""What the MPI Operator (v0.8.2) and the apiserver would refuse or silently change is refused
before sending, with the value and the fix (issue 9, items 1-4, 7 and 15 on the manifest side)."""

from __future__ import annotations

import jsonschema
import pytest
import yaml

from lanenb.backends.kubernetes.backend import InvalidNameError, ManifestError, build_mpijob, render
from lanenb.backends.kubernetes.manifests import DEFAULT_TERMINATION_GRACE_S
from lanenb.commands.arguments import add_job_arguments, spec_from_args
from lanenb.contract.spec import SpecError, TrainSpec
from lanenb.contract.validate import validate

IMAGE = "registry.example.com/lanenb-trainer:0.1"


def spec_for(**kw) -> TrainSpec:
    base = dict(dataset="/mnt/tusimple", backend="kubernetes", image=IMAGE, name="lane-unit", volumes=["data:/mnt"])
    base.update(kw)
    return TrainSpec(**base)


def test_restart_policy_is_never_on_the_replica_not_the_pod_template(mpijob_schema):
    job = build_mpijob(spec_for())
    jsonschema.validate(job, mpijob_schema)
    launcher = job["spec"]["mpiReplicaSpecs"]["Launcher"]
    assert launcher["restartPolicy"] == "Never"  # the operator reads this one
    assert "restartPolicy" not in launcher["template"]["spec"]  # and overwrites (with a warning) this one


def test_a_retried_launcher_continues_so_retries_are_on_and_pods_get_time_to_checkpoint():
    """A launcher retry used to train again from step 0 over the run's checkpoints, so retries
    were refused; now the ranks carry the job's --run-id and continue from its checkpoint."""
    job = build_mpijob(spec_for())
    assert job["spec"]["runPolicy"]["backoffLimit"] == 3
    args = job["spec"]["mpiReplicaSpecs"]["Launcher"]["template"]["spec"]["containers"][0]["args"]
    assert args[args.index("--run-id") + 1] == "lane-unit"
    for replica in job["spec"]["mpiReplicaSpecs"].values():  # the measured checkpoint fits in the grace
        assert replica["template"]["spec"]["terminationGracePeriodSeconds"] == DEFAULT_TERMINATION_GRACE_S == 60
    job = build_mpijob(spec_for(k8s={"backoff_limit": 0, "termination_grace_seconds": 300}))
    assert job["spec"]["runPolicy"]["backoffLimit"] == 0
    assert job["spec"]["mpiReplicaSpecs"]["Worker"]["template"]["spec"]["terminationGracePeriodSeconds"] == 300
    with pytest.raises(SpecError, match=r"k8s.termination_grace_seconds=0: must be >= 1"):
        spec_for(k8s={"termination_grace_seconds": 0})


@pytest.mark.parametrize("name,processes,why", [
    ("2024-exp", 2, "'2024-exp-worker-1', which is not a DNS-1035 label.*start the name with a letter"),
    ("a" * 55, 2, "which is 64 characters; the limit is 63.*use at most 54 characters"),
    ("a" * 54, 11, "'a{54}-worker-10'.*use at most 53 characters"),
    ("a" * 55, 1, "'a{55}-worker-0'"),
])
def test_names_the_operator_cannot_use_are_refused(name, processes, why):
    spec = spec_for(name=name, processes=processes)  # fine as a spec: a local job could use it
    with pytest.raises(InvalidNameError, match=why):
        build_mpijob(spec)
    problems = validate(spec)
    assert [p.field for p in problems] == ["spec"] and name in str(problems[0])


def test_the_longest_name_the_operator_accepts_is_accepted():
    build_mpijob(spec_for(name="a" * 54, processes=2))  # a...-worker-1 and a...-launcher are 63 and 63
    build_mpijob(spec_for(name="a" * 52, processes=11, k8s={"slots_per_worker": 1}))


def test_a_job_without_a_writable_volume_is_refused_naming_the_fix():
    with pytest.raises(ManifestError, match=r"no writable volume for its run directory.*--pvc NAME:/mnt"):
        build_mpijob(spec_for(volumes=["data:/mnt:ro"]))
    with pytest.raises(ManifestError, match=r"no writable volume"):
        build_mpijob(spec_for(volumes=[], dataset="/data"))
    with pytest.raises(ManifestError, match=r"run_dir='/tmp/run' is not on a writable volume"):
        build_mpijob(spec_for(run_dir="/tmp/run"))
    build_mpijob(spec_for(volumes=["data:/data:ro", "out:/out"], dataset="/data/t", run_dir="/out/r1"))


def test_a_dataset_outside_every_mount_is_refused():
    with pytest.raises(ManifestError, match=r"dataset='/data/tusimple' is not under a mounted volume "
                                            r"\(volumes: data:/mnt\)"):
        build_mpijob(spec_for(dataset="/data/tusimple"))
    with pytest.raises(ManifestError, match="dataset='tusimple' is not under a mounted volume"):
        build_mpijob(spec_for(dataset="tusimple"))


@pytest.mark.parametrize("mount,kw,why", [
    ("/etc/mpi", {}, "the MPI Operator mounts its hostfile there"),
    ("/root/.ssh", {}, "SSH keys"),
    ("/root/.ssh/extra", {}, "SSH keys"),
    ("/dev/shm", {"large_shm": True}, "large_shm mounts a memory-backed /dev/shm there"),
])
def test_reserved_mount_paths_are_refused(mount, kw, why):
    with pytest.raises(ManifestError, match=f"cannot mount at {mount}: .*{why}"):
        build_mpijob(spec_for(volumes=["data:/mnt", f"extra:{mount}"], **kw))


def test_dev_shm_without_large_shm_may_be_mounted():
    build_mpijob(spec_for(volumes=["data:/mnt", "shm:/dev/shm"]))


@pytest.mark.parametrize("tol,why", [
    ({"key": "gpu", "operator": "Exists", "value": "yes"}, "value must be empty when operator is Exists"),
    ({"operator": "Equal", "value": "x"}, "an empty key needs operator Exists"),
    ({"key": "bad key!", "operator": "Exists"}, "key 'bad key!' is not a valid label key"),
    ({"key": "gpu", "effect": "NoSchedule", "tolerationSeconds": 30}, "tolerationSeconds needs effect NoExecute"),
    ({"Key": "gpu"}, "unknown field\\(s\\) 'Key'"),
])
def test_invalid_tolerations_are_refused_at_validation(tol, why):
    with pytest.raises(SpecError, match=why):
        spec_for(k8s={"tolerations": [tol]})


def test_the_launcher_asks_for_modest_resources():
    job = build_mpijob(spec_for(gpus=1))
    res = job["spec"]["mpiReplicaSpecs"]["Launcher"]["template"]["spec"]["containers"][0]["resources"]
    assert set(res["requests"]) == {"cpu", "memory"} and "nvidia.com/gpu" not in res.get("limits", {})


def test_rendezvous_address_is_the_operators_worker_service():
    env = {e["name"]: e.get("value") for e in build_mpijob(spec_for())["spec"]["mpiReplicaSpecs"]["Worker"]
           ["template"]["spec"]["containers"][0]["env"]}
    assert env["MASTER_ADDR"] == "lane-unit-worker-0.lane-unit-worker"  # hostname.subdomain (Service lane-unit-worker)


# ------------------------------------------------------------------ RUN:AI variables (item 7)
def test_runai_variables_in_env_are_honoured():
    spec = spec_for(env=["BATCH_SIZE=33", "USE_VAL=false", "USE_WORKERS=true", "NUM_WORKERS=4"])
    assert (spec.batch_size, spec.use_val, spec.num_workers) == (33, False, 4)
    args = spec.trainer_args()
    assert args[args.index("--batch-size") + 1] == "33" and "--no-use-val" in args


def test_runai_variable_conflicting_with_a_field_is_refused():
    with pytest.raises(SpecError, match=r"batch_size=16: conflicts with the environment variable BATCH_SIZE='33'"):
        spec_for(env=["BATCH_SIZE=33"], batch_size=16)


@pytest.mark.parametrize("given", [{"batch_size": 8}, {"batch_size": "8"}, {"use_val": True},
                                   {"num_workers": 0}, {"val_batch_size": 8}])
def test_a_value_given_beside_its_runai_variable_conflicts_even_when_it_is_the_default(given):
    """Issue 44's bug: ``batch_size=8`` (the default) beside ``BATCH_SIZE=33`` was silently 33,
    while ``batch_size=4`` was a conflict. One rule now: given explicitly and different, refused."""
    env = ["BATCH_SIZE=33", "USE_VAL=false", "USE_WORKERS=true", "NUM_WORKERS=4", "VAL_BATCH_SIZE=16"]
    name = next(iter(given))
    with pytest.raises(SpecError, match=rf"{name}=.*: conflicts with the environment variable [A-Z_]+="):
        spec_for(env=env, **given)
    spec = spec_for(env=env)  # not given: the variables set them
    assert (spec.batch_size, spec.use_val, spec.num_workers, spec.val_batch_size) == (33, False, 4, 16)
    assert spec_for(env=env, batch_size=33, use_val="false").batch_size == 33  # equal: no conflict
    assert TrainSpec.from_dict(spec.to_dict()).batch_size == 33  # a registry row reads back the same


def test_runai_variable_conflicting_with_a_flag_is_refused():
    import argparse

    parser = add_job_arguments(argparse.ArgumentParser())
    ns = parser.parse_args(["--data", "/mnt/d", "--batch-size", "8", "-e", "BATCH_SIZE=33"])
    with pytest.raises(SpecError, match=r"--batch-size 8: conflicts with the environment variable BATCH_SIZE='33'"):
        spec_from_args(ns, parser)  # 8 is the default, and still given: one rule for flags and fields
    ns = parser.parse_args(["--data", "/mnt/d", "--batch-size", "33", "-e", "BATCH_SIZE=33"])
    assert spec_from_args(ns, parser).batch_size == 33


# ------------------------------------------------------------------ secrets (item 15)
def test_secret_references_become_secret_key_refs_and_never_values(mpijob_schema):
    spec = spec_for(env=["WANDB_API_KEY=secret:wandb/api-key", "NCCL_DEBUG=INFO"])
    job = build_mpijob(spec)
    jsonschema.validate(job, mpijob_schema)
    for role in ("Launcher", "Worker"):
        env = {e["name"]: e for e in job["spec"]["mpiReplicaSpecs"][role]["template"]["spec"]["containers"][0]["env"]}
        assert env["WANDB_API_KEY"] == {"name": "WANDB_API_KEY",
                                        "valueFrom": {"secretKeyRef": {"name": "wandb", "key": "api-key"}}}
    args = job["spec"]["mpiReplicaSpecs"]["Launcher"]["template"]["spec"]["containers"][0]["args"]
    assert args[args.index("WANDB_API_KEY") - 1] == "-x"  # exported to every rank by name


@pytest.mark.parametrize("value", ["secret:wandb", "secret:Bad_Name/key", "secret:wandb/", "secret:w/a b"])
def test_malformed_secret_references_are_refused(value):
    with pytest.raises(SpecError, match="is not secret:NAME/KEY"):
        spec_for(env=[f"TOKEN={value}"])


def test_secret_references_need_the_kubernetes_backend():
    with pytest.raises(SpecError, match="secret:NAME/KEY reads a Kubernetes Secret: it needs backend='kubernetes'"):
        TrainSpec(dataset="/d", env=["TOKEN=secret:s/k"])


def test_render_redacts_literal_values_that_may_be_secrets():
    spec = spec_for(env=["HF_TOKEN=hf_abcdef123456", "BATCH_SIZE=8", "NCCL_DEBUG=INFO"])
    text = render(spec)
    assert "hf_abcdef123456" not in text
    env = {e["name"]: e["value"] for e in yaml.safe_load(text)["spec"]["mpiReplicaSpecs"]["Worker"]["template"]
           ["spec"]["containers"][0]["env"]}
    assert env["HF_TOKEN"] == "<redacted>" and env["BATCH_SIZE"] == "8" and env["NCCL_DEBUG"] == "INFO"
    assert "hf_abcdef123456" in render(spec, redact=False)  # explicitly asked for, e.g. to kubectl apply
