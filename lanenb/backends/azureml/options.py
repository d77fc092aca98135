"""``AzureMLOptions``: what only the ``azureml`` backend reads (compute cluster, workspace,
environment, nodes, ``/dev/shm``, how the dataset reaches the job); other backends ignore them.

Checked at construction with Azure's naming rules, so a typo in a resource group or a compute
name fails in the notebook cell with the option and the value named, not as an HTTP 400 from
Azure Resource Manager after the SDK has been loaded and a token fetched. No credential is
ever an option: the backend signs in with ``DefaultAzureCredential``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import TYPE_CHECKING, ClassVar

from lanenb.contract.fields import BackendOptions, check_choice, coerce_int, coerce_opt_str
from lanenb.errors import SpecError

if TYPE_CHECKING:
    from lanenb.contract.spec import TrainSpec

__all__ = ["AzureMLOptions", "DATA_KINDS", "data_kind_of", "check_spec"]

# How the dataset becomes the job's input: a registered data asset (azureml:NAME:VERSION or
# azureml:NAME@latest), a datastore or storage URI, or a local folder the SDK uploads.
DATA_KINDS = ("auto", "asset", "uri", "local")

_GUID = re.compile(r"^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$")
# Azure's rules (resource-name-rules): resource groups 1-90 of alphanumerics, '_', '-', '.', '(' and
# ')', not ending in '.'; ML workspaces 3-33 alphanumerics, '-' and '_', starting alphanumeric.
_RESOURCE_GROUP = re.compile(r"^[-\w.()]{0,89}[-\w()]$")
_WORKSPACE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_-]{2,32}$")
# AmlCompute cluster names: a letter, then letters, digits and '-', not ending in '-'. The
# service allows 2-16 characters for clusters (3-24 for compute instances): the looser bound
# here only stops what can never be a compute name.
_COMPUTE = re.compile(r"^[A-Za-z][A-Za-z0-9-]{0,22}[A-Za-z0-9]$")
# Environment references: NAME:VERSION, NAME@latest (optionally azureml:-prefixed), or an ARM id.
_ENV_NAME = r"[A-Za-z0-9_][A-Za-z0-9_.-]{0,254}"
_ENVIRONMENT = re.compile(rf"^(azureml:)?{_ENV_NAME}(:[A-Za-z0-9_.-]+|@latest)$")
_ARM_ID = re.compile(r"^(azureml:)?/subscriptions/[^/]+/resourceGroups/[^/]+/providers/"
                     r"Microsoft\.MachineLearningServices/.+$", re.IGNORECASE)
# docker's --shm-size: a number and an optional unit b, k, m, g
_SHM = re.compile(r"^[1-9][0-9]*[bkmgBKMG]?$")
_EXPERIMENT = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_.-]{0,254}$")
_ASSET = re.compile(r"^azureml:(?!//)[^/:@]+(:[^/:@]+|@latest)$")
_URI_SCHEMES = ("azureml://", "https://", "http://", "wasbs://", "wasb://", "abfss://", "abfs://", "adl://")


def data_kind_of(dataset: str) -> str:
    """How ``dataset`` would reach an AzureML job when ``data_kind`` is ``auto``: ``asset``
    (``azureml:NAME:VERSION``, ``azureml:NAME@latest``), ``uri`` (``azureml://datastores/...``,
    ``https://``, ``wasbs://``, ``abfss://`` ...), else ``local`` (a folder here, uploaded)."""
    if _ASSET.match(dataset):
        return "asset"
    if dataset.lower().startswith(_URI_SCHEMES):
        return "uri"
    return "local"


@dataclass
class AzureMLOptions(BackendOptions):
    """Options only the ``azureml`` backend reads; ignored by the other backends.

    The workspace is found in this order: these options, then ``AZURE_SUBSCRIPTION_ID`` /
    ``AZURE_RESOURCE_GROUP`` / ``AZUREML_WORKSPACE_NAME``, then a ``config.json`` (``config``,
    else ``./config.json`` or ``./.azureml/config.json`` in this folder or a parent: the file
    the studio's "Download config file" gives).

    Args:
        compute: the compute cluster (AmlCompute) the job runs on. Required with
            ``backend='azureml'``.
        subscription_id: the workspace's subscription (a GUID).
        resource_group: the workspace's resource group.
        workspace: the workspace name.
        config: path to a workspace ``config.json``.
        environment: a registered environment (``NAME:VERSION``, ``NAME@latest`` or an ARM
            id); None: the spec's ``image`` when it names one, else an environment built from
            ``trainer/Dockerfile``.
        instance_count: nodes; ``processes`` ranks are spread evenly over them
            (``process_count_per_instance = processes / instance_count``).
        shm_size: the container's ``/dev/shm`` (docker's ``--shm-size``, e.g. ``"16g"``); None:
            AzureML's default, or ``"16g"`` with ``large_shm``.
        data_kind: how ``dataset`` reaches the job: ``auto`` (from its spelling), ``asset``,
            ``uri`` or ``local`` (a folder here that the SDK uploads).
        experiment: the studio experiment the job is listed under.

    Raises:
        SpecError: a bad option; the message names it as ``azureml.<option>``.
    """

    section: ClassVar[str] = "azureml"

    compute: str | None = None
    subscription_id: str | None = None
    resource_group: str | None = None
    workspace: str | None = None
    config: str | None = None
    environment: str | None = None
    instance_count: int = 1
    shm_size: str | None = None
    data_kind: str = "auto"
    experiment: str = "lanenb"

    def __post_init__(self) -> None:
        p = "azureml."
        for name, pattern, rule in (
            ("compute", _COMPUTE, ("must be a compute cluster name: a letter, then letters, digits and '-' "
                                   "(2-24 characters, not ending in '-')")),
            ("subscription_id", _GUID, ("must be a subscription id (a GUID such as "
                                        "'00000000-0000-0000-0000-000000000000')")),
            ("resource_group", _RESOURCE_GROUP, ("must be a resource group name: 1-90 letters, digits, '_', '-', "
                                                 "'.', '(' or ')', not ending in '.'")),
            ("workspace", _WORKSPACE, ("must be a workspace name: 3-33 letters, digits, '-' or '_', "
                                       "starting with a letter or digit")),
            ("shm_size", _SHM, "must be a size such as '16g', '512m' (docker's --shm-size)"),
            ("experiment", _EXPERIMENT, "must be 1-255 letters, digits, '_', '-' or '.'"),
        ):
            value = coerce_opt_str(p + name, getattr(self, name))
            if value is not None and not pattern.match(value):
                raise SpecError(p + name, value, rule)
            setattr(self, name, value)
        if self.experiment is None:
            raise SpecError(p + "experiment", None, "must be a name (default 'lanenb')")
        self.config = coerce_opt_str(p + "config", str(self.config) if hasattr(self.config, "__fspath__")
                                     else self.config)
        self.environment = coerce_opt_str(p + "environment", self.environment)
        if self.environment is not None and not (_ENVIRONMENT.match(self.environment)
                                                 or _ARM_ID.match(self.environment)):
            raise SpecError(p + "environment", self.environment,
                            "must name a registered environment as NAME:VERSION or NAME@latest (or its ARM id); "
                            "leave it unset to build trainer/Dockerfile")
        self.instance_count = coerce_int(p + "instance_count", self.instance_count, 1)  # type: ignore[assignment]
        check_choice(p + "data_kind", self.data_kind, DATA_KINDS)

    def check_dataset(self, dataset: str) -> str:
        """The data kind ``dataset`` is used as; raises when ``data_kind`` contradicts it.

        Raises:
            SpecError: ``data_kind='asset'`` with no ``azureml:NAME:VERSION``, ``'uri'`` with no
                URI, or ``'local'`` with an asset reference or a URI.
        """
        seen = data_kind_of(dataset)
        kind = seen if self.data_kind == "auto" else self.data_kind
        if kind != seen:
            wants = {"asset": "a data asset reference such as azureml:tusimple:1 or azureml:tusimple@latest",
                     "uri": "a datastore or storage URI (azureml://datastores/..., https://, wasbs://, abfss://)",
                     "local": "a folder on this machine"}
            raise SpecError("dataset", dataset, f"azureml.data_kind={self.data_kind!r} needs {wants[kind]}")
        return kind



def check_spec(spec: TrainSpec) -> None:
    """The ``azureml`` backend's spec check (its descriptor's ``check``): a compute cluster is
    named, and the dataset's spelling agrees with ``data_kind``.

    Raises:
        SpecError: no ``azureml.compute``, a dataset ``data_kind`` contradicts, or the dataset URI
            carries a credential (a SAS token would be sent to the workspace and kept in the job's
            definition in clear).
    """
    from lanenb.contract.redact import redact_shapes, secret_parts

    opts: AzureMLOptions = spec.options("azureml")
    if isinstance(spec.dataset, str) and secret_parts(spec.dataset):
        raise SpecError("dataset", redact_shapes(spec.dataset), "carries a credential (a SAS token or a password): "
                        "AzureML keeps a job's inputs in clear; register the data as an asset "
                        "(azureml:NAME:VERSION) or reach it through a datastore (azureml://datastores/...)")
    if opts.compute is None:
        raise SpecError("azureml.compute", None, "is required with backend='azureml': the compute cluster "
                        "to run on (--compute NAME)")
    if isinstance(spec.dataset, str):
        opts.check_dataset(spec.dataset)
