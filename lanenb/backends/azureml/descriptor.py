"""The ``azureml`` backend as the faces and ``TrainSpec`` see it (registered as a plug-in's
descriptor is, ``lanenb.contract.backends``): its options and check (``options.py``) and flags.
Imports no SDK (``azure-ai-ml`` is imported on first use of the backend)."""

from __future__ import annotations

from typing import Any

from lanenb.backends.azureml.options import DATA_KINDS
from lanenb.contract.descriptor import BackendDescriptor

__all__ = ["DESCRIPTOR"]

# the workspace from these, else AZURE_SUBSCRIPTION_ID / AZURE_RESOURCE_GROUP /
# AZUREML_WORKSPACE_NAME, else config.json
FLAGS: tuple[Any, ...] = (
    (("--compute",), dict(metavar="NAME", help="AzureML compute cluster to run on")),
    (("--subscription",), dict(dest="subscription_id", metavar="ID", help="Azure subscription id")),
    (("--resource-group",), dict(metavar="RG", help="AzureML workspace's group")),
    (("--workspace",), dict(metavar="NAME", help="AzureML workspace")),
    (("--azure-config",), dict(dest="config", metavar="PATH", help="AzureML workspace config.json")),
    (("--azureml-environment",), dict(dest="environment", metavar="NAME:VERSION",
                                      help="registered AzureML environment (default: build trainer/Dockerfile)")),
    (("--instance-count", "--nodes"), dict(dest="instance_count", type=int, metavar="N",
                                           help="AzureML nodes; --processes are split evenly over them")),
    (("--shm-size",), dict(metavar="SIZE", help="AzureML /dev/shm size, e.g. 16g")),
    (("--data-kind",), dict(choices=DATA_KINDS,
                            help="AzureML: how --data reaches the job (auto: from its spelling; asset "
                                 "azureml:NAME:VERSION, uri azureml://..., local: a folder here, uploaded)")),
    (("--experiment",), dict(metavar="NAME", help="AzureML experiment (default lanenb)")),
)


DESCRIPTOR = BackendDescriptor(
    "azureml", "lanenb.backends.azureml.backend:AzureMLBackend", summary="an Azure Machine Learning command job",
    options="lanenb.backends.azureml.options:AzureMLOptions", flags=FLAGS,
    check="lanenb.backends.azureml.options:check_spec")
