"""Binder cannot be launched here, so its configuration is checked against what the README's
set-up command (scripts/setup.sh) does: the same apt packages, the same install script, the
same torch (CPU build), and a postBuild that stops on the first error."""

from __future__ import annotations

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
