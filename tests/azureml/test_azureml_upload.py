"""What AzureML would upload for an image build: the repository's ``.amlignore`` read by the SDK's
own ignore-file code (``azure.ai.ml``), so a notebook with outputs, a dataset or a ``.env`` beside
the checkout never leaves the machine, and everything ``trainer/Dockerfile`` COPYs does."""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import pytest

assets = pytest.importorskip("azure.ai.ml._utils._asset_utils")

from lanenb.backends.azureml.command_job import dockerfile_context  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]


def _uploaded(root: Path) -> set[str]:
    ignore = assets.get_ignore_file(root)
    return {remote for _, remote in assets.get_upload_files_from_folder(root, ignore_file=ignore)}


def test_the_build_context_uploads_the_trainer_and_nothing_a_user_keeps_beside_it(tmp_path):
    root = tmp_path / "checkout"
    files = {
        "trainer/Dockerfile": "FROM x", "trainer/entrypoint.sh": "#!/bin/sh", "trainer/lanenb_trainer/a.py": "",
        "trainer/lanenb_trainer/__pycache__/a.cpython-311.pyc": "", "trainer/.env": "HF_TOKEN=hf_x",
        "trainer/scratch.ipynb": "{}", ".env": "AWS_SECRET_ACCESS_KEY=x", "notebooks/01-quickstart.ipynb": "{}",
        "lanenb-notebooks/01-quickstart.ipynb": "{}", "quickstart-data/clips/0/1.jpg": "jpg",
        "runs/first/checkpoints/best.pt": "w", "lanenb/__init__.py": "", "README.md": "", "id_rsa.pem": "k",
        ".gitignore": "runs/\n",
        # inside trainer/ too: only what the Dockerfile COPYs (the old deny list let these through)
        "trainer/ssh/sshd_config": "Port 22", "trainer/ssh/id_rsa": "-----BEGIN OPENSSH PRIVATE KEY-----",
        "trainer/runs/a/checkpoints/last.pt": "w", "trainer/lanenb_trainer/models/weights.pt": "w",
        "trainer/credentials.json": "{}", "trainer/lanenb_trainer/data/.netrc": "machine x password y",
        "trainer/lanenb_trainer/training/loop.py": "", "trainer/data/tusimple/label_data_0313.json": "{}",
    }
    for rel, text in files.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text)
    shutil.copy(ROOT / ".amlignore", root / ".amlignore")
    assert _uploaded(root) == {"trainer/Dockerfile", "trainer/entrypoint.sh", "trainer/lanenb_trainer/a.py",
                               "trainer/lanenb_trainer/training/loop.py", "trainer/ssh/sshd_config"}


def test_everything_the_dockerfile_copies_is_uploaded_from_this_checkout():
    root = dockerfile_context()
    assert root == ROOT  # a source checkout: AzureML builds from here
    ignore = assets.get_ignore_file(root)
    assert Path(ignore.path).name == ".amlignore"  # the SDK reads ours, not .gitignore
    sources = re.findall(r"^COPY\s+(\S+)\s", (root / "trainer" / "Dockerfile").read_text(), re.M)
    assert sources
    for src in sources:
        paths = [p for p in (root / src).rglob("*") if p.is_file() and "__pycache__" not in p.parts] \
            if (root / src).is_dir() else [root / src]
        assert paths, src
        for path in paths:
            assert not ignore.is_file_excluded(path.as_posix()), path.relative_to(root)
    for other in ("README.md", "notebooks/01-quickstart.ipynb", "lanenb/__init__.py", "pyproject.toml"):
        assert ignore.is_file_excluded((root / other).as_posix()), other
