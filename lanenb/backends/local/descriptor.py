"""The ``local`` backend as the faces and ``TrainSpec`` see it (registered as a plug-in's
descriptor is, ``lanenb.contract.backends``): its options, flags, capabilities and check.
Imports no backend code: ``--help`` and the panel read it before any job runs."""

from __future__ import annotations

import shutil
from typing import TYPE_CHECKING, Any

from lanenb.contract.descriptor import BackendDescriptor, Capabilities
from lanenb.errors import SpecError

if TYPE_CHECKING:
    from lanenb.contract.spec import TrainSpec

__all__ = ["DESCRIPTOR"]


def _check_local(spec: TrainSpec) -> None:
    if isinstance(spec.gpus, int) and spec.gpus and shutil.which("nvidia-smi") is None:
        raise SpecError("gpus", spec.gpus, "no NVIDIA GPU found on this machine (nvidia-smi missing); "
                        "use gpus=0 locally or backend='kubernetes'")


FLAGS: tuple[Any, ...] = (
    (("--oversubscribe",), dict(action="store_true", default=None,
                                help="allow more ranks than this machine's cores (or GPUs); they share them")),
)

DESCRIPTOR = BackendDescriptor(
    "local", "lanenb.backends.local.backend:LocalBackend", summary="MPI ranks on this machine",
    check=_check_local, options="lanenb.backends.local.options:LocalOptions", flags=FLAGS,
    capabilities=Capabilities(runs_here=True, snapshot_needs_pvc=False, suspend_resume=True))
