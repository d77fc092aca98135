"""The launch flags, defined once for ``%lanetrain`` and ``lanenb train`` so they cannot drift.

The job flags mirror ``runai submit-mpi`` (``--processes``, ``--gpus``, ``--pvc``, ``--image``,
``-e``, ``--large-shm``, ``--project``), so a command from the RUN:AI guide translates flag for
flag. Every other trainer flag (``--lr``, ``--img-height``, ``--seed`` ...) comes from the
trainer's own parser and travels in ``TrainSpec.extra_args``. Every default is ``None`` so
"not given" is distinguishable: ``TrainSpec`` defaults apply, and a ``%%lanetrain`` YAML body
is overridden only by flags actually on the line.
"""

from __future__ import annotations

import argparse
import shlex
from collections.abc import Mapping
from typing import Any

from lanenb.contract.backends import add_backend_arguments, backends_help, descriptors, option_sections
from lanenb.contract.fields import coerce_env
from lanenb.contract.redact import REDACTED, redact_shapes
from lanenb.contract.runai_env import runai_fields
from lanenb.contract.spec import TRAINER_FIELDS, SpecError, TrainSpec
from lanenb.errors import UserError
from lanenb_trainer.config import BACKBONES, ENGINES, add_train_arguments
from lanenb_trainer.flags import to_flags

__all__ = ["add_job_arguments", "job_flags", "add_run_arguments", "check_run_flags", "spec_from_args",
           "spec_fields_from_args", "runai_fields", "SPEC_TRAINER_FIELDS", "RUN_FLAGS", "FlagError",
           "flag_words", "in_flag_words"]

# the defaults --help names: TrainSpec's, which are the trainer's (one default each)
_JOB = TrainSpec.field_defaults()

# TrainConfig fields that TrainSpec sets itself (TrainSpec.trainer_args): not offered twice. Its
# trainer fields, the worker switch it derives from num_workers, and the run id (the job's name)
SPEC_TRAINER_FIELDS = (*TRAINER_FIELDS.values(), "use_workers", "run_id")

# (flags, argparse keywords); dest is the TrainSpec field. The job's own flags: each backend's
# come from its descriptor (job_flags(), dests "<section>.<option>" filling TrainSpec.backend_options)
JOB_FLAGS: list[tuple[tuple[str, ...], dict[str, Any]]] = [
    (("--data", "--dataset"), dict(dest="dataset", metavar="PATH",
                                   help="dataset root in TuSimple layout (a path inside the cluster with "
                                        "--backend kubernetes, e.g. under a --pvc mount)")),
    (("--processes", "-np"), dict(type=int, metavar="N", help="MPI ranks (runai --processes); default 2")),
    (("--gpus", "--gpu", "-g"), dict(type=int, metavar="N", help="GPUs per process (runai --gpus); default 0")),
    (("--batch-size",), dict(type=int, metavar="N",
                             help="per-rank batch size; the global batch is processes x this "
                                  f"(default {_JOB['batch_size']})")),
    (("--epochs",), dict(type=int, metavar="N", help=f"epochs (default {_JOB['epochs']})")),
    (("--engine",), dict(choices=ENGINES, help="horovod | ddp | auto (horovod when importable)")),
    (("--backbone",), dict(choices=BACKBONES, help=f"SCNN backbone (default {_JOB['backbone']})")),
    (("--backend",), dict(metavar="NAME", help="where the job runs (available_backends())")),
    (("--pvc",), dict(dest="volumes", action="append", metavar="NAME:/MOUNT[:ro]",
                      help="mount a PVC in every rank (repeatable, runai --pvc)")),
    (("--image", "-i"), dict(metavar="IMAGE", help="container image (Kubernetes)")),
    (("-e", "--environment"), dict(dest="env", action="append", metavar="KEY=VALUE",
                                   help="environment variable for every rank (repeatable, runai -e); "
                                        "KEY=secret:SECRET/KEY reads a Kubernetes Secret")),
    (("--label",), dict(dest="labels", action="append", metavar="KEY=VALUE",
                        help="a label the job carries (repeatable): on the MPIJob and its pods, as an AzureML "
                             "tag, in the job registry")),
    (("--large-shm",), dict(action="store_true", default=None, help="large /dev/shm for loader workers")),
    (("--snapshot", "--enable-snapshot"), dict(dest="enable_snapshot", action="store_true", default=None,
                                               help="snapshot the data volume at the end (the first --pvc "
                                                    "unless --pvc-name)")),
    (("--no-enable-snapshot",), dict(dest="enable_snapshot", action="store_false", default=None,
                                     help=argparse.SUPPRESS)),
    (("--pvc-name",), dict(metavar="NAME", help="PVC to snapshot with --snapshot")),
    (("--name",), dict(metavar="NAME", help="job name (RFC 1123; default lane-<time>-<random>)")),
    (("--namespace",), dict(metavar="NS", help="Kubernetes namespace (default: the kubeconfig context's)")),
    (("--run-dir",), dict(metavar="DIR", help="where rank 0 writes checkpoints, predictions, metrics")),
    (("--max-steps",), dict(type=int, metavar="N", help="stop after N global steps")),
    (("--max-restarts",), dict(type=int, metavar="N",
                               help="local: start the ranks again up to N times after a preemption (SIGTERM) or a "
                                    "killed rank, continuing from the last checkpoint (default 0)")),
    (("--num-workers",), dict(type=int, metavar="N", help="data-loader worker processes per rank (default 0)")),
    (("--use-workers",), dict(dest="_use_workers", action="store_true", default=None,
                              help="loader workers on (2 unless --num-workers), as USE_WORKERS")),
    (("--no-use-workers",), dict(dest="_use_workers", action="store_false", default=None, help=argparse.SUPPRESS)),
    (("--no-val", "--no-use-val"), dict(dest="use_val", action="store_false", default=None,
                                        help="no validation split")),
    (("--use-val",), dict(dest="use_val", action="store_true", default=None, help=argparse.SUPPRESS)),
    (("--val-batch-size",), dict(type=int, metavar="N", help="validation batch size")),
    (("--cpu",), dict(metavar="QTY", help="CPU request per rank (Kubernetes quantity)")),
    (("--memory",), dict(metavar="QTY", help="memory request per rank (Kubernetes quantity)")),
]
_TRAINER_GROUP = "trainer options (passed to every rank)"


def job_flags() -> list[tuple[tuple[str, ...], dict[str, Any]]]:
    """The job's flags and every installed backend's (dests ``<section>.<option>``), in
    ``--help`` order: what ``add_job_arguments`` adds before the trainer flags."""
    out = list(JOB_FLAGS)
    for d in descriptors():
        out += [(flags, dict(kw, dest=d.flag_dest(kw, flags))) for flags, kw in d.flags]
    return out


def add_job_arguments(parser: argparse.ArgumentParser, *, trainer_flags: bool = True) -> argparse.ArgumentParser:
    """Add the job flags (and, with ``trainer_flags``, the remaining trainer flags) to ``parser``.

    Works for a plain ``argparse.ArgumentParser`` (the CLI) and IPython's
    ``MagicArgumentParser`` (the magics), which is an ``argparse`` subclass.
    """
    group = parser.add_argument_group("job")
    for flags, kw in JOB_FLAGS:
        kw = dict(kw)
        kw.setdefault("default", None)
        if flags[0] == "--backend":
            kw["help"] = backends_help()
        group.add_argument(*flags, **kw)
    add_backend_arguments(parser)
    if trainer_flags:
        add_train_arguments(parser, exclude=SPEC_TRAINER_FIELDS, title=_TRAINER_GROUP)
    return parser


# How to run the job, not what it is: the same on both faces. In a notebook --wait keeps the
# live view updating below the cell; in a console it waits without printing the log (a script or
# CI step wants the outcome; `lanenb train` without --wait already streams every rank's lines).
RUN_FLAGS: list[tuple[tuple[str, ...], dict[str, Any]]] = [
    (("--wait",), dict(action="store_true",
                       help="submit, block until the job ends, then print its final state and test metrics "
                            "(a notebook keeps the live view; a console prints no log meanwhile and exits "
                            "0 only if the job succeeded)")),
    (("--dry-run",), dict(action="store_true",
                          help="launch nothing: print the spec, any problem, and what would run (the mpirun "
                               "argv, or the MPIJob YAML)")),
    (("--timeout",), dict(type=float, default=None, metavar="S",
                          help="with --wait: stop waiting after S seconds; the job keeps running (a console "
                               "exits 124, as lanenb jobs wait)")),
]


def add_run_arguments(parser: argparse.ArgumentParser) -> argparse.ArgumentParser:
    """Add ``--wait``, ``--dry-run`` and ``--timeout`` (:data:`RUN_FLAGS`), which ``%lanetrain`` and
    ``lanenb train`` both take with the same meaning."""
    group = parser.add_argument_group("run")
    for flags, kw in RUN_FLAGS:
        group.add_argument(*flags, **kw)
    return parser


def check_run_flags(ns: argparse.Namespace) -> None:
    """Refuse run flags that would be silently ignored.

    Raises:
        UserError: ``--timeout`` without ``--wait``, a timeout that is not > 0, or ``--wait``
            with ``--dry-run`` (nothing would be launched to wait for).
    """
    if ns.timeout is not None:
        if not ns.wait:
            raise UserError(f"--timeout {ns.timeout:g} applies only with --wait")
        if not ns.timeout > 0:
            raise UserError(f"--timeout must be > 0 seconds, got {ns.timeout:g}")
    if ns.wait and ns.dry_run:
        raise UserError("--wait and --dry-run exclude each other: --dry-run launches nothing")


def _trainer_dests(parser: argparse.ArgumentParser) -> list[str]:
    out: list[str] = []
    for group in parser._action_groups:  # argparse keeps no public list of a group's actions
        if group.title == _TRAINER_GROUP:
            out += [a.dest for a in group._group_actions if a.dest not in out]
    return out


def spec_fields_from_args(ns: argparse.Namespace, parser: argparse.ArgumentParser) -> dict[str, Any]:
    """The ``TrainSpec`` fields the user actually gave (flags left out are not in the dict)."""
    fields: dict[str, Any] = {}
    sections: dict[str, dict[str, Any]] = {}
    known = option_sections()
    for _flags, kw in job_flags():
        dest = kw["dest"] if "dest" in kw else _flags[0].lstrip("-").replace("-", "_")
        value = getattr(ns, dest, None)
        if value is None:
            continue
        section, _, option = dest.partition(".")
        if option and section in known:
            sections.setdefault(section, {})[option] = value
        elif dest == "_use_workers":  # the trainer's switch; TrainSpec only counts workers
            if not value:
                fields["num_workers"] = 0
            elif getattr(ns, "num_workers", None) is None:
                fields["num_workers"] = 2
        else:
            fields[dest] = value
    if sections:
        fields["backend_options"] = sections
    extra = to_flags({d: getattr(ns, d) for d in _trainer_dests(parser) if getattr(ns, d, None) is not None})
    if extra:
        fields["extra_args"] = extra
    if fields.get("enable_snapshot") and not fields.get("pvc_name") and fields.get("volumes"):
        fields["pvc_name"] = str(fields["volumes"][0]).split(":")[0]
    return fields


class FlagError(SpecError):
    """A ``SpecError`` worded with the flag the user typed (``--batch-size 0: must be >= 1``)
    instead of the field it fills (``batch_size=0``): at a magic or a console nobody typed the
    field's name. ``field`` and ``value`` stay the field's, for code that reads them."""

    def __init__(self, text: str, exc: SpecError) -> None:
        UserError.__init__(self, text)
        self.field, self.value = exc.field, exc.value


def _flag_of(dest: str) -> str | None:
    """The flag a user types for ``dest`` (its first long spelling), or None for no flag."""
    for flags, kw in job_flags():
        if (kw.get("dest") or flags[0].lstrip("-").replace("-", "_")) == dest:
            return next((f for f in flags if f.startswith("--")), flags[0])
    return None


def in_flag_words(field: str, value: Any, message: str, ns: argparse.Namespace | None) -> str:
    """``message`` (``"<field>=<value!r>: problem"``) with the flag the user typed in front, when
    the value came from a flag on the line; otherwise unchanged (a YAML body, a default)."""
    typed = getattr(ns, field, None) if ns is not None else None
    flag = _flag_of(field) if typed is not None else None
    prefix = f"{field}={value!r}: "
    # the env (-e) is never echoed back as typed: its values may be secrets the message redacted
    if flag is None or field == "env" or REDACTED in prefix or not message.startswith(prefix):
        return message
    shown = shlex.join(map(str, typed)) if isinstance(typed, (list, tuple)) else shlex.quote(str(typed))
    shown = redact_shapes(shown)  # a credential inside a value (a URL's password) is not repeated
    return f"{flag} {shown}: {message[len(prefix):]}"


def flag_words(exc: SpecError, ns: argparse.Namespace | None) -> SpecError:
    """``exc`` worded with the flag the user typed (``FlagError``), or ``exc`` itself."""
    text = in_flag_words(exc.field, exc.value, str(exc), ns)
    return exc if text == str(exc) else FlagError(text, exc)


def spec_from_args(ns: argparse.Namespace, parser: argparse.ArgumentParser,
                   base: Mapping[str, Any] | None = None, env: Mapping[str, str] | None = None) -> TrainSpec:
    """Build the spec: ``base`` (e.g. a ``%%lanetrain`` YAML body), then the given flags, then
    RUN:AI variables (``-e BATCH_SIZE=33``, or of ``env``, e.g. the shell's) for fields still unset.

    Raises:
        SpecError: a field is missing or has a bad value; the message names it.
    """
    data = TrainSpec.fold_sections(base or {})  # a YAML body may name a section at the top level
    given = spec_fields_from_args(ns, parser)
    if "backend_options" in given and isinstance(data.get("backend_options"), Mapping):
        from_base = data["backend_options"]
        given["backend_options"] = {**from_base, **{
            k: {**from_base[k], **v} if isinstance(from_base.get(k), Mapping) else v
            for k, v in given["backend_options"].items()}}
    if "extra_args" in given and data.get("extra_args"):
        given["extra_args"] = list(data["extra_args"]) + given["extra_args"]
    data.update(given)
    # a flag beside its -e variable is TrainSpec's one RUN:AI rule (a conflict unless equal); the
    # shell's own RUN:AI variables (``env``) fill what neither gives, as the trainer reads them
    from_env: dict[str, str] = {}
    given_env = runai_fields(coerce_env("env", data.get("env")))
    for name, (var, value) in runai_fields(dict(env or {})).items():
        if name not in data and name not in given_env:
            data[name] = value
            from_env[name] = var
    if not data.get("dataset"):
        raise SpecError("dataset", None, "is required: give --data PATH (a TuSimple-layout dataset root)")
    try:
        return TrainSpec.from_dict(data)
    except SpecError as exc:
        if exc.field in from_env:  # name what the user typed: the variable, not the field
            raise SpecError(f"environment variable {from_env[exc.field]}", exc.value,
                            str(exc).split(": ", 1)[-1]) from None
        raise flag_words(exc, ns) from None
