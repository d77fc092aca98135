"""A third-party backend needs no lanenb edit: the toy Slurm plug-in (tests/plugins/toy_slurm),
installed through the ``lanenb.backends`` entry point, is a ``TrainSpec`` backend with its own
checked options, ``%lanetrain --backend slurm --partition gpu --dry-run`` renders its job,
``--help`` lists its flags and the launch panel shows its section."""

from __future__ import annotations

import argparse
import sys

import pytest
from IPython.core.error import UsageError

from lanenb.commands.arguments import add_job_arguments, spec_from_args
from lanenb.contract.backends import available_backends, get_descriptor, load_entry_points, register_descriptor
from lanenb.errors import SpecError
from lanenb.jobs import BackendError, TrainSpec, validate


@pytest.fixture
def ip():
    from ipshell import session_shell

    return session_shell()


def test_the_entry_point_registers_the_toy_backend_without_loading_its_implementation(installed_toy):
    assert load_entry_points(force=True) == ["slurm"]
    assert "slurm" in available_backends()
    assert get_descriptor("slurm").summary.startswith("an sbatch job")
    assert "toy_slurm.backend" not in sys.modules  # the descriptor alone: no client imported


def test_the_toy_backends_options_live_in_backend_options_and_round_trip(installed_toy):
    load_entry_points(force=True)
    spec = TrainSpec(dataset="/data", backend="slurm", backend_options={"slurm": {"partition": "gpu"}})
    assert spec.options("slurm").partition == "gpu" and spec.slurm.partition == "gpu"
    assert TrainSpec.from_dict(spec.to_dict()) == spec
    assert TrainSpec(dataset="/data", backend="slurm").slurm.partition == "batch"  # its default
    assert "--device" in TrainSpec(dataset="/data", backend="slurm").trainer_args()  # gpus_optional=False: cpu


@pytest.mark.parametrize("fields, field, value", [
    ({"backend_options": {"slurm": {"partition": "gpu queue"}}}, "slurm.partition", "gpu queue"),
    ({"processes": 65}, "processes", 65),
])
def test_the_toy_backends_check_names_the_bad_value(installed_toy, fields, field, value):
    load_entry_points(force=True)
    with pytest.raises(SpecError) as info:
        TrainSpec(dataset="/data", backend="slurm", **fields)
    assert (info.value.field, info.value.value) == (field, value)
    assert [p.field for p in validate({"dataset": "/data", "backend": "slurm", **fields})] == [field]


def test_lanetrain_dry_run_renders_the_toy_job_with_its_partition(installed_toy, ip, capsys):
    load_entry_points(force=True)
    assert ip.run_line_magic("lanetrain", "--data /data --backend slurm --partition gpu -np 4 --dry-run") is None
    out = capsys.readouterr().out
    assert "backend slurm" in out and "#SBATCH --partition=gpu" in out and "#SBATCH --ntasks=4" in out
    assert "problem" not in out
    with pytest.raises(UsageError, match=r"--partition 'a b': must be a Slurm partition name"):
        ip.run_line_magic("lanetrain", "--data /data --backend slurm --partition 'a b' --dry-run")


def test_help_lists_the_toy_backend_and_its_flags_on_both_faces(installed_toy):
    load_entry_points(force=True)
    from lanenb.cli import build_parser
    from lanenb.notebook.magics import train_parser

    cli = next(a for a in build_parser()._actions if isinstance(a, argparse._SubParsersAction)).choices["train"]
    for text in (train_parser().format_help(), cli.format_help()):
        assert "slurm options (--backend slurm)" in text and "--partition NAME" in text
        assert "slurm: an sbatch job on a Slurm cluster" in " ".join(text.split())


def test_flags_fill_the_section_and_a_yaml_body_section_is_kept(installed_toy):
    load_entry_points(force=True)
    parser = add_job_arguments(argparse.ArgumentParser())
    ns = parser.parse_args(["--data", "/d", "--backend", "slurm", "--partition", "gpu"])
    spec = spec_from_args(ns, parser, {"slurm": {"account": "lanes"}})
    assert (spec.slurm.partition, spec.slurm.account) == ("gpu", "lanes")


def test_the_launch_panel_offers_the_toy_backend_and_its_section(installed_toy):
    load_entry_points(force=True)
    from lanenb.notebook.panel import TrainPanel

    panel = TrainPanel(backend="slurm", dataset="/data")
    assert "slurm" in panel.backend.options
    section = panel.sections["slurm"]
    assert section.layout.display == "" and panel.sections["azureml"].layout.display == "none"
    (partition, _key, _opt), _account = panel.section_options["slurm"]
    partition.value = "gpu"
    assert panel.spec_fields()["backend_options"]["slurm"] == {"partition": "gpu"}
    partition.value = "gpu queue"
    assert [p.field for p in panel.problems] == ["slurm.partition"]


def test_a_broken_plugin_is_skipped_and_a_non_descriptor_is_refused(installed_toy, tmp_path, caplog):
    info = next((tmp_path / "site").glob("*.dist-info"))
    (info / "entry_points.txt").write_text("[lanenb.backends]\nslurm = toy_slurm:DESCRIPTOR\n"
                                           "broken = toy_slurm:NO_SUCH_NAME\n")
    assert load_entry_points(force=True) == ["slurm"]
    assert "'broken'" in caplog.text and "local" in available_backends()
    with pytest.raises(BackendError, match="BackendDescriptor"):
        register_descriptor("slurm")  # type: ignore[arg-type]
