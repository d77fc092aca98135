"""What ``%lanesweep`` and ``lanenb sweep`` share: ``%lanetrain``'s flags, where a flag whose
value is a range or a list (``--lr 1e-3..1e-1:log``, ``--batch-size 4,8,16``) is searched, plus
the sweep's own flags (trials, parallel, sampler, pruner, objective...). ``--name`` names the
sweep; its trials are the jobs ``NAME-0``, ``NAME-1``...
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from typing import Any

from lanenb.commands.arguments import add_job_arguments, spec_from_args
from lanenb.errors import UserError
from lanenb.sweeps.params import SPEC_SEARCHABLE, TRAINER_SEARCHABLE
from lanenb.sweeps.space import is_search_value
from lanenb.sweeps.study import PRUNERS, SAMPLERS

__all__ = ["LR_RULE_FLAG", "SWEEP_FLAGS", "add_sweep_arguments", "report_size", "split_search", "sweep_from_args",
           "sweep_from_argv"]

SWEEP_FLAGS: list[tuple[tuple[str, ...], dict[str, Any]]] = [
    (("--trials",), dict(type=int, default=8, metavar="N", help="trials in all, pruned ones included (default 8)")),
    (("--parallel",), dict(type=int, default=1, metavar="N",
                           help="trials at once, checked against this machine's or the cluster's capacity "
                                "(default 1)")),
    (("--sampler",), dict(default="tpe", choices=sorted(SAMPLERS),
                          help="Optuna sampler (default tpe; grid: lists only)")),
    (("--pruner",), dict(default="asha", choices=sorted(PRUNERS),
                         help="stop losing trials early: asha (successive halving, default), median or none")),
    (("--objective",), dict(default="val.accuracy", metavar="METRIC",
                            help="a validation metric of the trials (default val.accuracy; val.fp, val.fn...)")),
    (("--direction",), dict(default=None, choices=("maximize", "minimize"),
                            help="default: maximize accuracy, minimize the others")),
    (("--min-epochs",), dict(type=int, default=1, metavar="N",
                             help="epochs before a trial can be pruned (default 1)")),
    (("--sampler-seed",), dict(type=int, default=None, metavar="N",
                               help="the sampler's seed (a repeatable search; --seed is the trainer's)")),
]

# with a sweep that exists (%lanesweep --attach NAME, lanenb sweep show NAME) and another size
# (-np N, --batch-size N): how the winner's learning rate follows
LR_RULE_FLAG: tuple[tuple[str, ...], dict[str, Any]] = (
    ("--lr-rule",), dict(default=None, choices=("linear", "sqrt"),
                         help="with --processes/--batch-size on a sweep that exists: the learning rate the winner "
                              "needs at that size, by the linear (default) or square-root rule"))


def report_size(ns: argparse.Namespace) -> dict[str, Any]:
    """``Sweep.report``'s keywords from a line that shows a sweep that exists: the size asked for
    (``-np``, ``--batch-size``) and ``--lr-rule``; empty when no size is given.

    Raises:
        UserError: a range or list given as the size (one size is shown at a time), or
            ``--lr-rule`` without a size.
    """
    size = {k: getattr(ns, k, None) for k in ("processes", "batch_size")}
    for key, value in size.items():
        if isinstance(value, str):
            raise UserError(f"--{key.replace('_', '-')} {value}: give one size to see the winner at, not a range "
                            "or a list")
    size = {k: v for k, v in size.items() if v is not None}
    rule = getattr(ns, "lr_rule", None)
    if rule is not None and not size:
        raise UserError(f"--lr-rule {rule}: give the size to scale the winner to (--processes N, --batch-size N)")
    return {**size, "rule": rule or "linear"} if size else {}


def add_sweep_arguments(parser: argparse.ArgumentParser) -> argparse.ArgumentParser:
    """The job and trainer flags of ``%lanetrain`` and the sweep group (:data:`SWEEP_FLAGS`);
    every flag that varies a run also takes a search value (``a..b[:int][:log]`` or ``a,b,c``),
    kept as text for :func:`split_search`."""
    add_job_arguments(parser)
    group = parser.add_argument_group("sweep")
    for flags, kw in SWEEP_FLAGS:
        group.add_argument(*flags, **kw)
    searchable = set(SPEC_SEARCHABLE) | set(TRAINER_SEARCHABLE)
    for action in parser._actions:  # argparse keeps no public list of its actions
        if action.dest in searchable and action.nargs is None and action.option_strings and action.const is None:
            action.type = _search_or(action.type, action.choices, action.option_strings[0])
            action.choices = None
    return parser


def _search_or(convert: Any, choices: Any, flag: str) -> Any:
    """A flag's type that keeps a search value as text and converts anything else as before."""
    def parse(text: str) -> Any:
        if is_search_value(text):
            return text
        value = convert(text) if convert else text
        if choices is not None and value not in choices:
            raise argparse.ArgumentTypeError(f"{text!r} is not one of {', '.join(map(str, choices))}")
        return value

    parse.__name__ = getattr(convert, "__name__", "value")  # argparse names the type in its errors
    return parse


def split_search(ns: argparse.Namespace) -> dict[str, str]:
    """Take the searched flags out of ``ns`` (set back to unset): ``{dest: search value}``."""
    space: dict[str, str] = {}
    for dest in (*SPEC_SEARCHABLE, *TRAINER_SEARCHABLE):
        value = getattr(ns, dest, None)
        if isinstance(value, str) and is_search_value(value):
            space[dest] = value
            setattr(ns, dest, None)
    return space


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> None:  # type: ignore[override]
        raise UserError(message)


def _parser() -> argparse.ArgumentParser:
    return add_sweep_arguments(_Parser(prog="%lanesweep", add_help=False))


def sweep_from_argv(argv: Sequence[str], *, start: bool = True) -> Any:
    """Build and start a sweep from command-line words (what both faces call).

    Raises:
        UserError: a bad flag or value (the message names it), no searched flag, or any refusal
            of ``lanenb.sweeps.sweep``.
    """

    parser = _parser()
    ns = parser.parse_args(list(argv))
    return sweep_from_args(ns, parser, start=start)


def sweep_from_args(ns: argparse.Namespace, parser: argparse.ArgumentParser, *, start: bool = True) -> Any:
    """:func:`sweep_from_argv` after parsing (``lanenb sweep start`` parses with its own parser)."""
    from lanenb.sweeps import sweep

    space = split_search(ns)
    if not space:
        raise UserError("nothing to search: give at least one flag a range or a list, e.g. --lr 1e-3..1e-1:log "
                        "or --batch-size 4,8,16")
    sweep_name, ns.name = ns.name, None  # --name names the sweep; its trials are jobs NAME-0, NAME-1...
    spec = spec_from_args(ns, parser)
    return sweep(spec, space, name=sweep_name, objective=ns.objective, direction=ns.direction, trials=ns.trials,
                 parallel=ns.parallel, sampler=ns.sampler, pruner=ns.pruner, min_epochs=ns.min_epochs,
                 seed=ns.sampler_seed, start=start)
