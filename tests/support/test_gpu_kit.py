"""The GPU session kit (scripts/gpu/): what can be checked without a GPU and without network.

session.sh runs for real (no stubs) with OUT in a temporary folder: without a kit it must say
what is missing and still reach bench/gpu_check.py, which exits 2 here (no CUDA device). With a
kit that scripts/gpu/carry.sh filled (.gpu-carry/, not in CI) the relocated Open MPI's self-test
runs too. kit.py's pieces (pick, closure, the size guard) run on small made-up inputs.
"""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
GPU = REPO / "scripts" / "gpu"
KIT = REPO / ".gpu-carry"


def load_kit():
    spec = importlib.util.spec_from_file_location("_gpu_kit", GPU / "kit.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


kit = load_kit()


def no_cuda() -> bool:
    import torch

    return not torch.cuda.is_available()


def short_path(tmp_path: Path) -> str:
    """This interpreter's folder plus the system's tools, minus every Open MPI and ssh program
    (a shim folder of links), so only a relocated mpirun can be found."""
    shim = tmp_path / "shim"
    shim.mkdir()
    for folder in ("/usr/bin", "/bin", "/usr/sbin", "/sbin"):
        if not os.path.isdir(folder):
            continue
        for entry in os.scandir(folder):
            name = entry.name
            if name.startswith(("mpi", "orte", "ompi", "opal", "osh", "ssh", "prte", "pmix")) or name in ("rsh",):
                continue
            if not (shim / name).exists():
                (shim / name).symlink_to(entry.path)
    return f"{Path(sys.executable).parent}:{shim}"


def run_session(tmp_path: Path, kit_dir: Path, *args: str) -> tuple[subprocess.CompletedProcess, str]:
    out = tmp_path / "out"
    env = {"HOME": str(tmp_path), "PATH": short_path(tmp_path), "OUT": str(out), "PYTHON": sys.executable,
           "LANENB_GPU_KIT": str(kit_dir), "LANENB_MPI_ROOT": str(tmp_path / "mpi"),
           "LANENB_SITE": str(tmp_path / "site"), "CUDA_VISIBLE_DEVICES": ""}
    proc = subprocess.run(["bash", str(GPU / "session.sh"), *args], env=env, capture_output=True, text=True,
                          timeout=300, check=False)
    log = (out / "gpu_check.log").read_text()
    return proc, log


@pytest.mark.skipif(not no_cuda(), reason="a CUDA device is visible: gpu_check would run for real")
def test_session_without_kit_says_what_is_missing_and_still_runs_gpu_check(tmp_path):
    proc, log = run_session(tmp_path, tmp_path / "no-kit", "--only", "inference")
    assert proc.returncode == 2, proc.stdout + proc.stderr  # gpu_check's "no CUDA device"
    assert proc.stdout == log  # the whole output is in $OUT/gpu_check.log
    assert "FAILED: Open MPI: no debs in" in log
    assert "FAILED: wheels: none in" in log
    assert "torch " in log and "mpirun          -  MISSING" in log  # the summary still printed
    assert "bench/gpu_check.py --only inference" in log  # arguments passed through
    assert "no CUDA device visible to torch" in log
    assert log.rstrip().splitlines()[-1].startswith("[session] bench/gpu_check.py exited 2")
    shim = tmp_path / "site" / "bin" / "lanenb"
    assert os.access(shim, os.X_OK) and "-m lanenb" in shim.read_text()


@pytest.mark.skipif(not (KIT / "debs").is_dir(), reason="no .gpu-carry/debs: run scripts/gpu/carry.sh first")
@pytest.mark.skipif(not no_cuda(), reason="a CUDA device is visible: gpu_check would run for real")
def test_session_with_kit_runs_the_relocated_open_mpi(tmp_path):
    proc, log = run_session(tmp_path, KIT, "--only", "inference")
    assert proc.returncode == 2, log
    assert "mpirun rank 0 of 2" in log and "mpirun rank 1 of 2" in log
    assert f"MPI-stack libraries loaded from {tmp_path / 'mpi'}" in log
    assert "FAILED: Open MPI" not in log
    assert "mpirun (Open MPI) 4.1" in log and str(tmp_path / "mpi" / "usr" / "bin" / "mpirun") in log


def test_pick_leaves_out_what_the_image_has(tmp_path):
    image = tmp_path / "image.txt"
    image.write_text("# comment\nPyYAML\ntyping-extensions\n")
    report = tmp_path / "report.json"
    report.write_text(json.dumps({"install": [
        {"metadata": {"name": "pyyaml", "version": "6.0"}},
        {"metadata": {"name": "typing_extensions", "version": "4.0"}},
        {"metadata": {"name": "tensorboardX", "version": "2.6.5"}},
    ]}))
    assert kit.pick(report, image) == ["tensorboardX==2.6.5"]


def fake_wheel(folder: Path, name: str, requires: list[str], version: str = "1.0") -> Path:
    path = folder / f"{name}-{version}-py3-none-any.whl"
    meta = ["Metadata-Version: 2.1", f"Name: {name}", f"Version: {version}"]
    meta += [f"Requires-Dist: {r}" for r in requires]
    with zipfile.ZipFile(path, "w") as zf:
        zf.writestr(f"{name}-{version}.dist-info/METADATA", "\n".join(meta) + "\n\nRequires-Dist: not-a-header\n")
    return path


def test_closure_finds_a_missing_requirement_and_two_versions(tmp_path):
    image = tmp_path / "image.txt"
    image.write_text("numpy\n")
    whl = tmp_path / "whl"
    whl.mkdir()
    fake_wheel(whl, "tensorboardX", ["numpy", "protobuf>=3.20", "packaging"])
    fake_wheel(whl, "packaging", ["tomli; python_version < '3.11'", "colorama; extra == 'color'"])
    assert kit.closure(whl, image) == ["tensorboardx needs protobuf: neither carried nor in the image"]
    fake_wheel(whl, "protobuf", [])
    assert kit.closure(whl, image) == []
    fake_wheel(whl, "protobuf", [], version="2.0")
    assert kit.closure(whl, image) == ["two wheels of protobuf: keep one (protobuf-2.0-py3-none-any.whl)"]


def test_size_guard(tmp_path):
    carry = tmp_path / ".gpu-carry"
    (carry / "debs").mkdir(parents=True)
    (carry / "whl").mkdir()
    (carry / "debs" / "a.deb").write_bytes(b"x" * 700_000)
    (carry / "whl" / "b.whl").write_bytes(b"y" * 300_000)
    text, ok = kit.manifest(carry, 100_000, 1.0)
    assert not ok and "OVER" in text and "## debs: 1 files" in text and "700000  debs/a.deb" in text
    text, ok = kit.manifest(carry, 0, 1.0)
    assert ok and "OVER" not in text

    # the command: the repo's tracked files count, and an over-limit carry exits 1
    repo = tmp_path / "repo"
    repo.mkdir()
    subprocess.run(["git", "init", "-q", str(repo)], check=True)
    (repo / "big").write_bytes(b"z" * 200_000)
    (repo / "untracked").write_bytes(b"z" * 5_000_000)
    subprocess.run(["git", "-C", str(repo), "add", "big"], check=True)
    assert kit.tracked_bytes(repo) == 200_000
    cmd = [sys.executable, str(GPU / "kit.py"), "manifest", str(carry), str(repo)]
    over = subprocess.run([*cmd, "1"], capture_output=True, text=True, check=False)
    assert over.returncode == 1 and "too big for one device run" in over.stderr
    assert "OVER" in (carry / "manifest.txt").read_text()
    within = subprocess.run([*cmd, "2"], capture_output=True, text=True, check=False)
    assert within.returncode == 0, within.stderr
