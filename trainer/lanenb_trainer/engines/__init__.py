"""Distributed engines: how ranks find each other and exchange gradients.

Two interchangeable implementations behind :class:`~lanenb_trainer.engines.base.Engine`:
Horovod (what the RUN:AI guide used) and ``torch.distributed`` (no extra build). ``auto``
prefers Horovod when it is importable, so clusters with the Horovod image keep using it.
"""

from __future__ import annotations

import importlib.util

from lanenb_trainer.engines.base import Engine, EngineError

__all__ = ["Engine", "EngineError", "get_engine", "horovod_available", "ENGINE_NAMES"]

from lanenb_trainer.config import ENGINES as ENGINE_NAMES


def horovod_available() -> bool:
    """True when ``horovod.torch`` imports (a failed build leaves a package that does not)."""
    if importlib.util.find_spec("horovod") is None:
        return False
    try:
        import horovod.torch  # noqa: F401
    except Exception:
        return False
    return True


def get_engine(name: str = "auto", **kwargs) -> Engine:
    """Return an un-initialised engine; call ``.init()`` on every rank."""
    if name == "auto":
        name = "horovod" if horovod_available() else "ddp"
    if name == "horovod":
        if not horovod_available():
            raise EngineError(
                "--engine horovod: horovod.torch is not importable; build it with "
                "scripts/install_horovod.sh or use --engine ddp"
            )
        from lanenb_trainer.engines.horovod import HorovodEngine

        return HorovodEngine(**kwargs)
    if name == "ddp":
        from lanenb_trainer.engines.ddp import DDPEngine

        return DDPEngine(**kwargs)
    raise EngineError(f"unknown engine {name!r}; expected one of {', '.join(ENGINE_NAMES)}")
