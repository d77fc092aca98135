"""lanenb predict / lanenb.predict and lanenb export on a model trained for real: predictions equal
the trainer's own test evaluation, exports give the eager logits, bad input is named."""

from __future__ import annotations

import json
from pathlib import Path

import cv2
import numpy as np
import pytest
import torch

from lanenb.cli import main
from lanenb.inference.predict import Predictor, predict


def lines(path: Path) -> list[dict]:
    return [json.loads(l) for l in path.read_text().splitlines()]


def test_split_predictions_equal_the_trainers_test_evaluation(trained, tmp_path, capsys):
    data, run = trained
    assert main(["predict", "--weights", str(run / "checkpoints" / "last.pt"), "--data", str(data),
                 "--split", "test", "--out", str(tmp_path / "out")]) == 0
    ours = {l["raw_file"]: l["lanes"] for l in lines(tmp_path / "out" / "predictions.json")}
    trainer = {l["raw_file"]: l["lanes"] for l in lines(run / "predictions" / "test.json")}
    assert ours == trainer and len(ours) == 6
    metrics = json.loads((tmp_path / "out" / "metrics.json").read_text())
    test = json.loads((run / "metrics.json").read_text())["test"]
    assert metrics["accuracy"] == pytest.approx(test["accuracy"]) and metrics["fn"] == pytest.approx(test["fn"])
    # both score the lanes alone, with the official 200 ms rule beside (the machine's load changes only that)
    for scored in (metrics, test):
        assert {"official_accuracy", "over_time_frames", "latency_ms_p50"} <= set(scored)
        assert scored["official_accuracy"] <= scored["accuracy"]
    assert len(list((tmp_path / "out" / "images").glob("*.png"))) == 6
    assert "run_time per frame p50" in capsys.readouterr().out


def test_python_api_on_paths_and_frames_gives_lanes_in_image_pixels(trained):
    import lanenb

    data, run = trained
    preds = lanenb.predict(run, data / "clips", batch_size=4)
    assert len(preds) == 24 and all(p.size == (180, 320) for p in preds)
    assert preds[0].h_samples == [int(round(y * 180 / 720)) for y in range(160, 720, 10)]
    model = Predictor(run)
    frame = cv2.imread(preds[0].source)
    big = cv2.resize(frame, (640, 360), interpolation=cv2.INTER_LINEAR)
    small_pred, big_pred = predict(model, [frame, big])
    assert len(big_pred.exist) == 4 and all(0.0 <= e <= 1.0 for e in big_pred.exist)
    for a, b in zip(small_pred.lanes, big_pred.lanes):  # same lanes, twice the pixels
        pts = [(x, y) for x, y in zip(a, b) if x >= 0 and y >= 0]
        assert all(abs(2 * x - y) <= 8 for x, y in pts)
    assert all(x >= 0 for lane in big_pred.points() for x, _ in lane)


def test_video_gets_an_mp4_with_every_frame(trained, tmp_path):
    data, run = trained
    frames = sorted((data / "clips").rglob("*.jpg"))[:10]
    video = tmp_path / "drive.mp4"
    writer = cv2.VideoWriter(str(video), cv2.VideoWriter_fourcc(*"mp4v"), 10, (320, 180))
    for f in frames:
        writer.write(cv2.imread(str(f)))
    writer.release()
    assert main(["predict", "--weights", str(run), "--video", str(video), "--out", str(tmp_path / "v"),
                 "--batch-size", "4"]) == 0
    out = tmp_path / "v" / "drive-lanes.mp4"
    cap = cv2.VideoCapture(str(out))
    assert int(cap.get(cv2.CAP_PROP_FRAME_COUNT)) == 10
    cap.release()
    assert [l["raw_file"] for l in lines(tmp_path / "v" / "predictions.json")][:2] == ["drive/000000", "drive/000001"]
    assert not list((tmp_path / "v").glob(".*part*"))


@pytest.mark.parametrize("case,message", [
    ("missing", "no such file or run directory"),
    ("empty_dir", "a directory without checkpoints/best.pt or last.pt"),
    ("not_checkpoint", "is not a lanenb training checkpoint"),
    ("garbage", "cannot read checkpoint"),
    ("backbone", "was trained with backbone 'small', not 'vgg16'"),
    ("bad_image", "cannot read image"),
    ("no_images", "no image files (jpg, png, bmp) found there"),
    ("batch", "--batch-size must be >= 1, got 0"),
    ("device", "device='tpu': use auto, cpu or cuda[:N]"),
    ("bad_video", "cannot open video"),
])
def test_predict_bad_input_is_named(trained, tmp_path, capsys, case, message):
    data, run = trained
    weights, extra = str(run), ["--images", str(data / "clips")]
    if case == "missing":
        weights = str(tmp_path / "nope")
    elif case == "empty_dir":
        weights = str(tmp_path)
    elif case == "not_checkpoint":
        torch.save({"a": torch.zeros(1)}, tmp_path / "w.pt")
        weights = str(tmp_path / "w.pt")
    elif case == "garbage":
        (tmp_path / "g.pt").write_bytes(b"not a torch file")
        weights = str(tmp_path / "g.pt")
    elif case == "backbone":
        extra += ["--backbone", "vgg16"]
    elif case == "bad_image":
        (tmp_path / "imgs").mkdir()
        (tmp_path / "imgs" / "broken.jpg").write_bytes(b"\xff\xd8 not really a jpeg")
        extra = ["--images", str(tmp_path / "imgs")]
    elif case == "no_images":
        extra = ["--images", str(tmp_path / "*.jpg")]
    elif case == "batch":
        extra += ["--batch-size", "0"]
    elif case == "device":
        extra += ["--device", "tpu"]
    elif case == "bad_video":
        (tmp_path / "x.mp4").write_bytes(b"junk")
        extra = ["--video", str(tmp_path / "x.mp4")]
    assert main(["predict", "--weights", weights, *extra, "--out", str(tmp_path / "out")]) == 2
    assert message in capsys.readouterr().err


@pytest.mark.parametrize("fmt", ["onnx", "torchscript"])
def test_export_gives_the_eager_logits_with_a_dynamic_batch(trained, tmp_path, fmt):
    from lanenb.inference.export import export

    _, run = trained
    result = export(run, fmt, tmp_path / f"model.{fmt}")
    assert result.path.is_file() and result.input_size == (64, 128) and result.max_abs_diff < 1e-4
    model = Predictor(run, device="cpu").model
    x = torch.randn(3, 3, 64, 128)
    with torch.no_grad():
        ref = [t.numpy() for t in model(x)]
    if fmt == "onnx":
        import onnx
        import onnxruntime as ort

        assert onnx.load(str(result.path)).opset_import[0].version >= 17
        session = ort.InferenceSession(str(result.path), providers=["CPUExecutionProvider"])
        got = session.run(None, {"images": x.numpy()})
    else:
        with torch.no_grad():
            got = [t.numpy() for t in torch.jit.load(str(result.path))(x)]
    assert got[0].shape == (3, 5, 64, 128) and got[1].shape == (3, 4)
    assert max(float(np.abs(r - g).max()) for r, g in zip(ref, got)) < 1e-4


@pytest.mark.parametrize("argv,message", [
    (["--format", "tflite"], "argument --format: invalid choice: 'tflite'"),
    (["--img-height", "60"], "img_height=60: must be a multiple of 8 and >= 32"),
    (["--opset", "11"], "opset=11: must be an integer >= 17"),
])
def test_export_bad_input(trained, tmp_path, capsys, argv, message):
    _, run = trained
    try:
        code = main(["export", "--weights", str(run), "--out", str(tmp_path / "m"), *argv])
    except SystemExit as exc:  # argparse's own choices check
        code = exc.code
    assert code == 2 and message in capsys.readouterr().err
    assert not (tmp_path / "m").exists()


def test_plain_message_passing_equals_the_fast_path():
    from lanenb_trainer.models.message_passing import MessagePassing

    torch.manual_seed(0)
    mp = MessagePassing(8, 9).double()
    x = torch.randn(2, 8, 7, 11, dtype=torch.float64)
    fast = mp(x)
    mp.plain = True
    assert torch.allclose(mp(x), fast, atol=1e-12, rtol=0)


def test_build_model_loads_a_checkpoint_at_its_trained_size(trained):
    from lanenb_trainer.models import build_from_checkpoint, build_model

    _, run = trained
    model = build_model("small", input_size=(64, 128), weights=run / "checkpoints" / "best.pt")
    rebuilt, args = build_from_checkpoint(run / "checkpoints" / "best.pt")
    assert args["input_size"] == [64, 128] and args["backbone"] == "small"
    assert model.exist_grid == rebuilt.exist_grid == (4, 8)


def test_prediction_viewer_predicts_a_run_stopped_before_its_test_evaluation(trained, tmp_path):
    import shutil

    from lanenb.notebook import PredictionViewer

    _data, run = trained
    copy = tmp_path / "run"
    shutil.copytree(run, copy)
    (copy / "predictions" / "test.json").unlink()
    view = PredictionViewer(copy)
    assert "predicted now with" in view.source and len(view.result.frames) == 6
    assert set(view._pred) == set(view._gt) and bytes(view.image.value).startswith(b"\x89PNG")


def test_without_validation_the_headline_is_the_last_models(trained):
    """A --no-val run picks no best model (best.pt is kept by train loss only): metrics.json
    scores and heads with the last model, its epochs counted from 1 in every word."""
    _data, run = trained
    metrics = json.loads((run / "metrics.json").read_text())
    assert (metrics["headline_model"], metrics["test_best"], metrics["best_epoch"]) == ("last model", None, None)
    assert metrics["models"] == {"test": f"last model (after epoch 2, step {metrics['steps']})", "test_best": None}
    head = metrics["headline"]
    assert (head["label"], head["epoch"], head["other"]) == ("last, epoch 2", 1, None)
    assert head["accuracy"] == metrics["accuracy"] == metrics["test"]["accuracy"]
    assert (run / "checkpoints" / "best.pt").is_file()  # still written (by train loss), not presented
