"""The magics in a real IPython shell: every flag's bad input gets one readable line, jobs launched
with %lanetrain run for real (mpirun + supervisor) and the other magics find them."""

from __future__ import annotations

import argparse

import pytest
from IPython.core.error import UsageError
from notebook_support import training_script

from lanenb.commands.arguments import add_job_arguments, job_flags
from lanenb.jobs import JobState, get_job, list_jobs


def usage(ip, magic: str, line: str, cell: str | None = None) -> str:
    with pytest.raises(UsageError) as info:
        if cell is None:
            ip.run_line_magic(magic, line)
        else:
            ip.run_cell_magic(magic, line, cell)
    return str(info.value)


@pytest.fixture
def data(tmp_path):
    d = tmp_path / "data"
    d.mkdir(exist_ok=True)
    return d


# one bad value per %lanetrain flag (the job flags and a trainer flag), with its message
BAD_FLAGS = [
    ("--data /no/such/dir", "--data '/no/such/dir': no such directory"),
    ("--processes 0", "--processes 0: must be >= 1"),
    ("--processes two", "argument --processes/-np: invalid int value: 'two'"),
    ("--gpus -1", "--gpus -1: must be >= 0"),
    ("--gpus 1", "--gpus 1: no NVIDIA GPU found on this machine"),
    ("--batch-size 0", "--batch-size 0: must be >= 1"),
    ("--epochs 0", "--epochs 0: must be >= 1"),
    ("--engine tf", "argument --engine: invalid choice: 'tf'"),
    ("--backbone alexnet", "argument --backbone: invalid choice: 'alexnet'"),
    ("--backend slurm", "--backend slurm: must be one of azureml, kubernetes, local"),
    ("--pvc nocolon", "--pvc nocolon: must be 'name:/mount' or 'name:/mount:ro'"),
    ("--pvc data:relative", "mount path must be absolute"),
    ("--image 'a b'", "--image 'a b': must not contain whitespace"),
    ("-e 1BAD=x", "env='1BAD': is not a valid environment variable name"),
    ("-e NOVALUE", "env='NOVALUE': must be KEY=VALUE"),
    ("--snapshot --backend kubernetes", "pvc_name=None: is required when enable_snapshot is true"),
    ("--pvc-name Bad_Name", "--pvc-name Bad_Name: must be an RFC 1123 name"),
    ("--name Bad_Name", "--name Bad_Name: must be an RFC 1123 label"),
    ("--namespace Bad_NS", "--namespace Bad_NS: must be an RFC 1123 label"),
    ("--project Bad_P", "--project Bad_P: must be an RFC 1123 label"),
    ("--max-steps -1", "--max-steps -1: must be >= 0"),
    ("--max-restarts -1", "--max-restarts -1: must be >= 0"),
    ("--label team", "--label team: must be KEY=VALUE"),
    ("--num-workers -1", "--num-workers -1: must be >= 0"),
    ("--val-batch-size 0", "--val-batch-size 0: must be >= 1"),
    ("--cpu lots", "--cpu lots: must be a Kubernetes quantity"),
    ("--memory=-1Gi", "--memory -1Gi: must be a Kubernetes quantity"),
    ("--context ''", "--context '': must be a non-empty string"),
    ("--img-height 13", "--img-height must be a multiple of 8 and >= 32"),
    ("--lr 0", "--lr must be > 0, got 0.0"),
    ("-e BATCH_SIZE=zero", "environment variable BATCH_SIZE='zero': must be an integer"),
    ("--bogus 3", "unrecognized arguments: --bogus 3"),
    ("--timeout x", "argument --timeout: invalid float value: 'x'"),
    ("--timeout 5", "--timeout 5 applies only with --wait"),
    ("--wait --timeout 0", "--timeout must be > 0 seconds, got 0"),
    ("--wait --dry-run", "--wait and --dry-run exclude each other: --dry-run launches nothing"),
    # AzureML options: their spelling is checked whatever the backend; the rest before anything is sent
    ("--compute 1gpu", "--compute 1gpu: must be a compute cluster name"),
    ("--subscription prod", "--subscription prod: must be a subscription id"),
    ("--resource-group rg.", "--resource-group rg.: must be a resource group name"),
    ("--workspace ws", "--workspace ws: must be a workspace name"),
    ("--azure-config /nonexistent/config.json --backend azureml --compute gpu-cluster",
     "--azure-config /nonexistent/config.json: no such file"),
    ("--azureml-environment trainer", "--azureml-environment trainer: must name a registered environment"),
    ("--instance-count 0", "--instance-count 0: must be >= 1"),
    ("--shm-size 16GB", "--shm-size 16GB: must be a size such as '16g'"),
    ("--data-kind blob", "argument --data-kind: invalid choice: 'blob'"),
    ("--experiment a/b", "--experiment a/b: must be 1-255 letters"),
]


@pytest.mark.parametrize("line,message", BAD_FLAGS, ids=[b[0] for b in BAD_FLAGS])
def test_lanetrain_bad_flag_is_one_line_naming_the_value(ip, data, line, message):
    full = line if line.startswith("--data") else f"--data {data} {line}"
    assert message in usage(ip, "lanetrain", full)
    assert list_jobs() == []  # nothing recorded, nothing started


def test_every_job_flag_has_a_bad_input_case():
    covered = {line.split()[0].split("=")[0] for line, _ in BAD_FLAGS}
    switches = {"--large-shm", "--no-val", "--run-dir", "--use-workers", "--oversubscribe",  # switches: no bad value
                "--no-use-workers", "--use-val", "--no-enable-snapshot", "--openshift", "--no-openshift",
                "--no-network-policy"}
    flags = {flags[0] for flags, _ in job_flags()} - switches  # the job's and every backend's
    flags -= {"--environment"}
    assert flags - covered - {"-e"} == set(), flags - covered


def test_lanetrain_and_lanenb_train_accept_the_same_flags():
    """The two parsers are one flag set (job, trainer and run flags: --wait, --dry-run, --timeout);
    the CLI adds only its help and the console flags (the notebook has the live view instead)."""
    from lanenb.cli import build_parser
    from lanenb.cli.train import CONSOLE_FLAGS
    from lanenb.notebook.magics import train_parser

    def options(parser: argparse.ArgumentParser) -> dict[str, tuple]:
        return {o: (a.dest, a.nargs, a.const, a.default, a.type, a.choices)
                for a in parser._actions for o in a.option_strings}

    cli = next(a for a in build_parser()._actions if isinstance(a, argparse._SubParsersAction)).choices["train"]
    console_only = {"-h", "--help", *CONSOLE_FLAGS}
    assert set(CONSOLE_FLAGS) == {"--show-system", "--raw", "--detach"}
    cli_options = {o: v for o, v in options(cli).items() if o not in console_only}
    assert options(train_parser()) == cli_options
    assert set(options(cli)) - set(cli_options) == console_only
    shared = options(add_job_arguments(argparse.ArgumentParser(add_help=False)))
    assert {"--wait", "--dry-run", "--timeout"} <= set(cli_options) - set(shared)


def test_cell_magic_yaml_errors_name_the_key(ip, data):
    assert "the cell is not valid YAML at line 3" in usage(ip, "lanetrain", "", f"dataset: {data}\nprocesses: [2\n")
    assert "must be a YAML mapping of TrainSpec fields" in usage(ip, "lanetrain", "", "- a\n- b\n")
    assert "spec=['procesess']: unknown field(s)" in usage(ip, "lanetrain", "", f"dataset: {data}\nprocesess: 2\n")
    assert "processes='many': must be an integer" in usage(ip, "lanetrain", "", f"dataset: {data}\nprocesses: many\n")
    # a flag on the line overrides the body, and is checked too
    assert "--epochs 0: must be >= 1" in usage(ip, "lanetrain", "--epochs 0", f"dataset: {data}\nepochs: 3\n")


def test_job_argument_errors(ip):
    for magic in ("lanelogs", "lanestop", "laneshow"):
        assert "no job named 'nope'; %lanejobs lists the jobs" in usage(ip, magic, "nope")
        assert "the following arguments are required: job" in usage(ip, magic, "")
    assert "--limit must be >= 1, got 0" in usage(ip, "lanejobs", "--limit 0")
    assert "argument --tail: invalid int value: 'x'" in usage(ip, "lanelogs", "nope --tail x")
    assert "argument --limit: invalid int value: 'x'" in usage(ip, "lanejobs", "--limit x")


def test_lanetrain_launches_returns_the_job_and_other_magics_find_it(ip, scripted, capsys):
    spec = scripted(training_script(steps=6, sleep=0.2))
    ip.user_ns["data_dir"] = spec["dataset"]
    job = ip.run_line_magic("lanetrain", "--backend scripted --data $data_dir --processes 2 --batch-size 3 "
                                         "--name lane-magic")
    out = capsys.readouterr().out
    assert "launched lane-magic" in out and "batch 3 per rank = global batch 6" in out
    assert job.name == "lane-magic" and get_job("lane-magic").status().state in (JobState.RUNNING, JobState.SUCCEEDED)
    ip.user_ns["job"] = job
    with pytest.raises(UsageError, match="--rank 'x': must be a rank number"):
        ip.run_line_magic("lanelogs", "job --rank x")
    ip.run_line_magic("lanelogs", "job -f --rank 1")
    out = capsys.readouterr().out
    assert "[1] plain output of rank 1" in out and "[0] plain output of rank 0" not in out
    assert "lane-magic: succeeded" in out
    ip.run_line_magic("lanejobs", "")
    table = capsys.readouterr().out
    assert "lane-magic" in table and "succeeded" in table and "100%" in table and "0.9100 test" in table
    ip.run_line_magic("lanestop", "lane-magic")
    assert "lane-magic had already ended: succeeded" in capsys.readouterr().out


def test_lanestop_cancels_a_running_job_and_wait_flag_blocks(ip, scripted, capsys):
    spec = scripted(training_script(steps=200, sleep=0.2), "slow")
    ip.user_ns["data_dir"] = spec["dataset"]
    job = ip.run_line_magic("lanetrain", "--backend scripted --data $data_dir --name lane-slow")
    ip.run_line_magic("lanestop", "lane-slow")
    assert "lane-slow: cancelled" in capsys.readouterr().out
    assert job.status().state == JobState.CANCELLED
    spec = scripted(training_script(steps=3, sleep=0.05), "quick")
    job = ip.run_line_magic("lanetrain", f"--backend scripted --data {spec['dataset']} --name lane-quick --wait")
    assert job.status().state == JobState.SUCCEEDED  # --wait returned only at the end
    assert "lane-quick: succeeded" in capsys.readouterr().out


def test_dry_run_renders_the_runai_command_without_a_cluster(ip, capsys):
    line = ('--dry-run --backend kubernetes --data /mnt/tusimple --name dist-lane-detection-training --large-shm '
            '--processes=3 --gpu 1 --pvc pvc-download-tusimple-data-0:/mnt --image registry.example.com/t:1 '
            '-e USE_WORKERS="true" -e NUM_WORKERS=4 -e BATCH_SIZE=33 -e USE_VAL="false" -e VAL_BATCH_SIZE=99 '
            '-e ENABLE_SNAPSHOT="true" -e PVC_NAME="pvc-download-tusimple-data-0"')
    assert ip.run_line_magic("lanetrain", line) is None
    out = capsys.readouterr().out
    assert "3 process(es) x 1 GPU(s), batch 33 per rank = global batch 99" in out
    import yaml

    mpijob = yaml.safe_load(out[out.index("apiVersion"):])
    args = mpijob["spec"]["mpiReplicaSpecs"]["Launcher"]["template"]["spec"]["containers"][0]["args"]
    assert args[args.index("--batch-size") + 1] == "33" and "--no-use-val" in args
    assert args[args.index("--num-workers") + 1] == "4"
    assert args[args.index("--pvc-name") + 1] == "pvc-download-tusimple-data-0"
    assert list_jobs() == []
