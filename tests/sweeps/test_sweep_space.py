"""The search syntax, the objective and what a sweep refuses before anything starts."""

from __future__ import annotations

import pytest

from lanenb.errors import UserError
from lanenb.jobs import TrainSpec
from lanenb.sweeps import Objective, SearchSpace, SearchSpaceError, sweep
from lanenb.sweeps.params import apply_params, check_searchable


def test_ranges_choices_and_options_become_optuna_distributions():
    space = SearchSpace.parse({"--lr": "1e-3..1e-1:log", "batch-size": "4,8,16", "warmup_steps": "0..100:int",
                               "momentum": "0.8..0.99", "backbone": ["small", "vgg16"]})
    dists = space.distributions()
    assert (dists["lr"].low, dists["lr"].high, dists["lr"].log) == (1e-3, 1e-1, True)
    assert dists["batch_size"].choices == (4, 8, 16)  # numbers stay numbers
    assert (dists["warmup_steps"].low, dists["warmup_steps"].high, dists["warmup_steps"].step) == (0, 100, 1)
    assert not dists["momentum"].log and dists["backbone"].choices == ("small", "vgg16")
    assert SearchSpace.from_dict(space.to_dict()) == space  # kept in the study as it was given
    assert [d.text() for d in space.dimensions][:3] == ["0.001..0.1:log", "4,8,16", "0..100:int"]


@pytest.mark.parametrize("flag, value, said", [
    ("lr", "0.1..0.01", "low bound must be below"),
    ("lr", "0..1:log", "must stay above 0"),
    ("lr", "a..1", "both bounds must be numbers"),
    ("lr", "1e-3..1e-1:logg", "unknown option :logg"),
    ("warmup_steps", "0.5..10:int", "whole numbers"),
    ("batch_size", "4,", "at least two"),
    ("batch_size", "4,4", "listed twice"),
    ("lr", "0.01", "is not a search"),
])
def test_bad_dimensions_name_the_flag_and_value(flag, value, said):
    with pytest.raises(SearchSpaceError) as err:
        SearchSpace.parse({flag: value})
    assert said in str(err.value) and f"--{flag.replace('_', '-')}" in str(err.value) and value in str(err.value)


def test_only_flags_that_vary_a_run_can_be_searched(tmp_path):
    with pytest.raises(SearchSpaceError, match="--lrr cannot be searched"):
        check_searchable(SearchSpace.parse({"lrr": "1..2"}))
    with pytest.raises(SearchSpaceError, match="--dataset cannot be searched"):
        check_searchable(SearchSpace.parse({"dataset": "a,b"}))
    base = TrainSpec(dataset=str(tmp_path), processes=2, extra_args=["--img-height", "64"], name="base")
    trial = apply_params(base, {"batch_size": 16, "lr": 0.01, "warmup_steps": 5}, name="s-3")
    assert (trial.name, trial.batch_size, trial.processes, trial.run_dir) == ("s-3", 16, 2, None)
    assert trial.extra_args == ["--img-height", "64", "--lr", "0.01", "--warmup-steps", "5"]


def test_the_objective_is_a_validation_metric():
    assert Objective.parse() == Objective("val", "accuracy", "maximize")
    assert Objective.parse("val.fn").direction == "minimize"
    assert Objective.parse("accuracy", "minimize").label == "val.accuracy"
    with pytest.raises(UserError, match="test split is for the final figure"):
        Objective.parse("test.accuracy")
    with pytest.raises(UserError, match="direction 'up'"):
        Objective.parse("val.accuracy", "up")


def test_a_sweep_refuses_before_it_starts(tmp_path):
    spec = TrainSpec(dataset=str(tmp_path), processes=1)
    with pytest.raises(UserError, match="sweep name 'Bad_Name'"):
        sweep(spec, {"lr": "1e-3..1e-1"}, name="Bad_Name", start=False)
    with pytest.raises(UserError, match=r"parallel=64 trials x 1 process\(es\) = 64 ranks"):
        sweep(spec, {"lr": "1e-3..1e-1"}, name="big", parallel=64, start=False)
    with pytest.raises(UserError, match=r"-e HF_TOKEN=\.\.\.: a sweep .* never stores secret values"):
        sweep(spec.replace(env={"HF_TOKEN": "hf_abc"}), {"lr": "1e-3..1e-1"}, name="secret", start=False)
    # by shape too (issue 43): a proxy's password, a database URL's, wherever they sit
    with pytest.raises(UserError, match=r"env\.HTTPS_PROXY holds a credential .* never stores secret values"):
        sweep(spec.replace(env={"HTTPS_PROXY": "http://me:pr0xy-pass-99@proxy:3128"}), {"lr": "1e-3..1e-1"},
              name="shaped", start=False)
    with pytest.raises(UserError, match=r"extra_args\[1\] holds a credential"):
        sweep(spec.replace(extra_args=["--note", "postgres://u:db-pass-1234@db/x"]), {"lr": "1e-3..1e-1"},
              name="shaped2", start=False)
    from lanenb.sweeps.sweep import list_sweeps

    assert list_sweeps() == []  # nothing stored
    with pytest.raises(UserError, match="needs validation results"):
        sweep(spec.replace(use_val=False), {"lr": "1e-3..1e-1"}, name="noval", start=False)
    with pytest.raises(UserError, match="grid sampler walks lists only: --lr"):
        sweep(spec, {"lr": "1e-3..1e-1"}, name="grid", sampler="grid", start=False)
    with pytest.raises(UserError, match="pruner 'hyperband' is not one of asha, median, none"):
        sweep(spec, {"lr": "1e-3..1e-1"}, name="prune", pruner="hyperband", start=False)
    made = sweep(spec, {"lr": "1e-3..1e-1"}, name="once", start=False)
    assert made.state == "created" and made.trials() == []  # made, never started
    with pytest.raises(UserError, match="a sweep named 'once' exists"):
        sweep(spec, {"lr": "1e-3..1e-1"}, name="once", start=False)


def test_the_learning_rate_follows_the_global_batch_by_the_rule():
    from lanenb.sweeps.scaling_rule import scaled_lr

    same = dict(batch_size=4, processes=2)
    # linear: twice the per-rank batch, twice the rate
    assert scaled_lr(0.01, **same, new_batch_size=8, new_processes=2) == pytest.approx(0.02)
    # more ranks: the trainer already multiplies --lr by the world size, so linear keeps --lr
    assert scaled_lr(0.01, **same, new_batch_size=4, new_processes=8) == pytest.approx(0.01)
    # sqrt: 4x the global batch, 2x the effective rate, spread over 4x the ranks
    assert scaled_lr(0.01, **same, new_batch_size=4, new_processes=8, rule="sqrt") == pytest.approx(0.005)
    with pytest.raises(UserError, match="rule 'cubic' is not one of linear, sqrt"):
        scaled_lr(0.01, **same, new_batch_size=4, new_processes=2, rule="cubic")
    with pytest.raises(UserError, match="new processes=0"):
        scaled_lr(0.01, **same, new_batch_size=4, new_processes=0)


@pytest.mark.parametrize("pruner,expected", [
    # ASHA (reduction factor 4): 9 trials at the rung, the top quarter go on: the 2nd best, 0.700, is the cutoff
    ("asha", ("pruned at epoch 1: val.accuracy 0.628, below the rung's cutoff 0.700 (the top quarter of 9 trials "
              "there; best 0.746)")),
    ("median", "pruned at epoch 1: val.accuracy 0.628, the other trials' median there 0.175 (best 0.746)"),
])
def test_a_pruned_trial_says_why_in_its_pruners_own_rule(pruner, expected):
    """ASHA keeps the top quarter of a rung, not the trials above the median: a trial at 0.628
    with the median at 0.175 is pruned because two trials did better, and says so."""
    import optuna

    from lanenb.sweeps.driver import _pruned_why, _Running
    from lanenb.sweeps.study import Objective, make_pruner

    study = optuna.create_study(direction="maximize", pruner=make_pruner(pruner, 1))
    for value in (0.746, 0.700, 0.255, 0.200, 0.150, 0.120, 0.110, 0.100):
        trial = study.ask()
        trial.report(value, 1)
        study.tell(trial, value)
    loser = study.ask()
    loser.report(0.628, 1)
    assert _pruned_why(study, _Running(loser, None, values={1: 0.628}), 1, Objective()) == expected
