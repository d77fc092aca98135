"""``VolumeMount``: a PVC mounted into every rank, as ``runai submit-mpi --pvc name:/mount[:ro]`` spells it."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from lanenb.contract.fields import check_rfc1123_subdomain, coerce_bool
from lanenb.errors import SpecError

__all__ = ["VolumeMount"]


@dataclass(frozen=True)
class VolumeMount:
    """A PVC mounted into every rank: ``name:/mount[:ro]``."""

    name: str
    mount_path: str
    read_only: bool = False

    def __post_init__(self) -> None:
        check_rfc1123_subdomain("volumes", self.name)
        if not isinstance(self.mount_path, str) or not self.mount_path.startswith("/"):
            raise SpecError("volumes", f"{self.name}:{self.mount_path}", "mount path must be absolute (start with '/')")
        if ":" in self.mount_path:
            raise SpecError("volumes", self.mount_path, "mount path must not contain ':'")

    @classmethod
    def parse(cls, value: str | VolumeMount | Mapping[str, Any]) -> VolumeMount:
        if isinstance(value, VolumeMount):
            return value
        if isinstance(value, Mapping):
            try:
                return cls(value["name"], value["mount_path"], coerce_bool("volumes", value.get("read_only", False)))
            except KeyError as exc:
                raise SpecError("volumes", dict(value), f"missing key {exc.args[0]!r}") from None
        if not isinstance(value, str):
            raise SpecError("volumes", value, "must be 'name:/mount' or 'name:/mount:ro'")
        parts = value.split(":")
        if len(parts) == 3 and parts[2] in ("ro", "rw"):
            return cls(parts[0], parts[1], parts[2] == "ro")
        if len(parts) == 2:
            return cls(parts[0], parts[1], False)
        raise SpecError("volumes", value, "must be 'name:/mount' or 'name:/mount:ro'")

    def __str__(self) -> str:
        return f"{self.name}:{self.mount_path}" + (":ro" if self.read_only else "")
