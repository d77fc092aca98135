"""``TrainSpec`` -> an AzureML ``command`` job (the SDK's own ``Command`` entity, and its YAML).

One builder serves ``submit`` and ``render``, so the YAML that ``--dry-run`` prints (and that
``az ml job create -f`` accepts) is exactly what the backend sends. AzureML starts the ranks
itself (``MpiDistribution``: ``process_count_per_instance`` ranks on each of ``instance_count``
nodes, Open MPI from the image), so the command is the rank's command, ``python -m
lanenb_trainer ...``, with the dataset and the run directory as the job's input and output.
"""

from __future__ import annotations

import json
import shlex
from pathlib import Path
from typing import TYPE_CHECKING, Any

import yaml

from lanenb.backends.azureml.workspace import require_sdk
from lanenb.contract.redact import REDACTED, is_secret, redact_data, redact_value
from lanenb.errors import SpecError

if TYPE_CHECKING:
    from azure.ai.ml.entities import Command

    from lanenb.contract.spec import TrainSpec

__all__ = ["TRAINER_COMMAND", "DATA_INPUT", "RUN_OUTPUT", "LARGE_SHM", "default_run_dir", "trainer_command",
           "dockerfile_context", "check_job", "refuse_literal_secrets", "build_command", "job_dict", "render"]

TRAINER_COMMAND = ["python", "-m", "lanenb_trainer"]  # trainer/Dockerfile puts lanenb_trainer on PYTHONPATH
DATA_INPUT = "dataset"  # ${{inputs.dataset}}: where AzureML mounts the data on every node
RUN_OUTPUT = "run_dir"  # ${{outputs.run_dir}}: rank 0's checkpoints, predictions, metrics.json
LARGE_SHM = "16g"  # large_shm=True without azureml.shm_size (the loader workers' shared memory)
BASE_ENV = {"PYTHONUNBUFFERED": "1"}  # the event lines must not sit in a buffer
_RUN_ROOT = "azureml://datastores/workspaceblobstore/paths/lanenb-runs"


def default_run_dir(spec: TrainSpec) -> str:
    """Where rank 0 writes when the spec names no ``run_dir``: a folder of the workspace's
    default blob datastore, named after the job (so it is known before the job starts)."""
    return f"{_RUN_ROOT}/{spec.name}"


def _placeholder(name: str, kind: str) -> str:
    return "${{" + f"{kind}.{name}" + "}}"


def trainer_command(spec: TrainSpec) -> str:
    """The rank's command line. AzureML runs it through a shell, so every argument is quoted,
    except the ``${{inputs..}}``/``${{outputs..}}`` placeholders AzureML replaces first."""
    data, out = _placeholder(DATA_INPUT, "inputs"), _placeholder(RUN_OUTPUT, "outputs")
    args = spec.trainer_args(out)
    at = args.index("--data") + 1  # the trainer reads the mounted input, not the name it was given
    args[at] = data
    return " ".join(a if a in (data, out) else shlex.quote(a) for a in TRAINER_COMMAND + args)


def dockerfile_context() -> Path | None:
    """The repository root when ``trainer/Dockerfile`` is beside this package (a source
    checkout, the editable install), else None (a wheel carries no Dockerfile)."""
    root = Path(__file__).resolve().parents[3]
    return root if (root / "trainer" / "Dockerfile").is_file() else None


def _environment(spec: TrainSpec) -> Any:
    from azure.ai.ml.entities import BuildContext, Environment

    if spec.azureml.environment is not None:
        return spec.azureml.environment
    if spec.image is not None:  # an image built and pushed already (trainer/Dockerfile's)
        return Environment(image=spec.image)
    root = dockerfile_context()
    if root is None:
        raise SpecError("azureml.environment", None, "no trainer/Dockerfile to build here (an installed wheel "
                        "has none): name a registered environment (--azureml-environment NAME:VERSION) "
                        "or an image (--image)")

    # the Dockerfile COPYs trainer/...: its context is the repository root (the SDK uploads it
    # minus what .gitignore / .amlignore leave out)
    return Environment(build=BuildContext(path=str(root), dockerfile_path="trainer/Dockerfile"))


def check_job(spec: TrainSpec, run_dir: str | None = None) -> str:
    """What can be checked without Azure; returns the data kind (``asset``/``uri``/``local``).

    Raises:
        SpecError: no compute, processes that do not split over the nodes, a dataset that its
            ``data_kind`` contradicts or a local one that is not a folder, a ``run_dir`` that is
            not an ``azureml://`` datastore path, PVC volumes or snapshots (Kubernetes and local only).
    """
    opts = spec.azureml
    if opts.compute is None:
        raise SpecError("azureml.compute", None, "is required with backend='azureml' (--compute NAME)")
    if spec.processes % opts.instance_count:
        raise SpecError("processes", spec.processes, f"must split evenly over azureml.instance_count="
                        f"{opts.instance_count} nodes (AzureML starts the same number of ranks on every node)")
    kind = opts.check_dataset(spec.dataset)
    if kind == "local" and not Path(spec.dataset).expanduser().is_dir():
        raise SpecError("dataset", spec.dataset, "is not a folder on this machine (the SDK uploads a local "
                        "dataset); name a data asset (azureml:NAME:VERSION) or a datastore URI instead")
    if spec.volumes:
        raise SpecError("volumes", [str(v) for v in spec.volumes], "PVC mounts are Kubernetes'; on AzureML the "
                        "dataset is the job's input (--data azureml:NAME:VERSION, a datastore URI or a folder)")
    if spec.enable_snapshot:
        raise SpecError("enable_snapshot", True, "snapshots are taken of PVCs (Kubernetes) or locally; AzureML "
                        "keeps the run's outputs in its datastore and versions data assets itself")
    target = run_dir or spec.run_dir
    if target is not None and not target.startswith("azureml://"):
        raise SpecError("run_dir", target, "must be a datastore path azureml://datastores/NAME/paths/... "
                        "(or unset: the workspace's blob store, lanenb-runs/<job>)")
    return kind


def refuse_literal_secrets(spec: TrainSpec) -> None:
    """AzureML keeps a command job's ``environment_variables`` in clear in the job definition, shown
    in the studio and to every reader of the workspace: a literal secret (``HF_TOKEN=hf_...``, a
    URL with a password or a token) must not be sent there, and AzureML has no Secret reference
    lanenb could put in its place.

    Raises:
        SpecError: naming the variables (never their values) and the fix.
    """
    names = sorted(k for k, v in spec.env.items() if is_secret(k, v))
    if names:
        raise SpecError("env", [f"{n}={REDACTED}" for n in names],
                        "AzureML would store these secret values in clear in the job definition (readable by "
                        "everyone with read access to the workspace); put each in the workspace's Key Vault (az "
                        "keyvault secret set --vault-name VAULT --name NAME --value ...) and read it in the job "
                        "through the compute's managed identity, or leave it out of env")


def _data_path(spec: TrainSpec, kind: str) -> str:
    return str(Path(spec.dataset).expanduser().resolve()) if kind == "local" else spec.dataset


def build_command(spec: TrainSpec, run_dir: str | None = None) -> Command:
    """The SDK's ``command()`` job for ``spec`` (nothing is sent).

    Args:
        spec: the job; ``spec.azureml`` holds compute, nodes, environment, ``/dev/shm``.
        run_dir: the ``azureml://`` folder for rank 0's output (default: ``default_run_dir``).

    Raises:
        SpecError: see ``check_job``.
        AzureMLSdkMissingError: the SDK is not installed.
    """
    kind = check_job(spec, run_dir)
    require_sdk()
    from azure.ai.ml import Input, MpiDistribution, Output, command

    opts = spec.azureml
    data_path = _data_path(spec, kind)
    env = {**BASE_ENV, "LANENB_JOB_NAME": str(spec.name), **spec.env}
    shm = opts.shm_size or (LARGE_SHM if spec.large_shm else None)
    return command(
        name=spec.name,
        display_name=spec.name,
        experiment_name=opts.experiment,
        command=trainer_command(spec),
        environment=_environment(spec),
        environment_variables=env,
        compute=opts.compute,
        inputs={DATA_INPUT: Input(type="uri_folder", path=data_path, mode="ro_mount")},
        outputs={RUN_OUTPUT: Output(type="uri_folder", path=run_dir or spec.run_dir or default_run_dir(spec),
                                    mode="rw_mount")},
        distribution=MpiDistribution(process_count_per_instance=spec.processes // opts.instance_count),
        instance_count=opts.instance_count,
        shm_size=shm,
        tags={**spec.labels,  # the job's labels (a sweep's trial labels), never over lanenb's own
              "lanenb.job": str(spec.name), "lanenb.backbone": spec.backbone,
              "lanenb.global_batch": str(spec.global_batch)},
    )


def _prune(value: Any) -> Any:
    """Drop empty mappings (``properties: {}``) the SDK writes for fields nobody set."""
    if isinstance(value, dict):
        return {k: _prune(v) for k, v in value.items() if not (isinstance(v, dict) and not v)}
    return value


def job_dict(spec: TrainSpec, run_dir: str | None = None, *, redact: bool = True) -> dict[str, Any]:
    """The job as the Azure CLI's YAML schema spells it (``CommandJob``), plain JSON types.

    A local dataset folder appears as its path (the CLI and the SDK upload it when the job is
    created). An inline environment (the Dockerfile's build, or ``image``) appears as that only:
    the SDK's anonymous name and content hash are worked out again by whoever creates the job.
    With ``redact``, secret-named variables read ``<redacted>``.
    """
    data = json.loads(json.dumps(build_command(spec, run_dir)._to_job()._to_dict()))
    if check_job(spec, run_dir) == "local":
        # the SDK's dump writes a local folder as "azureml:/abs/path"; the CLI reads a folder as a path
        data["inputs"][DATA_INPUT]["path"] = _data_path(spec, "local")
    envdef = data.get("environment")
    if isinstance(envdef, dict):  # an inline (anonymous) environment: what defines it, not its hash
        data["environment"] = {k: v for k, v in envdef.items() if k in ("build", "image")}
    if redact:
        data["environment_variables"] = {k: redact_value(k, v)
                                         for k, v in (data.get("environment_variables") or {}).items()}
        data = redact_data(data)  # credentials inside other values (the command's trainer flags)
    return _prune(data)


def render(spec: TrainSpec, run_dir: str | None = None) -> str:
    """The job YAML that ``az ml job create -f job.yml`` (and ``azure.ai.ml.load_job``) reads.

    Literal values of secret-named variables read ``<redacted>``: put the real value back
    before using the file.
    """
    head = "# AzureML command job (az ml job create -f job.yml); built by lanenb from the TrainSpec\n"
    return head + yaml.safe_dump(job_dict(spec, run_dir), sort_keys=False)
