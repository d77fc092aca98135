"""TrainSpec validation: every field rejects bad values with a message naming field and value."""

from __future__ import annotations

import json
import re
import shutil

import pytest

from lanenb.contract.spec import generate_job_name
from lanenb.jobs import KubernetesOptions, SpecError, TrainSpec, VolumeMount

BAD_FIELDS = [
    ("dataset", "", "dataset='': must be a non-empty path"),
    ("dataset", 3, "dataset=3: must be a non-empty path"),
    ("processes", 0, "processes=0: must be >= 1"),
    ("processes", "two", "processes='two': must be an integer"),
    ("processes", True, "processes=True: must be an integer"),
    ("gpus", -1, "gpus=-1: must be >= 0"),
    ("batch_size", 0, "batch_size=0: must be >= 1"),
    ("batch_size", 2.5, "batch_size=2.5: must be an integer"),
    ("epochs", 0, "epochs=0: must be >= 1"),
    ("engine", "mpi", "engine='mpi': must be one of auto, horovod, ddp"),
    ("backbone", "resnet50", "backbone='resnet50': must be one of small, vgg16, resnet18, resnet34"),
    ("image", "", "image='': must be a non-empty string or None"),
    ("image", "repo/img tag", "image='repo/img tag': must not contain whitespace"),
    ("image_pull_policy", "sometimes", "image_pull_policy='sometimes': must be one of Always, IfNotPresent, Never"),
    ("volumes", ["data"], "volumes='data': must be 'name:/mount' or 'name:/mount:ro'"),
    ("volumes", ["Data_Set:/data"], "volumes='Data_Set': must be an RFC 1123 name"),
    ("volumes", ["data:relative"], "volumes='data:relative': mount path must be absolute"),
    ("volumes", ["data:/d:rx"], "volumes='data:/d:rx': must be 'name:/mount' or 'name:/mount:ro'"),
    ("volumes", ["a:/d", "b:/d"], "volumes='/d': two volumes are mounted at the same path"),
    ("volumes", 5, "volumes=5: must be a list"),
    ("env", ["NOEQUALS"], "env='NOEQUALS': must be KEY=VALUE"),
    ("env", ["1BAD=x"], "env='1BAD': is not a valid environment variable name"),
    ("env", {"OK": ["list"]}, "env={'OK': ['list']}: values must be strings"),
    ("env", 7, "env=7: must be a dict or a list of KEY=VALUE strings"),
    ("large_shm", "maybe", "large_shm='maybe': must be true or false"),
    ("cpu", "lots", "cpu='lots': must be a Kubernetes quantity"),
    ("cpu", "0", "cpu='0': must be greater than zero"),
    ("memory", "16GB", "memory='16GB': must be a Kubernetes quantity"),
    ("enable_snapshot", "y", "enable_snapshot='y': must be true or false"),
    ("pvc_name", "My_PVC", "pvc_name='My_PVC': must be an RFC 1123 name"),
    ("name", "Lane_Job", "name='Lane_Job': must be an RFC 1123 label"),
    ("name", "a" * 64, f"name='{'a' * 64}': is 64 characters; the limit is 63"),
    ("name", "-lead", "name='-lead': must be an RFC 1123 label"),
    ("backend", "slurm", "backend='slurm': must be one of azureml, kubernetes, local"),
    ("namespace", "Team A", "namespace='Team A': must be an RFC 1123 label"),
    ("run_dir", "", "run_dir='': must be a non-empty string or None"),
    ("extra_args", "--lr 0.1", "extra_args='--lr 0.1': must be a list of strings (one argv item each)"),
    ("extra_args", ["--lr", 0.1], "extra_args=['--lr', 0.1]: must be a list of strings"),
    ("max_steps", -1, "max_steps=-1: must be >= 0"),
    ("num_workers", -2, "num_workers=-2: must be >= 0"),
    ("use_val", "sometimes", "use_val='sometimes': must be true or false"),
    ("val_batch_size", 0, "val_batch_size=0: must be >= 1"),
    ("k8s", "fast", "k8s='fast': must be a KubernetesOptions or a dict of its fields"),
    ("k8s", {"gpu_type": "a100"}, "k8s=['gpu_type']: unknown option(s)"),
]


@pytest.mark.parametrize("field,value,message", BAD_FIELDS, ids=[f"{f}-{i}" for i, (f, _, _) in enumerate(BAD_FIELDS)])
def test_bad_field_is_named_in_the_error(field, value, message):
    with pytest.raises(SpecError, match=re.escape(message)) as info:
        TrainSpec(**{"dataset": "/data", field: value})
    assert isinstance(info.value, ValueError)
    assert info.value.field.split(".")[0].split("[")[0] in (field, "k8s")


BAD_K8S = [
    ("service_account", "Trainer SA", "k8s.service_account='Trainer SA': must be an RFC 1123 name"),
    ("node_selector", {"gpu": 1}, "k8s.node_selector={'gpu': 1}: must be a dict of string labels"),
    ("tolerations", {"key": "x"}, "k8s.tolerations={'key': 'x'}: must be a list of toleration dicts"),
    ("tolerations", [{"key": "x", "operator": "Is"}], "operator must be Equal or Exists"),
    ("tolerations", [{"key": "x", "effect": "Never"}], "effect must be NoSchedule, PreferNoSchedule or NoExecute"),
    ("slots_per_worker", 0, "k8s.slots_per_worker=0: must be >= 1"),
    ("clean_pod_policy", "Some", "k8s.clean_pod_policy='Some': must be one of Running, All, None"),
    ("backoff_limit", -1, "k8s.backoff_limit=-1: must be >= 0"),
    ("ttl_seconds_after_finished", -5, "k8s.ttl_seconds_after_finished=-5: must be >= 0"),
    ("active_deadline_seconds", 0, "k8s.active_deadline_seconds=0: must be >= 1"),
    ("runai_project", "Team_A", "k8s.runai_project='Team_A': must be an RFC 1123 label"),
    ("runai_project", "p" * 58, "is 58 characters; the limit is 57"),
    ("nccl_env", {"OMP_NUM_THREADS": "1"}, "k8s.nccl_env='OMP_NUM_THREADS': only NCCL_* variables"),
    ("rdma_resources", {"nvidia.com/gpu": 1},
     "k8s.rdma_resources='nvidia.com/gpu': resource names must look like 'rdma/shared_ib'"),
    ("rdma_resources", {"rdma/shared_ib": 0}, "k8s.rdma_resources[rdma/shared_ib]=0: must be >= 1"),
    ("rdma_resources", ["rdma/ib"], "k8s.rdma_resources=['rdma/ib']: must be a dict"),
    ("context", "", "k8s.context='': must be a non-empty string or None"),
    ("labels", ["team"], "k8s.labels='team': must be KEY=VALUE"),  # KEY=VALUE strings, as --label takes
    ("labels", 3, "k8s.labels=3: must be a dict of label keys to string values"),
    ("labels", {"team a": "x"}, "k8s.labels={'team a': 'x'}: label key 'team a' is not valid"),
    ("labels", {"Example.com/team": "a"}, "label key 'Example.com/team' is not valid"),  # prefix: a DNS subdomain
    ("labels", {"team": "a/b"}, "k8s.labels={'team': 'a/b'}: label team='a/b' is not valid: a value is a string"),
    ("labels", {"team": "x" * 64}, "is not valid: a value is a string of 0-63"),
    ("labels", {"trial": 3}, "label trial=3 is not valid"),
    ("labels", {"app.kubernetes.io/managed-by": "me"}, "'app.kubernetes.io/managed-by' is set by lanenb or the MPI"),
    ("labels", {"training.kubeflow.org/job-role": "x"}, "is set by lanenb or the MPI Operator"),
]


@pytest.mark.parametrize("field,value,message", BAD_K8S, ids=[f"{f}-{i}" for i, (f, _, _) in enumerate(BAD_K8S)])
def test_bad_kubernetes_option_is_named_in_the_error(field, value, message):
    with pytest.raises(SpecError, match=re.escape(message)):
        TrainSpec(dataset="/data", backend="kubernetes", k8s={field: value})
    with pytest.raises(SpecError, match=re.escape(message)):
        KubernetesOptions(**{field: value})


def test_snapshot_needs_a_pvc_on_kubernetes_but_not_locally():
    with pytest.raises(SpecError, match=re.escape("pvc_name=None: is required when enable_snapshot is true")):
        TrainSpec(dataset="/data", enable_snapshot=True, backend="kubernetes", image="img:1")
    local = TrainSpec(dataset="/data", enable_snapshot=True)  # the run dir and dataset dir are snapshotted
    assert "--enable-snapshot" not in local.trainer_args("/r")


@pytest.mark.skipif(shutil.which("nvidia-smi") is not None, reason="this machine has NVIDIA GPUs")
def test_local_gpus_without_a_gpu_are_refused():
    with pytest.raises(SpecError, match=re.escape("gpus=1: no NVIDIA GPU found on this machine")):
        TrainSpec(dataset="/data", gpus=1)
    assert TrainSpec(dataset="/data", gpus=1, backend="kubernetes").gpus == 1


def test_from_dict_rejects_unknown_and_missing_fields():
    with pytest.raises(SpecError, match=re.escape("spec=['epochz']: unknown field(s)")):
        TrainSpec.from_dict({"dataset": "/d", "epochz": 3})
    with pytest.raises(SpecError, match=re.escape("dataset=None: is required")):
        TrainSpec.from_dict({"epochs": 3})


def test_generated_name_is_a_valid_unique_label():
    names = {TrainSpec(dataset="/d").name for _ in range(20)}
    assert len(names) > 1
    for name in names:
        assert re.fullmatch(r"lane-\d{8}-\d{6}-[0-9a-f]{4}", name)
    assert re.fullmatch(r"lane-\d{8}-\d{6}-[0-9a-f]{4}", generate_job_name())


def test_parsing_and_json_round_trip():
    spec = TrainSpec(
        dataset="/mnt/data/tusimple", processes="4", batch_size=16, epochs=3, engine="horovod",
        backbone="resnet18", image="ghcr.io/acme/lanenb:1.0", volumes=["data:/mnt/data:ro", "runs:/runs"],
        env=["WANDB_MODE=offline", "A=b=c"], large_shm="true", cpu="500m", memory="16Gi",
        enable_snapshot=True, pvc_name="runs", name="exp-1", backend="kubernetes", namespace="team-a",
        extra_args=["--lr", "0.05"], max_steps=10, use_val=False, val_batch_size=4,
        k8s={"runai_project": "team-a", "nccl_env": {"NCCL_DEBUG": "INFO"}, "rdma_resources": {"rdma/shared_ib": 1},
             "tolerations": [{"key": "gpu", "operator": "Exists", "effect": "NoSchedule"}]},
    )
    assert spec.processes == 4 and spec.large_shm is True
    assert spec.volumes == [VolumeMount("data", "/mnt/data", True), VolumeMount("runs", "/runs", False)]
    assert spec.env == {"WANDB_MODE": "offline", "A": "b=c"}
    assert isinstance(spec.k8s, KubernetesOptions) and spec.k8s.rdma_resources == {"rdma/shared_ib": 1}
    data = json.loads(json.dumps(spec.to_dict()))
    assert data["volumes"] == ["data:/mnt/data:ro", "runs:/runs"]
    assert TrainSpec.from_dict(data) == spec


def test_trainer_args_parse_with_the_trainer_parser(tmp_path):
    from lanenb_trainer.config import parse_config

    spec = TrainSpec(dataset=str(tmp_path), epochs=2, batch_size=4, max_steps=5, use_val=False, num_workers=3,
                     val_batch_size=2, extra_args=["--seed", "7"])
    args = spec.trainer_args("/runs/x")
    assert args[-2:] == ["--seed", "7"]
    cfg = parse_config(args, env={"BATCH_SIZE": "99", "USE_VAL": "true"})  # flags beat RUN:AI env vars
    assert (cfg.data, cfg.run_dir, cfg.epochs, cfg.batch_size, cfg.max_steps) == (str(tmp_path), "/runs/x", 2, 4, 5)
    assert (cfg.use_val, cfg.use_workers, cfg.num_workers, cfg.val_batch_size, cfg.seed) == (False, True, 3, 2, 7)
    assert "--run-dir" not in TrainSpec(dataset="/d").trainer_args()
    snap = TrainSpec(dataset=str(tmp_path), enable_snapshot=True, pvc_name="runs").trainer_args("/r")
    assert parse_config(snap, env={}).pvc_name == "runs"


def test_max_steps_zero_means_no_limit_as_in_the_trainer(tmp_path):
    assert TrainSpec(dataset=str(tmp_path), max_steps=0).max_steps is None
    assert "--max-steps" not in TrainSpec(dataset=str(tmp_path), max_steps=0).trainer_args("/r")


def test_every_field_is_documented_for_shift_tab():
    import dataclasses

    args = TrainSpec.__doc__.split("Args:", 1)[1]
    missing = [f.name for f in dataclasses.fields(TrainSpec) if f"{f.name}:" not in args and f"{f.name}," not in args]
    assert not missing, missing
    assert "Raises:" in TrainSpec.__doc__


def test_global_batch_is_processes_times_the_per_rank_batch(tmp_path):
    from lanenb_trainer.config import global_batch

    assert TrainSpec(dataset=str(tmp_path), processes=3, batch_size=5).global_batch == 15 == global_batch(5, 3)


@pytest.mark.parametrize("word,value", [("yes", True), ("ON", True), ("off", False), ("0", False)])
def test_spec_and_trainer_read_runai_words_alike(tmp_path, word, value):
    """USE_VAL=yes means the same to TrainSpec and to a rank reading its environment."""
    from lanenb_trainer.config import parse_config

    spec = TrainSpec(dataset=str(tmp_path), env={"USE_VAL": word})
    cfg = parse_config(["--data", str(tmp_path), "--run-dir", str(tmp_path / "r")], env={"USE_VAL": word})
    assert spec.use_val is cfg.use_val is value


def test_spec_honours_every_runai_variable_the_trainer_reads(tmp_path):
    from lanenb_trainer.runai import RUNAI_ENV

    env = {"BATCH_SIZE": "3", "USE_WORKERS": "true", "NUM_WORKERS": "4", "USE_VAL": "false",
           "VAL_BATCH_SIZE": "5", "ENABLE_SNAPSHOT": "true", "PVC_NAME": "data"}
    assert set(env) == set(RUNAI_ENV)
    spec = TrainSpec(dataset=str(tmp_path), backend="kubernetes", env=env)
    assert (spec.batch_size, spec.num_workers, spec.use_val, spec.val_batch_size, spec.enable_snapshot,
            spec.pvc_name) == (3, 4, False, 5, True, "data")
    # USE_WORKERS=true alone: the trainer's default worker count
    assert TrainSpec(dataset=str(tmp_path), env={"USE_WORKERS": "on"}).num_workers == 2


@pytest.mark.parametrize("backend,gpus,device", [
    ("local", 0, []),  # the trainer's auto: a GPU machine's GPUs, as any script there
    ("kubernetes", 0, ["--device", "cpu"]),  # an unrequested GPU in the pod is another job's
    ("kubernetes", 1, ["--device", "cuda"]),  # no GPU at start: the ranks fail, naming why
    ("azureml", 0, []),  # the compute's VM size decides: the trainer's auto
    ("azureml", 1, ["--device", "cuda"]),
])
def test_gpus_choose_the_ranks_device(backend, gpus, device):
    extra = {"image": "registry.example.com/t:1"} if backend == "kubernetes" else {}
    if backend == "azureml":
        extra = {"azureml": {"compute": "gpu-cluster"}}
    args = TrainSpec(dataset="/data", backend=backend, gpus=gpus, **extra).trainer_args("/runs/x")
    found = [args[i:i + 2] for i, a in enumerate(args) if a == "--device"]
    assert found == ([device] if device else [])


def test_a_job_left_at_its_defaults_trains_as_the_trainer_does_at_its_own(tmp_path):
    """One default per setting: a job field that is a trainer setting (epochs, batch size,
    engine, backbone, validation, loader workers, step limit...) says what the trainer says,
    so ``%lanetrain --data D`` and ``python -m lanenb_trainer --data D`` train the same run."""

    from lanenb_trainer.config import TrainConfig, parse_config

    spec = TrainSpec(dataset=str(tmp_path))
    job = parse_config(spec.trainer_args(str(tmp_path / "run")), env={})
    trainer = TrainConfig(data=str(tmp_path), run_dir=str(tmp_path / "run"), run_id=spec.name)
    shared = ("epochs", "batch_size", "engine", "backbone", "use_val", "val_batch_size", "max_steps",
              "enable_snapshot", "pvc_name")
    assert {n: getattr(job, n) for n in shared} == {n: getattr(trainer, n) for n in shared}
    assert job.loader_workers == trainer.loader_workers == spec.num_workers
    defaults = TrainSpec.field_defaults()
    assert {n: defaults[n] for n in ("epochs", "batch_size", "engine", "backbone", "use_val")} == {
        n: getattr(trainer, n) for n in ("epochs", "batch_size", "engine", "backbone", "use_val")}


def test_a_submit_checks_the_trainer_flags_once_in_the_kernel(tmp_path, monkeypatch):
    """Issue 44: the kernel built the rank's argv and parsed it back into a TrainConfig twice per
    submit (validate, then submit); now once: the same argv and env are not checked again."""
    import sys

    from lanenb.backends.local import backend as local
    from lanenb.backends.local.backend import LocalBackend

    data = tmp_path / "data"
    (data / "clips").mkdir(parents=True)
    (data / "label_data_0.json").write_text("")
    calls = []
    real = local.parse_config
    monkeypatch.setattr(local, "parse_config", lambda *a, **k: calls.append(a) or real(*a, **k))
    backend = LocalBackend(program=[sys.executable, "-c", "pass"], grace=1.0)
    spec = TrainSpec(dataset=str(data), processes=1, batch_size=3, name="once")
    run = tmp_path / "run"
    argv = backend.launcher_argv(spec, run)  # what validate() does first
    assert backend.launcher_argv(spec, run) == argv and len(calls) == 1  # the same argv: not parsed again
    assert backend.launcher_argv(spec.replace(batch_size=4), run) != argv and len(calls) == 2  # a change is
    with pytest.raises(Exception, match="batch-size"):
        backend.launcher_argv(spec.replace(extra_args=["--batch-size", "0"]), run)  # and a bad one still fails
