"""The docs' pictures are of a run that learns: scripts/docs_screenshots.sh trains with the
quickstart notebook's recipe and saves no picture of a run below 0.9 test accuracy
(scripts/docs_screenshots_check.py). Checked without running the script (minutes of training):
the check on fake ``metrics.json`` files, the recipe by reading the notebook, the spec and the
script side by side."""

from __future__ import annotations

import ast
import importlib.util
import json
import re
import shlex
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
QUICKSTART = REPO / "notebooks" / "01-quickstart.ipynb"
SPEC = REPO / "extension" / "ui-tests" / "screenshots" / "docs.spec.ts"
SCRIPT = REPO / "scripts" / "docs_screenshots.sh"


def load_check():
    spec = importlib.util.spec_from_file_location("docs_screenshots_check", REPO / "scripts" /
                                                  "docs_screenshots_check.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def write_metrics(run_dir: Path, best: float, last: float) -> Path:
    """A ``metrics.json`` as the trainer writes it: best.pt's test figure and the last model's."""
    run_dir.mkdir(parents=True, exist_ok=True)
    metrics = {"epochs": 10, "best_epoch": 8, "status": "completed",  # best.pt: the 9th epoch
               "test": {"accuracy": last, "fp": 0.1, "fn": 0.1, "frames": 40},
               "test_best": {"accuracy": best, "fp": 0.1, "fn": 0.1, "frames": 40}}
    (run_dir / "metrics.json").write_text(json.dumps(metrics))
    return run_dir


def test_a_run_below_the_floor_is_refused_with_its_accuracy(tmp_path, capsys):
    check = load_check()
    run = write_metrics(tmp_path / "demo-run", best=0.412, last=0.398)
    with pytest.raises(check.RunDidNotLearnError) as caught:
        check.learned(run)
    message = str(caught.value)
    assert "test accuracy 0.4120 (best.pt, epoch 9) is below 0.9" in message and "did not learn" in message
    assert isinstance(caught.value, check.UserError)
    assert check.main([str(run)]) == 1
    err = capsys.readouterr().err
    assert err.startswith("docs_screenshots: refusing: test accuracy 0.4120 (best.pt, epoch 9) is below 0.9")


def test_a_run_that_learned_passes(tmp_path, capsys):
    check = load_check()
    run = write_metrics(tmp_path / "demo-run", best=0.946, last=0.944)
    assert check.learned(run).accuracy == pytest.approx(0.946)
    assert check.main([str(run)]) == 0
    assert "the run learned: test acc 0.9460 (best.pt, epoch 9), 0.9440 (last, epoch 10)" in capsys.readouterr().out
    assert check.main([str(run), "--floor", "0.95"]) == 1  # the floor is the one asked for


@pytest.mark.parametrize(("content", "says"), [
    (None, "metrics.json is missing: the run wrote no test metrics"),
    ("{not json", "metrics.json cannot be read"),
    (json.dumps({"status": "completed"}), "holds no test accuracy (keys: status)"),
])
def test_a_run_without_test_metrics_is_refused(tmp_path, content, says):
    check = load_check()
    run = tmp_path / "demo-run"
    run.mkdir()
    if content is not None:
        (run / "metrics.json").write_text(content)
    with pytest.raises(check.RunDidNotLearnError, match=re.escape(says)):
        check.learned(run)


def _quickstart() -> tuple[dict, list[str], dict]:
    """The quickstart's parameters, its %lanetrain flags with them filled in, its synthesize() keywords."""
    cells = [c for c in json.loads(QUICKSTART.read_text())["cells"] if c["cell_type"] == "code"]
    params: dict = {}
    for node in ast.parse("".join(cells[0]["source"])).body:
        assert isinstance(node, ast.Assign)
        value = ast.literal_eval(node.value)
        target = node.targets[0]
        names = [e.id for e in target.elts] if isinstance(target, ast.Tuple) else [target.id]
        params.update(zip(names, value if isinstance(target, ast.Tuple) else [value]))
    line = next(l for c in cells for l in "".join(c["source"]).splitlines() if "%lanetrain" in l)
    flags = [str(params[w[1:]]) if w.startswith("$") else w for w in shlex.split(line.split("%lanetrain", 1)[1])]
    synth = next(n for c in cells if "synthesize(" in "".join(c["source"])
                 for n in ast.walk(ast.parse("".join(c["source"])))
                 if isinstance(n, ast.Call) and getattr(n.func, "id", "") == "synthesize")
    keywords = {k.arg: ast.literal_eval(k.value) for k in synth.keywords}
    return params, flags, keywords


def _options(flags: list[str], leave_out: tuple[str, ...]) -> dict[str, str]:
    out, i = {}, 0
    while i < len(flags):
        name = flags[i]
        has_value = i + 1 < len(flags) and not flags[i + 1].startswith("--")
        if name not in leave_out:
            out[name] = flags[i + 1] if has_value else ""
        i += 2 if has_value else 1
    return out


def test_the_screenshot_run_uses_the_quickstart_recipe():
    params, flags, keywords = _quickstart()
    recipe = "".join(re.findall(r"'([^']*)'", re.search(r"const RECIPE =(.*?);", SPEC.read_text(), re.S).group(1)))
    # what the run learns with; where its data is and what the notebook does after it are not the recipe
    wanted = _options(flags, ("--data", "--snapshot", "--wait"))
    assert _options(shlex.split(recipe), ()) == wanted
    assert {"--epochs": "10", "--lr": "0.02", "--warmup-steps": "10", "--img-height": "128",
            "--img-width": "320"}.items() <= wanted.items()
    script = SCRIPT.read_text().replace("\\\n", " ")
    synth = next(shlex.split(l) for l in script.splitlines() if "lanenb data synth" in l)
    assert synth[synth.index("--frames") + 1] == str(params["frames"]) == "200"
    for name in ("seed", "width", "height", "test_fraction"):
        assert synth[synth.index("--" + name.replace("_", "-")) + 1] == str(keywords[name]), name
    assert "docs_screenshots_check.py" in script  # and nothing is copied before it said yes
    assert script.index("docs_screenshots_check.py") < script.index("cp ")
