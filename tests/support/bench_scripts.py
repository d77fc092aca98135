"""The scripts in ``bench/`` as modules, for tests that check against their reference code.

Why one loader: a bench script runs with ``bench/`` on ``sys.path`` (Python puts a script's
folder there), so it imports ``benchutil`` and its siblings directly; loading one from a test
must give it the same path, whichever test happens to load a bench first.
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

BENCH = Path(__file__).resolve().parents[2] / "bench"


def load_bench(name: str) -> ModuleType:
    """``bench/<name>.py`` imported as a module (with ``bench/`` on ``sys.path``)."""
    if str(BENCH) not in sys.path:
        sys.path.insert(0, str(BENCH))
    spec = importlib.util.spec_from_file_location(f"_bench_{name}", BENCH / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up while the class is made
    spec.loader.exec_module(module)
    return module
