"""``import lanenb`` has no side effects, and the job layer never pulls in Jupyter: only
``lanenb.notebook`` imports IPython, ipywidgets or matplotlib (docs/ARCHITECTURE.md)."""

from __future__ import annotations

import subprocess
import sys


def loaded_after(code: str) -> set[str]:
    probe = (f"import sys\n{code}\n"
             "print(' '.join(sorted({m.split('.')[0] for m in sys.modules})))")
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True).stdout
    return set(out.split())


def test_job_layer_and_cli_import_no_jupyter():
    mods = loaded_after("import lanenb, lanenb.jobs, lanenb.commands.arguments, lanenb.cli, lanenb.analysis.runstate; "
                        "from lanenb.jobs import TrainSpec, validate; TrainSpec(dataset='/d')")
    assert not mods & {"IPython", "ipywidgets", "matplotlib", "tornado", "ipykernel", "kubernetes"}, mods


def test_trainer_imports_neither_jupyter_nor_lanenb():
    mods = loaded_after("import lanenb_trainer.train, lanenb_trainer.errors")
    assert not mods & {"IPython", "ipywidgets", "matplotlib", "lanenb", "kubernetes"}, mods


def test_load_ext_registers_the_magics_only_when_asked(ip):
    assert {"lanetrain", "lanejobs", "lanelogs", "lanestop", "laneshow"} <= set(ip.magics_manager.magics["line"])
    assert "lanetrain" in ip.magics_manager.magics["cell"]
    assert "%lanetrain" in ip.magics_manager.magics["line"]["lanetrain"].__doc__  # %lanetrain? shows the flags
