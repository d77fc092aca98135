"""bench/gpu_check.py on the CPU (``--smoke``): a GPU session has minutes of device time, so the
script it runs there must not fail on a typo or an API change. Every section runs here with
tiny sizes through the same code (real launcher, real trainer ranks, real synthetic data);
only what needs CUDA itself (graph capture, NVML, the quickstart with gpus=1) is left to the GPU.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]

pytestmark = pytest.mark.slow


def test_every_section_runs_and_reports(tmp_path):
    report_path = tmp_path / "report.json"
    proc = subprocess.run([sys.executable, str(REPO / "bench" / "gpu_check.py"), "--smoke", "--json",
                           str(report_path)], capture_output=True, text=True, timeout=540,
                          env={**os.environ, "LANENB_THREADS": "1"})
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-2000:]
    report = json.loads(report_path.read_text())
    assert report["smoke"] is True and report["environment"]["cpu"]
    mp = report["message_passing"]
    assert mp["ok_equal"] and mp["max_rel_err_f64"] <= 1e-9
    assert {"ours", "loop", "floor"} <= set(mp["times_s"]["float32"])
    assert all(v > 0 for v in report["vgg16_training"]["images_per_s"].values())
    assert report["inference"]["frames_per_s"]["eager"] > 0
    resume = report["train_resume"]
    assert resume["statuses"] == ["completed", "stopped", "completed"] and resume["resumed_from"] == 6
    assert resume["max_rel_loss_diff"] == 0.0 and resume["same_weights"]  # CPU float32: exact
    shared = report["shared_gpu"]
    assert shared["ok"] and shared["devices"] == ["cpu", "cpu"]
    long_run = report["long_run"]
    assert long_run["ok"] and long_run["images_per_s"] > 0 and 0 <= long_run["data_wait_share"] < 1
    assert long_run["projected_full_run_h"] > 0
    # the short table the device reply ends with
    assert "all checks passed" in proc.stdout and "train_resume     OK" in proc.stdout


def test_without_cuda_it_says_so_and_exits_2():
    proc = subprocess.run([sys.executable, str(REPO / "bench" / "gpu_check.py"), "--only", "inference"],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2
    assert "no CUDA device visible to torch" in proc.stdout and "--smoke" in proc.stdout
