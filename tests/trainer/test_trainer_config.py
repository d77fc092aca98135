"""Config resolution: flags > RUN:AI env vars > defaults, and every bad value named."""

from __future__ import annotations

import pytest

from lanenb_trainer.config import ConfigError, TrainConfig, parse_bool, parse_config


@pytest.fixture()
def data(tmp_path):
    d = tmp_path / "data"
    d.mkdir()
    return d


def base(data, tmp_path):
    return ["--data", str(data), "--run-dir", str(tmp_path / "run")]


def test_env_vars_are_defaults_and_flags_win(data, tmp_path):
    env = {"BATCH_SIZE": "33", "USE_WORKERS": "true", "NUM_WORKERS": "4", "USE_VAL": "false",
           "VAL_BATCH_SIZE": "99", "ENABLE_SNAPSHOT": "true", "PVC_NAME": "pvc-download-tusimple-data-0"}
    cfg = parse_config(base(data, tmp_path), env)
    got = (cfg.batch_size, cfg.use_workers, cfg.num_workers, cfg.use_val, cfg.val_batch_size)
    assert got == (33, True, 4, False, 99)
    assert cfg.enable_snapshot and cfg.pvc_name == "pvc-download-tusimple-data-0"
    assert cfg.loader_workers == 4
    cfg = parse_config(base(data, tmp_path) + ["--batch-size", "5", "--no-use-workers", "--use-val"], env)
    assert (cfg.batch_size, cfg.use_workers, cfg.loader_workers, cfg.use_val) == (5, False, 0, True)


@pytest.mark.parametrize("var,value,expected", [
    ("USE_VAL", "maybe", "USE_VAL='maybe' is not a boolean"),
    ("USE_WORKERS", "yes please", "USE_WORKERS='yes please' is not a boolean"),
    ("BATCH_SIZE", "big", "BATCH_SIZE='big' is not an integer"),
    ("BATCH_SIZE", "0", "--batch-size (or env BATCH_SIZE) must be an integer >= 1, got 0"),
    ("NUM_WORKERS", "-1", "--num-workers (or env NUM_WORKERS) must be an integer >= 0, got -1"),
    ("ENABLE_SNAPSHOT", "true", "--enable-snapshot (or env ENABLE_SNAPSHOT=true) needs --pvc-name"),
])
def test_bad_env_values_are_named(data, tmp_path, var, value, expected):
    with pytest.raises(ConfigError) as exc:
        parse_config(base(data, tmp_path), {var: value})
    assert expected in str(exc.value)


@pytest.mark.parametrize("extra,expected", [
    (["--batch-size", "0"], "--batch-size (or env BATCH_SIZE) must be an integer >= 1, got 0"),
    (["--epochs", "0"], "--epochs must be an integer >= 1, got 0"),
    (["--engine", "mpi"], "--engine 'mpi' is not one of auto, horovod, ddp"),
    (["--backbone", "resnet50"], "--backbone 'resnet50' is not one of small, vgg16, resnet18, resnet34"),
    (["--img-height", "100"], "--img-height must be a multiple of 8 and >= 32"),
    (["--lr", "0"], "--lr must be > 0, got 0.0"),
    (["--weights", "/nonexistent/w.pt"], "--weights '/nonexistent/w.pt': no such file"),
    (["--resume"], "--resume: no checkpoint at"),
    (["--val-fraction", "0", "--use-val"], "--use-val (or env USE_VAL=true) needs --val-fraction > 0"),
    (["--device", "gpu"], "--device 'gpu' is not one of auto, cpu, cuda"),
    (["--amp-dtype", "half"], "--amp-dtype 'half' is not one of float16, bfloat16"),
])
def test_bad_flags_are_named(data, tmp_path, extra, expected):
    with pytest.raises(ConfigError) as exc:
        parse_config(base(data, tmp_path) + extra, {})
    assert expected in str(exc.value)


def test_missing_data_and_run_dir(tmp_path):
    with pytest.raises(ConfigError, match="--data is required"):
        parse_config(["--run-dir", str(tmp_path)], {})
    with pytest.raises(ConfigError, match=r"--data '/no/such/dir': no such directory"):
        parse_config(["--data", "/no/such/dir", "--run-dir", str(tmp_path)], {})
    with pytest.raises(ConfigError, match="--run-dir is required"):
        parse_config(["--data", str(tmp_path)], {})


def test_to_argv_round_trips(data, tmp_path):
    cfg = parse_config(base(data, tmp_path) + ["--epochs", "3", "--no-use-val", "--engine", "ddp"],
                       {"BATCH_SIZE": "7", "USE_WORKERS": "true"})
    again = parse_config(cfg.to_argv(), {"BATCH_SIZE": "1", "USE_WORKERS": "false"})
    assert again == cfg  # explicit flags: the ranks' own env cannot change the launcher's config


def test_parse_bool():
    assert parse_bool("TRUE", "X") is True and parse_bool(" false ", "X") is False
    with pytest.raises(ConfigError, match="X='2' is not a boolean"):
        parse_bool("2", "X")


def test_one_spelling_of_trainer_flags():
    """TrainConfig.to_argv and the launcher's trainer_argv are the same writer: a switch without a
    --no- form (--resume) is left out when off instead of becoming a flag the parser refuses."""
    from lanenb.launch.mpirun import trainer_argv
    from lanenb_trainer.flags import to_flags

    options = dict(data="/d", batch_size=4, use_val=False, resume=False, amp=True, weights=None)
    expected = ["--data", "/d", "--batch-size", "4", "--no-use-val", "--amp"]
    assert trainer_argv(**options) == to_flags(options) == expected
    assert "--no-resume" not in TrainConfig(resume=False).to_argv()
    assert TrainConfig(resume=True).to_argv().count("--resume") == 1


def test_every_config_field_is_documented():
    import dataclasses

    args = TrainConfig.__doc__.split("Args:", 1)[1]
    missing = [f.name for f in dataclasses.fields(TrainConfig) if f"{f.name}:" not in args and f"{f.name}," not in args]
    assert not missing, missing


def test_each_setting_is_declared_once_and_every_face_reads_it(data, tmp_path):
    """Issue 44: a trainer setting is one ``TrainConfig`` field (default, help, bound or choices);
    its flag, its ``--help`` line, its check and its argv come from there."""
    from dataclasses import fields

    from lanenb_trainer.config import TrainConfig, build_parser, setting_choices
    from lanenb_trainer.flags import NEGATABLE, flag_name

    parser = build_parser()
    flags = {a.dest: a for a in parser._actions if a.option_strings and a.dest != "help"
             and not a.option_strings[0].startswith("--no-")}
    assert set(flags) == {f.name for f in fields(TrainConfig)}  # every field a flag, no flag without one
    for f in fields(TrainConfig):
        assert f.metadata["help"], f.name
        assert flag_name(f.name) in flags[f.name].option_strings
        if f.name in NEGATABLE:
            assert parse_config(base(data, tmp_path) + ["--no-" + flag_name(f.name)[2:]], {}) is not None
        choices = setting_choices(f.name)
        if choices:  # the help names them, a value outside them is refused by its flag
            assert "|".join(choices) in flags[f.name].help
            with pytest.raises(ConfigError, match=rf"{flag_name(f.name)} 'nonsense' is not one of"):
                parse_config(base(data, tmp_path) + [flag_name(f.name), "nonsense"], {})
        minimum = f.metadata["minimum"]
        if minimum is not None:
            with pytest.raises(ConfigError, match=rf"{flag_name(f.name)}.* must be an integer >= {minimum}"):
                parse_config(base(data, tmp_path) + [flag_name(f.name), str(minimum - 1)], {})
    cfg = parse_config(base(data, tmp_path) + ["--batch-size", "5", "--engine", "ddp"], {})
    assert parse_config(cfg.to_argv(), {}) == cfg  # the argv the fields write reads back the same
