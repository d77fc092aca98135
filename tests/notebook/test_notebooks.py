"""The notebooks in notebooks/ executed for real by papermill (a real kernel, real mpirun ranks,
real training), with small parameters, saved as ``lanenb notebook`` saves them (for viewers
without a kernel: no widget state). Assertions are on the outputs that matter: the job
succeeded, a chart image is in the saved notebook, metrics are in range; never bytes."""

from __future__ import annotations

import base64
import socket
from pathlib import Path

import pytest

from lanenb.cli.saved_notebook import WIDGET_VIEW

pytestmark = [pytest.mark.slow, pytest.mark.notebook]

NOTEBOOKS = Path(__file__).resolve().parents[2] / "notebooks"
PNG = b"\x89PNG\r\n\x1a\n"
JPEG = b"\xff\xd8\xff"
SAVED_QUICKSTART_MAX = 800_000  # bytes; 2.2 MB with the widget state and photo grids as PNG


def execute(name: str, tmp_path: Path, **parameters):
    """Run notebooks/``name`` as ``lanenb notebook`` does (``execute_headless``); the saved notebook."""
    import nbformat

    from lanenb.cli.notebook import execute_headless

    out = execute_headless(NOTEBOOKS / name, tmp_path / name, parameters, cwd=tmp_path, progress_bar=False)
    return nbformat.read(str(out), as_version=4)


def outputs(nb, needle: str) -> list[dict]:
    cell = next(c for c in nb.cells if c.cell_type == "code" and needle in c.source)
    return cell.get("outputs", [])


def text_of(outs) -> str:
    parts = []
    for o in outs:
        parts.append(o.get("text", "") if o["output_type"] == "stream" else o.get("data", {}).get("text/plain", ""))
    return "\n".join(parts)


def pngs(outs, mime: str = "image/png") -> list[bytes]:
    return [base64.b64decode(o["data"][mime]) for o in outs
            if o["output_type"] in ("display_data", "execute_result") and mime in o.get("data", {})]


def jpegs(outs) -> list[bytes]:
    return pngs(outs, "image/jpeg")


def test_quickstart_trains_and_keeps_charts_and_metrics(tmp_path):
    nb = execute("01-quickstart.ipynb", tmp_path, frames=80, epochs=3, processes=2)
    # saved for viewers without a kernel: the widgets' fallbacks, no widget state or views
    assert (tmp_path / "01-quickstart.ipynb").stat().st_size < SAVED_QUICKSTART_MAX
    assert "widgets" not in nb.metadata
    assert not [o for c in nb.cells for o in c.get("outputs", []) if WIDGET_VIEW in o.get("data", {})]
    preview = outputs(nb, "DatasetPreview(")  # camera frames: a JPEG, a seventh of the PNG
    assert jpegs(preview) and jpegs(preview)[0].startswith(JPEG) and "data check: no problems" in text_of(preview)
    train = outputs(nb, "%lanetrain")
    assert "launched lane-" in text_of(train) and "succeeded" in text_of(train)
    charts = pngs(train)
    # the final charts' grid, drawn by Vega from the live view's specs: 3 panels wide, a few kB
    assert charts and charts[0].startswith(PNG) and int.from_bytes(charts[0][16:20], "big") > 1000
    assert "[0] " in text_of(train)  # the last log lines are kept for a reader without widgets
    metrics = text_of(outputs(nb, 'job.metrics["headline"]'))
    acc = float(metrics.split("test accuracy ")[1].split()[0])
    fp = float(metrics.split("FP ")[1].split()[0])
    fn = float(metrics.split("FN ")[1].split()[0])
    assert 0.0 <= acc <= 1.0 and 0.0 <= fp <= 1.0 and 0.0 <= fn <= 1.0 and "succeeded" in metrics
    label = metrics.split("(best.pt, epoch ")[1].split(";")[0]  # the headline says which model it is
    jobs = text_of(outputs(nb, "%lanejobs"))
    assert "succeeded" in jobs and f"{acc:.4f} test (best.pt, epoch {label})" in jobs  # the same figure
    snapped = text_of(outputs(nb, "snaps.restore("))  # --snapshot kept run dir + dataset; restored anew
    assert "model restored: True" in snapped and "metrics.json" in snapped and "dataset" in snapped
    viewer = outputs(nb, "PredictionViewer(job)")
    assert jpegs(viewer) and jpegs(viewer)[0].startswith(JPEG) and "worst frames" in text_of(viewer)
    assert "launch panel ready: no problems" in text_of(outputs(nb, "TrainPanel("))


def test_kubernetes_notebook_runs_through_the_mpijob(cluster, kubeconfig, tmp_path):
    from kubernetes import client as k8s_client

    from lanenb_trainer.data.synth import synthesize

    _thread, fake = cluster
    volume = tmp_path / "pvc"
    synthesize(volume / "tusimple", frames=8, width=320, height=180, progress=False)
    from lanenb.backends.kubernetes.backend import KubernetesBackend

    api = KubernetesBackend(kubeconfig=kubeconfig).clients().api
    k8s_client.CoreV1Api(api).create_namespaced_persistent_volume_claim("default", {
        "metadata": {"name": "tusimple-data"},
        "spec": {"accessModes": ["ReadWriteMany"], "resources": {"requests": {"storage": "1Gi"}}}})
    with socket.socket() as s:  # the fake kubelet runs every pod on this host
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    fake.extra_env = {"MASTER_ADDR": "127.0.0.1", "MASTER_PORT": str(port), "OMP_NUM_THREADS": "1"}
    nb = execute("02-kubernetes.ipynb", tmp_path, kubeconfig=str(kubeconfig), pvc="tusimple-data",
                 mount=str(volume), dataset=str(volume / "tusimple"), processes=2, gpus=0, batch_size=1,
                 epochs=1, image="registry.example.com/lanenb-trainer:0.1",
                 trainer_flags="--img-height 64 --img-width 128 --log-every 1 --max-steps 2 --no-val --engine ddp")
    panel = text_of(outputs(nb, "TrainPanel("))
    assert "GPUs allocatable: 3 | PVCs: tusimple-data" in panel
    train = outputs(nb, "%lanetrain")
    assert "on kubernetes (namespace default)" in text_of(train) and ": succeeded" in text_of(train)
    assert pngs(train) and pngs(train)[0].startswith(PNG)
    pods = text_of(outputs(nb, "backend_detail"))
    # the workers are cleaned up (cleanPodPolicy Running): the launcher is what is left
    assert "launcher" in pods and "Succeeded" in pods and "node gpu-node-" in pods
    assert "succeeded" in text_of(outputs(nb, "%lanejobs"))
    assert "@lanenb" in text_of(outputs(nb, "%lanelogs"))
    assert any(argv and "lanenb_trainer" in " ".join(argv) for argv in fake.launched)


def test_from_runai_notebook_renders_the_guide_command(tmp_path):
    import yaml

    nb = execute("03-from-runai.ipynb", tmp_path, image="registry.example.com/lanenb-trainer:0.2")
    dry = text_of(outputs(nb, "%lanetrain --dry-run"))
    assert "3 process(es) x 1 GPU(s), batch 33 per rank = global batch 99" in dry
    assert "problem:" not in dry
    mpijob = yaml.safe_load(dry[dry.index("apiVersion"):])
    assert mpijob["kind"] == "MPIJob" and mpijob["spec"]["mpiReplicaSpecs"]["Worker"]["replicas"] == 3
    assert "registry.example.com/lanenb-trainer:0.2" in dry
    summary = text_of(outputs(nb, "yaml.safe_load(manifest)"))
    assert "workers: 3 | GPUs each: 1 | global batch: 99" in summary


def test_scaling_notebook_measures_and_compares(tmp_path):
    nb = execute("04-scaling.ipynb", tmp_path, frames=60, steps=12, warmup=4, epochs=5)
    scale = outputs(nb, "%lanescale")
    assert pngs(scale) and pngs(scale)[0].startswith(PNG)
    # the interactive chart JupyterLab draws, saved in the notebook beside its PNG
    assert any("application/vnd.vegalite.v5+json" in o.get("data", {}) for o in scale)
    assert "speed-up" in text_of(scale) and "efficiency" in text_of(scale)
    summary = text_of(outputs(nb, "report.rows()"))
    lines = [l for l in summary.splitlines() if "rank(s):" in l]
    assert [l.split(" rank(s)")[0] for l in lines] == ["1", "2"]
    assert "speed-up 1.00x" in lines[0] and "efficiency 100%" in lines[0]
    ips = [float(l.split(": ")[1].split(" images/s")[0]) for l in lines]
    assert all(v > 0 for v in ips)
    compare = outputs(nb, "%lanecompare")
    assert "settings that differ (processes)" in text_of(compare) and pngs(compare)
    assert any("application/vnd.vegalite.v5+json" in o.get("data", {}) for o in compare)


def test_sweep_notebook_searches_prunes_and_compares(tmp_path):
    nb = execute("05-sweep.ipynb", tmp_path, frames=60, trials=4, epochs=3)
    sweep = outputs(nb, "%lanesweep")
    assert pngs(sweep) and pngs(sweep)[0].startswith(PNG)  # the sweep chart, for headless viewers
    assert any("application/vnd.vegalite.v5+json" in o.get("data", {}) for o in sweep)
    assert "finished, 4/4 trial(s), tpe + median, maximize val.accuracy" in text_of(sweep)
    best = text_of(outputs(nb, "best = s.best"))
    assert best.startswith("best: trial ") and "val.accuracy 0." in best and "'lr': " in best
    states = best.split("trials: ", 1)[1].strip().split(", ")
    assert len(states) == 4 and all(s.split(" ")[1] in ("complete", "pruned") for s in states)
    compare = outputs(nb, "%lanecompare")
    assert pngs(compare) and "settings that differ" in text_of(compare)
