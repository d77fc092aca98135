"""Binder cannot be launched here, so its configuration is checked against what the README's
set-up command (scripts/setup.sh) does: the same apt packages, the same install script, the
same torch (CPU build), and a postBuild that stops on the first error."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
BINDER = ROOT / "binder"


def _names(path: Path) -> list[str]:
    return [line.strip() for line in path.read_text().splitlines() if line.strip() and not line.startswith("#")]


def _commands(path: Path) -> list[str]:
    lines = (line.strip() for line in path.read_text().splitlines())
    return [line for line in lines if line and not line.startswith("#")]


def test_binder_apt_packages_are_the_shared_list_setup_installs():
    shared = _names(ROOT / "scripts" / "apt-packages.txt")
    assert {"openmpi-bin", "libopenmpi-dev", "restic"} <= set(shared)
    assert _names(BINDER / "apt.txt") == shared
    setup = (ROOT / "scripts" / "setup.sh").read_text()
    assert "scripts/apt-packages.txt" in setup


def test_postbuild_and_setup_run_the_same_install_script():
    post = _commands(BINDER / "postBuild")
    assert (BINDER / "postBuild").read_text().startswith("#!/bin/bash\n")
    assert post[0] == "set -e"  # repo2docker does not stop on errors otherwise
    assert (BINDER / "postBuild").stat().st_mode & 0o111
    install = [c for c in post if "scripts/install_lanenb.sh" in c]
    assert install == ['bash scripts/install_lanenb.sh "."']
    setup = _commands(ROOT / "scripts" / "setup.sh")
    assert any(re.fullmatch(r'(PYTHON="\$PY" )?bash scripts/install_lanenb\.sh "\.\[dev\]"', c) for c in setup)
    assert not any(re.search(r"pip install .*-e", c) for c in setup)  # no second copy of the steps
    script = (ROOT / "scripts" / "install_lanenb.sh").read_text()
    for step in ("scripts/build_labextension.sh", "pip install -q -e", "labextension develop",
                 "jupyter_server_config.d", "ipykernel install"):
        assert step in script, step


def test_binder_torch_is_the_cpu_build_of_setups_torch():
    reqs = _names(BINDER / "requirements.txt")
    assert "--extra-index-url https://download.pytorch.org/whl/cpu" in reqs
    default = re.search(r"TORCH_SPEC:-torch==([0-9.]+)", (ROOT / "scripts" / "setup.sh").read_text())
    assert default and f"torch=={default.group(1)}" in reqs


@pytest.mark.skipif(shutil.which("bash") is None, reason="bash missing")
@pytest.mark.parametrize("script", ["binder/postBuild", "scripts/setup.sh", "scripts/install_lanenb.sh",
                                    "scripts/build_labextension.sh"])
def test_install_scripts_parse(script):
    subprocess.run(["bash", "-n", str(ROOT / script)], check=True)


def test_binder_pins_a_python_lanenb_supports():
    """repo2docker picks Python 3.10 when nothing says otherwise ("this will change"): the
    runtime.txt pin keeps a Binder build the same from one repo2docker release to the next."""
    runtime = (BINDER / "runtime.txt").read_text().strip()
    m = re.fullmatch(r"python-3\.(\d+)", runtime)
    assert m, runtime
    floor = re.search(r'requires-python = ">=3\.(\d+)"', (ROOT / "pyproject.toml").read_text())
    assert floor and int(m.group(1)) >= int(floor.group(1))


def _repo2docker() -> str | None:
    return os.environ.get("REPO2DOCKER") or shutil.which("repo2docker")


@pytest.mark.skipif(_repo2docker() is None, reason="repo2docker not installed (pip install jupyter-repo2docker; "
                                                   "or REPO2DOCKER=/path/to/repo2docker)")
def test_repo2docker_renders_the_binder_build(tmp_path):
    """repo2docker's own reading of binder/ (``--no-build --debug`` prints the Dockerfile it would
    build; no container engine needed): every file is picked up, in the order setup.sh installs."""
    out = subprocess.run([str(_repo2docker()), "--no-build", "--no-run", "--debug", str(ROOT)], cwd=tmp_path,
                         capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-2000:]
    text = out.stdout + out.stderr
    runtime = (BINDER / "runtime.txt").read_text().strip().replace("python-", "python=")
    assert f"Building conda environment for {runtime}" in text
    apt = re.search(r"apt-get install --yes --no-install-recommends ([^&]+)&&", text)
    assert apt and sorted(apt.group(1).split()) == sorted(_names(BINDER / "apt.txt"))
    steps = [text.index(s) for s in ('pip install --no-cache-dir -r "binder/requirements.txt"',
                                     "RUN ./binder/postBuild")]
    assert steps == sorted(steps) and text.index(apt.group(0)) < steps[0]


def test_docs_have_no_placeholder_binder_badge():
    """The README links into the docs site; how to launch on Binder is on its Getting started page."""
    guide = (ROOT / "docs" / "getting-started.md").read_text()
    for text in ((ROOT / "README.md").read_text(), guide):
        assert "OWNER" not in text and "mybinder.org/v2/gh/" not in text  # no remote: how to launch instead
    assert "## Binder" in guide and "runtime.txt" in guide
