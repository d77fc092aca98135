"""``LocalOptions``: what only the local backend reads.

One option today: ``oversubscribe``, the user's explicit "yes, more ranks than this machine has
cores (or GPUs)". Without it the local backend refuses such a run before anything starts: a
new user's ``-np 999`` on a laptop must not start 999 Python processes.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from lanenb.contract.fields import BackendOptions, coerce_bool

__all__ = ["LocalOptions"]


@dataclass
class LocalOptions(BackendOptions):
    """Options only the local backend reads.

    Args:
        oversubscribe: allow more ranks than the machine's capacity (its GPUs, else its CPU
            cores); they share the cores and each runs slower. Off: such a run is refused.

    Raises:
        SpecError: a bad option; the message names it as ``local.<option>``.
    """

    section: ClassVar[str] = "local"

    oversubscribe: bool = False

    def __post_init__(self) -> None:
        self.oversubscribe = coerce_bool("local.oversubscribe", self.oversubscribe)
