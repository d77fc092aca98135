"""A toy Slurm-like backend, as a third party would ship it: a descriptor (its ``--partition``
flag, its options, its capabilities, its spec check) registered through the ``lanenb.backends``
entry point, and a ``Backend`` that only renders the ``sbatch`` script it would submit.

Nothing in ``lanenb/`` names it: the tests prove that ``%lanetrain --backend slurm --partition
gpu --dry-run``, ``--help`` and the launch panel pick it up from the descriptor alone."""

from __future__ import annotations

import re
from dataclasses import asdict, dataclass
from typing import Any

from lanenb.contract.descriptor import BackendDescriptor, Capabilities
from lanenb.errors import SpecError

_PARTITION = re.compile(r"^[A-Za-z0-9_-]{1,64}$")


@dataclass
class SlurmOptions:
    """What only the toy Slurm backend reads."""

    partition: str = "batch"
    account: str | None = None

    def __post_init__(self) -> None:
        if not isinstance(self.partition, str) or not _PARTITION.match(self.partition):
            raise SpecError("slurm.partition", self.partition, "must be a Slurm partition name "
                            "(letters, digits, '-' and '_')")

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: Any) -> SlurmOptions:
        if data is None:
            return cls()
        if isinstance(data, SlurmOptions):
            return data
        if not isinstance(data, dict):
            raise SpecError("slurm", data, "must be a dict of SlurmOptions fields")
        return cls(**data)


def check_spec(spec: Any) -> None:
    """sbatch gives whole GPUs per task; a toy rule so the test sees the check run."""
    if spec.processes > 64:
        raise SpecError("processes", spec.processes, "the toy Slurm cluster has 64 task slots")


DESCRIPTOR = BackendDescriptor(
    "slurm", "toy_slurm.backend:SlurmBackend", summary="an sbatch job on a Slurm cluster (toy plug-in)",
    options=SlurmOptions,
    flags=((("--partition",), dict(metavar="NAME", help="Slurm partition to queue on")),
           (("--account",), dict(metavar="ACCOUNT", help="Slurm account to charge"))),
    capabilities=Capabilities(gpus_optional=False), check=check_spec)
