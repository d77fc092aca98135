"""The winner at another size: ``Sweep.scaled_params`` moves the learning rate by the linear or
square-root rule and says so in one line, which ``%lanesweep --attach NAME -np N`` and
``lanenb sweep show NAME -np N`` show under the trials table. The sweep is a real Optuna study
whose one trial is told finished (no job runs: the rule is about the study's winner)."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest
from IPython.core.error import UsageError
from IPython.utils.capture import capture_output

from lanenb.errors import UserError
from lanenb.jobs import TrainSpec
from lanenb.sweeps import sweep


@pytest.fixture(scope="module")
def ip():
    from ipshell import session_shell

    return session_shell()


def _won(name: str, tmp_path, *, lr: float = 0.02, extra: list[str] | None = None, finished: bool = True):
    """A sweep over --lr (1 rank x batch 4) whose trial 0 finished with ``lr``."""
    import optuna

    from lanenb.sweeps.space import SearchSpace
    from lanenb.sweeps.study import load_study

    spec = TrainSpec(dataset=str(tmp_path / "data"), processes=1, batch_size=4, epochs=2, extra_args=extra or [])
    s = sweep(spec, {"lr": "1e-4..1e-1:log"}, name=name, trials=2, start=False)
    if finished:
        dist = SearchSpace.parse({"lr": "1e-4..1e-1:log"}).distributions()
        load_study(name).add_trial(optuna.trial.create_trial(
            params={"lr": lr}, distributions=dist, value=0.8, intermediate_values={1: 0.7, 2: 0.8},
            user_attrs={"job": f"{name}-0"}))
    return s


LINEAR_4 = ("at 4 rank(s) x batch 4 = 16 images per step (chosen at 1 x 4 = 4): --lr 0.02 per rank (was 0.02); "
            "the effective rate (--lr x ranks) 0.02 -> 0.08, x4 as the batch, by the linear rule with warm-up "
            "(Goyal et al., 2017); its 50 warm-up steps kept")
SQRT_4 = ("--lr 0.01 per rank (was 0.02); the effective rate (--lr x ranks) 0.02 -> 0.04, x2 = sqrt(4), by the "
          "square-root rule with warm-up (Hoffer et al., 2017)")


@pytest.mark.parametrize("size, rule, lr, said", [
    # the trainer's --lr is per rank and multiplied by the ranks: the linear rule leaves it as it
    # is when only the ranks change; the square-root rule halves it for 4x the images
    ({"processes": 4}, "linear", 0.02, LINEAR_4),
    ({"processes": 4}, "sqrt", 0.01, SQRT_4),
    ({"batch_size": 16}, "linear", 0.08, "at 1 rank(s) x batch 16 = 16 images per step (chosen at 1 x 4 = 4): --lr"),
    ({"processes": 2, "batch_size": 2}, "linear", 0.01, "at 2 rank(s) x batch 2 = 4 images per step"),
], ids=["4-ranks-linear", "4-ranks-sqrt", "batch-16", "2-ranks-batch-2"])
def test_the_winner_at_another_size_gets_its_rate_by_the_rule_named(tmp_path, size, rule, lr, said):
    s = _won("sized", tmp_path)
    scaled = s.scaled_params(rule=rule, **size)
    assert scaled.lr == pytest.approx(lr) and scaled.params["lr"] == pytest.approx(lr) and scaled.rule == rule
    assert scaled.params["processes"] == size.get("processes", 1)
    assert scaled.params["batch_size"] == size.get("batch_size", 4)
    assert said in scaled.line and said in str(scaled)
    assert s.size_note(rule=rule, **size) == f"trial 0 (the best) {scaled.line}"


def test_the_warm_up_is_the_winners_and_its_absence_is_said(tmp_path):
    s = _won("nowarm", tmp_path, extra=["--warmup-steps", "0"])
    assert "it had no warm-up: give one at a larger batch (--warmup-steps)" in s.scaled_params(processes=2).line
    s = _won("warm", tmp_path, extra=["--warmup-steps", "120"])
    assert "its 120 warm-up steps kept" in s.scaled_params(processes=2).line


def test_bad_sizes_and_rules_are_named(tmp_path):
    s = _won("badsize", tmp_path)
    for kwargs, said in (({"processes": 0}, "processes=0: must be a whole number >= 1"),
                         ({"batch_size": 2.5}, "batch_size=2.5: must be a whole number >= 1"),
                         ({"processes": 2, "rule": "cubic"}, "rule 'cubic' is not one of linear, sqrt")):
        with pytest.raises(UserError, match=said.replace("(", r"\(").replace(")", r"\)")):
            s.scaled_params(**kwargs)
    early = _won("early", tmp_path, finished=False)
    with pytest.raises(UserError, match="sweep early has no finished trial yet"):
        early.scaled_params(processes=2)
    assert early.size_note(processes=2).startswith("no finished trial yet")
    with pytest.raises(UserError, match="rule 'cubic'"):  # a typo is said even before a winner
        early.size_note(processes=2, rule="cubic")


def test_lanesweep_attach_at_another_size_shows_the_rate_under_the_table(ip, tmp_path):
    s = _won("shown", tmp_path)
    with capture_output() as cap:
        back = ip.run_line_magic("lanesweep", "--attach shown -np 4 --lr-rule sqrt")
    assert back.name == "shown"
    texts = [o.data.get("text/plain", "") for o in cap.outputs]
    assert any(s.scaled_params(processes=4, rule="sqrt").line in t for t in texts), texts
    assert any("trial 0 (the best) at 4 rank(s)" in o.data.get("text/html", "") for o in cap.outputs)
    with capture_output() as cap:
        ip.run_line_magic("lanesweep", "--attach shown")  # no size asked: no line
    assert not any("rank(s) x batch" in o.data.get("text/plain", "") for o in cap.outputs)
    for line, said in (("--attach shown -np 2,4", "--processes 2,4: give one size to see the winner at"),
                       ("--attach shown --lr-rule sqrt", "--lr-rule sqrt: give the size to scale the winner to"),
                       ("--attach shown -np 0", "processes=0: must be a whole number >= 1")):
        with pytest.raises(UsageError, match=said):
            ip.run_line_magic("lanesweep", line)


def test_lanenb_sweep_show_at_another_size(tmp_path):
    s = _won("console", tmp_path)
    out = subprocess.run([sys.executable, "-m", "lanenb", "sweep", "show", "console", "--batch-size", "8"],
                         capture_output=True, text=True, env=dict(os.environ), timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.rstrip().endswith(f"trial 0 (the best) {s.scaled_params(batch_size=8).line}")
    assert "--lr 0.04 per rank (was 0.02)" in out.stdout
