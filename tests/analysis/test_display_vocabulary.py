"""One display vocabulary (``lanenb.charts.vocabulary``) and one rule for when a verdict shows
(``shown_verdict``): every face reads them, so the notebook, ``%lanejobs``, the server's
payloads and the extension's CSS cannot drift apart again."""

from __future__ import annotations

from pathlib import Path

import pytest
from timing_stream import Run, event, fold

from lanenb.analysis.doctor import KINDS, Verdict, diagnose, shown_verdict
from lanenb.analysis.runstate import RunState
from lanenb.charts import vocabulary
from lanenb.contract.status import JobState

ROOT = Path(__file__).parents[2]
HEALTHY = {"data_s": 0.01, "h2d_s": 0.01, "compute_s": 0.40, "optimizer_s": 0.02}


def started(timing_every: int = 10) -> RunState:
    state = RunState()
    for rank in (0, 1):
        state.fold(event("start", rank, t=999.0, world_size=2, host="node-a", engine="ddp", device="cpu",
                         config={"batch_size": 4, "epochs": 1, "num_workers": 2, "use_workers": True,
                                 "timing_every": timing_every}))
    return state


def test_the_extensions_css_is_generated_from_the_vocabulary():
    css = (ROOT / "extension" / "style" / "vocabulary.css").read_text()
    assert css == vocabulary.css(), "run: python -m lanenb.charts.vocabulary > extension/style/vocabulary.css"
    assert "vocabulary.css" in (ROOT / "extension" / "style" / "index.css").read_text()
    assert "vocabulary.css" in (ROOT / "extension" / "style" / "index.js").read_text()


def test_every_job_state_and_verdict_kind_has_one_severity_and_lost_is_an_error_everywhere():
    assert {s.value for s in JobState} <= set(vocabulary.STATE_SEVERITY)
    assert set(KINDS) == set(vocabulary.VERDICT_SEVERITY)
    assert set(vocabulary.STATE_SEVERITY.values()) | set(vocabulary.VERDICT_SEVERITY.values()) <= set(
        vocabulary.SEVERITIES)
    assert vocabulary.state_severity("lost") == "error" == vocabulary.state_severity("failed")
    assert vocabulary.colour("error") == "var(--lanenb-error, #c62828)"
    # the stylesheets colour states only through the generated rules, never with a colour of their own
    base = (ROOT / "extension" / "style" / "base.css").read_text()
    assert "[data-state=" not in base and ".lanenb-verdict[data-kind=" not in base
    assert ".lanenb-chip[data-state='lost']" in vocabulary.css()


@pytest.mark.parametrize("case,shown", [
    ("not started", None),
    ("timing off", None),
    ("measuring", "unknown"),
    ("healthy", "healthy"),
    ("input-bound", "input-bound"),
])
def test_one_rule_says_when_a_verdict_shows(case, shown):
    if case == "not started":
        state = started()
    elif case == "timing off":
        state = started(timing_every=0)
    elif case == "measuring":
        state = fold(Run().windows(lambda r, i: dict(HEALTHY), 1), started())
    elif case == "healthy":
        state = fold(Run().windows(lambda r, i: dict(HEALTHY), 3), started())
    else:
        state = fold(Run().windows(lambda r, i: {**HEALTHY, "data_s": 0.3}, 3), started())
    verdict = shown_verdict(state)
    assert (None if verdict is None else verdict.kind) == shown
    assert diagnose(state).kind == (shown or "unknown")  # diagnose still answers when asked (lanenb jobs show)


def test_a_verdict_carries_its_severity_in_its_payload():
    verdict = Verdict("straggler", "rank 1 takes 1.5x", "check node-b", rank=1)
    assert verdict.severity == "error"
    assert verdict.to_dict()["severity"] == "error" and verdict.to_dict()["line"] == str(verdict)


def test_every_face_applies_the_rule_to_the_same_state():
    """The list row, ``%lanejobs``'s cell and the live view's HTML agree: nothing before timing,
    the same coloured line once there is a cause."""
    import re

    from lanenb.analysis.summary import job_summary
    from lanenb.notebook.magics import JobTable

    class FakeJob:  # the row needs a name, backend, creation time and run dir only
        name, backend_name, created, run_dir = "lane-1", "local", None, None

    quiet = started()
    row = job_summary(FakeJob(), quiet)
    assert row["verdict"] is None and JobTable._row(row)["verdict"] == "-"
    slow = fold(Run().windows(lambda r, i: {**HEALTHY, "data_s": 0.3}, 3), started())
    row = job_summary(FakeJob(), slow)
    assert row["verdict"]["kind"] == "input-bound" and row["verdict"]["severity"] == "warn"
    assert JobTable._row(row)["verdict"] == row["verdict"]["line"] == str(diagnose(slow))
    for module in (ROOT / "lanenb" / "notebook").glob("*.py"):
        source = module.read_text()
        assert not re.search(r"#[0-9a-fA-F]{6}", source), f"{module.name}: colours come from the vocabulary"
