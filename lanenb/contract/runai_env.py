"""RUN:AI guide variables in a spec's ``env`` (``-e BATCH_SIZE=33``): which fields they stand for.

The variables are the trainer's (``lanenb_trainer.runai.RUNAI_ENV``), so ``-e BATCH_SIZE=33``
means the same to ``runai submit-mpi``, to ``TrainSpec`` and to a rank reading its environment.
``TrainSpec`` has no ``use_workers`` switch: ``USE_WORKERS``/``NUM_WORKERS`` together stand for
its ``num_workers``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from lanenb.contract.fields import check_rfc1123_subdomain, coerce_bool, coerce_int
from lanenb_trainer.config import TrainConfig
from lanenb_trainer.runai import RUNAI_ENV, bool_word

__all__ = ["RUNAI_ENV_FIELDS", "runai_fields", "runai_value"]

_WORKER_FIELDS = ("use_workers", "num_workers")
# RUN:AI guide variable -> TrainSpec field (the worker pair is read together, see runai_fields)
RUNAI_ENV_FIELDS = {var: name for var, name in RUNAI_ENV.items() if name not in _WORKER_FIELDS}


def runai_fields(env: Mapping[str, str]) -> dict[str, tuple[str, Any]]:
    """``TrainSpec`` fields that RUN:AI-guide variables in ``env`` stand for: field -> (variable, raw value)."""
    out: dict[str, tuple[str, Any]] = {name: (var, env[var]) for var, name in RUNAI_ENV_FIELDS.items()
                                       if var in env and str(env[var]).strip() != ""}
    if "USE_WORKERS" in env and str(env["USE_WORKERS"]).strip():
        use = bool_word(str(env["USE_WORKERS"])) is True
        # USE_WORKERS=true alone: the trainer's default worker count, as on a rank
        out["num_workers"] = ("NUM_WORKERS" if use and "NUM_WORKERS" in env else "USE_WORKERS",
                              env.get("NUM_WORKERS", str(TrainConfig.num_workers)) if use else 0)
    return out


def runai_value(name: str, var: str, raw: Any) -> Any:
    """A RUN:AI variable's value coerced to its field's type (``SpecError`` names the variable)."""
    what = f"environment variable {var}"
    if name in ("use_val", "enable_snapshot"):
        return coerce_bool(what, raw)
    if name == "pvc_name":
        return check_rfc1123_subdomain(what, raw)
    return coerce_int(what, raw, 0 if name == "num_workers" else 1)
