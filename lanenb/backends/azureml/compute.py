"""What an AzureML compute cluster can hold: its most nodes and each node's GPUs and vCPUs.

Read twice: a launch form's capacity (``AzureMLBackend.capacity``) and the team view's size of a
workspace job (``lanenb.team.azureml``). Two requests: the cluster, then the VM sizes of its
region (the cluster names its VM size, the size list says what that size has).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from lanenb.backends.azureml.workspace import AzureMLError

if TYPE_CHECKING:
    from azure.ai.ml import MLClient

__all__ = ["ComputeShape", "compute_shape"]


@dataclass(frozen=True)
class ComputeShape:
    """``nodes``: the cluster's most nodes; ``gpus``/``vcpus``: each node's (its VM size's)."""

    name: str
    size: str
    nodes: int
    gpus: int
    vcpus: int


def compute_shape(client: MLClient, name: str) -> ComputeShape:
    """The shape of compute cluster ``name`` of ``client``'s workspace.

    Raises:
        azure.core.exceptions.AzureError: a request failed (callers say what they were doing).
        AzureMLError: the cluster's VM size is not among its region's sizes, or it has no nodes.
    """
    compute = client.compute.get(name)
    sizes = client.compute.list_sizes(location=compute.location, compute_type="AmlCompute")
    size = str(getattr(compute, "size", "") or "")
    nodes = int(getattr(compute, "max_instances", 0) or 0)
    vm = next((s for s in sizes if str(s.name).lower() == size.lower()), None)
    if vm is None or nodes == 0:
        raise AzureMLError(f"compute {name!r} (VM size {size or '?'}, {nodes} node(s) at most): its size is "
                           f"not among the VM sizes of {compute.location}")
    # the SDK's VmSize keeps the REST key (vCPUs) in newer releases, v_cp_us in older ones
    vcpus = int(getattr(vm, "v_cp_us", None) or getattr(vm, "vCPUs", None) or 1)
    return ComputeShape(name, size, nodes, int(getattr(vm, "gpus", 0) or 0), vcpus)
