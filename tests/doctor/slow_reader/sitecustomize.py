"""A dataset served slowly, as a slow mount serves it: the input-bound fault of tests/doctor.

Put on a rank's ``PYTHONPATH`` (through the job spec's ``env``), Python imports this module at
start-up (``site`` imports ``sitecustomize``). It changes nothing in the training code path: it
only watches for ``lanenb_trainer.data.tusimple`` being imported and then wraps
``TuSimpleDataset.__getitem__`` so that, while the file named by ``$LANENB_TEST_SLOW_READS``
exists, every frame read first sleeps the seconds written in that file. The test creates the
file when it wants the fault to start, so the fault has a start time the ranks do not choose.

Standard library only, and no import of the trainer here: every Python process that sees this
path (the rank guard, the local supervisor) pays only for installing one import hook.
"""

from __future__ import annotations

import importlib.abc
import importlib.machinery
import os
import sys
import time
from collections.abc import Callable, Sequence
from types import ModuleType
from typing import Any

TARGET = "lanenb_trainer.data.tusimple"
FLAG_VAR = "LANENB_TEST_SLOW_READS"


def _delay(flag: str) -> float:
    """Seconds each read sleeps now: the flag file's number, 0 while the file is absent."""
    try:
        with open(flag) as fh:
            return max(0.0, float(fh.read().strip() or 0.0))
    except (OSError, ValueError):
        return 0.0


def _throttle(module: ModuleType, flag: str) -> None:
    cls = module.TuSimpleDataset
    read: Callable[[Any, Any], Any] = cls.__getitem__

    def slow_getitem(self: Any, item: Any) -> Any:
        delay = _delay(flag)
        if delay:
            time.sleep(delay)
        return read(self, item)

    cls.__getitem__ = slow_getitem


def _throttle_after_exec(loader: Any, flag: str) -> None:
    """Make ``loader`` throttle the module right after running it."""
    run = loader.exec_module

    def exec_module(module: ModuleType) -> None:
        run(module)
        _throttle(module, flag)

    loader.exec_module = exec_module


class _ThrottleOnImport(importlib.abc.MetaPathFinder):
    """Finds the dataset module with the other finders, then throttles it once it has run."""

    def __init__(self, flag: str) -> None:
        self.flag = flag

    def find_spec(self, fullname: str, path: Sequence[str] | None,
                  target: ModuleType | None = None) -> importlib.machinery.ModuleSpec | None:
        if fullname != TARGET:
            return None
        for finder in sys.meta_path:
            if finder is self or not hasattr(finder, "find_spec"):
                continue
            spec = finder.find_spec(fullname, path, target)
            if spec is not None and spec.loader is not None and hasattr(spec.loader, "exec_module"):
                _throttle_after_exec(spec.loader, self.flag)
                return spec
        return None


if os.environ.get(FLAG_VAR):
    sys.meta_path.insert(0, _ThrottleOnImport(os.environ[FLAG_VAR]))
