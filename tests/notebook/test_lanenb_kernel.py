"""lanenb's Jupyter kernel: registered as ``lanenb`` ("Python 3 (lanenb)"), never as ``python3``
(installing lanenb into an environment must not take over the user's default kernel); named by
every bundled notebook and used by ``lanenb notebook``, whose headless runs are quiet (no "Kernel
is running over TCP without encryption") and leave ``git status`` clean in the checkout."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import nbformat
import pytest

from lanenb.cli.notebook import KERNEL, KERNEL_DISPLAY_NAME, execute_headless

ROOT = Path(__file__).resolve().parents[2]
INSTALL = ROOT / "scripts" / "install_lanenb.sh"


def register_as_the_install_script_does(data_dir: Path) -> Path:
    """Run install_lanenb.sh's kernel step (its ``ipykernel install`` line, as written) with
    ``--user`` pointed at ``data_dir``; the kernels folder it wrote."""
    (step,) = [line for line in INSTALL.read_text().splitlines() if "ipykernel install" in line]
    env = dict(os.environ, PY=sys.executable, JUPYTER_DATA_DIR=str(data_dir))
    subprocess.run(["bash", "-euo", "pipefail", "-c", step], env=env, check=True, timeout=120)
    return data_dir / "kernels"


def test_the_install_script_registers_the_lanenb_kernel_and_leaves_python3_alone(tmp_path):
    kernels = register_as_the_install_script_does(tmp_path / "data")
    assert sorted(p.name for p in kernels.iterdir()) == ["lanenb"]
    spec = json.loads((kernels / "lanenb" / "kernel.json").read_text())
    assert spec["display_name"] == KERNEL_DISPLAY_NAME == "Python 3 (lanenb)"
    assert spec["argv"][0] == sys.executable and "ipykernel_launcher" in spec["argv"]


@pytest.mark.parametrize("notebook", sorted((ROOT / "notebooks").glob("*.ipynb")), ids=lambda p: p.name)
def test_every_bundled_notebook_names_the_lanenb_kernel(notebook):
    spec = json.loads(notebook.read_text())["metadata"]["kernelspec"]
    assert spec == {"name": KERNEL, "display_name": KERNEL_DISPLAY_NAME, "language": "python"}


def test_lanenb_notebook_runs_the_lanenb_kernel_by_default():
    from lanenb.cli import build_parser

    assert KERNEL == "lanenb"
    assert build_parser().parse_args(["notebook", "quickstart"]).kernel == "lanenb"


def test_a_headless_run_is_encrypted_and_says_nothing_about_tcp(tmp_path, monkeypatch, capfd):
    register_as_the_install_script_does(tmp_path / "data")
    monkeypatch.setenv("JUPYTER_DATA_DIR", str(tmp_path / "data"))
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell("print(6 * 7)")])
    nb.metadata.kernelspec = {"name": KERNEL, "display_name": KERNEL_DISPLAY_NAME, "language": "python"}
    nbformat.write(nb, str(tmp_path / "in.ipynb"))

    out = execute_headless(tmp_path / "in.ipynb", tmp_path / "out.ipynb", {}, cwd=tmp_path, progress_bar=False)
    assert nbformat.read(str(out), as_version=4).cells[0].outputs[0]["text"] == "42\n"
    said = capfd.readouterr()
    assert "without encryption" not in said.err + said.out  # the kernel's own stderr is this process's


def test_lanenb_notebook_says_how_to_register_a_missing_kernel(tmp_path):
    # a Jupyter that knows no user kernels: its data dir, the home and the user site all elsewhere
    env = dict(os.environ, JUPYTER_DATA_DIR=str(tmp_path / "empty"), HOME=str(tmp_path), PYTHONNOUSERSITE="1")
    find = "from jupyter_client.kernelspec import KernelSpecManager as K; print(sorted(K().find_kernel_specs()))"
    found = subprocess.run([sys.executable, "-c", find], env=env, capture_output=True, text=True, check=True)
    if KERNEL in found.stdout:
        pytest.skip("a lanenb kernel is registered in this environment or system-wide")
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell("1")])
    nbformat.write(nb, str(tmp_path / "in.ipynb"))
    run = subprocess.run([sys.executable, "-m", "lanenb", "notebook", str(tmp_path / "in.ipynb"), "--out",
                          str(tmp_path / "out")], env=env, capture_output=True, text=True, timeout=300)
    assert run.returncode == 2, run.stderr
    assert "lanenb notebook: error: no Jupyter kernel named 'lanenb': register it with " in run.stderr
    assert '-m ipykernel install --user --name lanenb --display-name "Python 3 (lanenb)"' in run.stderr


@pytest.mark.skipif(shutil.which("git") is None or not (ROOT / ".git").exists(), reason="not a git checkout")
@pytest.mark.parametrize("path", ["lanenb-notebooks/", "lanenb-notebooks/01-quickstart.ipynb",
                                  "lanenb-notebooks/quickstart-data/labels.json"])
def test_quickstart_output_in_the_checkout_is_git_ignored(path):
    # --no-index: judge the path by the ignore rules alone, whether or not it exists
    ignored = subprocess.run(["git", "check-ignore", "-q", "--no-index", path], cwd=ROOT, check=False)
    assert ignored.returncode == 0, f"{path} would show in git status"
