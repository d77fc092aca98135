"""``lanenb sweep``: many runs as one experiment from a terminal (``lanenb.sweeps``).

``lanenb sweep start`` takes ``lanenb train``'s flags, where a range or a list is searched
(``--lr 1e-3..1e-1:log --batch-size 4,8,16``), and the sweep's own; ``show``, ``stop``,
``resume`` and ``list`` find a sweep by name from any shell.
"""

from __future__ import annotations

import argparse

from lanenb.commands.sweep_args import LR_RULE_FLAG, SWEEP_FLAGS, add_sweep_arguments

__all__ = ["register"]


def register(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser("sweep", help="search flags over many runs, stopping the losers early (Optuna)",
                              description=__doc__.split("\n\n")[0].replace("``", ""))
    sub = p.add_subparsers(dest="sweep_command", required=True, metavar="ACTION")
    start = sub.add_parser("start", help="start a sweep (the driver runs detached)",
                           description="Start a sweep: lanenb train's flags (a range a..b[:int][:log] or a list "
                                       "a,b,c is searched) and: " + ", ".join(f[0] for f, _ in SWEEP_FLAGS) +
                                       ". See `lanenb train --help` for the job flags.")
    add_sweep_arguments(start)
    start.add_argument("--wait", action="store_true", help="block until the sweep ends and print its table")
    start.set_defaults(func=cmd_start, parser=start)
    for name, helptext, func in (("show", "the trials table", cmd_show), ("stop", "stop it and its trials", cmd_stop),
                                 ("resume", "start its driver again (after a crash or a reboot)", cmd_resume)):
        sp = sub.add_parser(name, help=helptext)
        sp.add_argument("name")
        sp.set_defaults(func=func)
        if name == "show":  # the winner at another size: the learning rate it needs there
            sp.add_argument("--processes", "-np", type=int, metavar="N",
                            help="show the learning rate the best trial needs on N ranks")
            sp.add_argument("--batch-size", type=int, metavar="N",
                            help="show the learning rate the best trial needs at a per-rank batch of N")
            sp.add_argument(*LR_RULE_FLAG[0], **LR_RULE_FLAG[1])
    ls = sub.add_parser("list", help="the sweeps of this LANENB_HOME")
    ls.set_defaults(func=cmd_list)


def cmd_start(args: argparse.Namespace) -> int:
    from lanenb.commands.sweep_args import sweep_from_args

    s = sweep_from_args(args, args.parser)
    print(f"sweep {s.name} started: {s.settings.trials} trial(s), {s.settings.parallel} at once; "
          f"lanenb sweep show {s.name} (or %lanesweep --attach {s.name}) follows it")
    if args.wait:
        s.wait()
        print(s.table().text())
    return 0


def cmd_show(args: argparse.Namespace) -> int:
    from lanenb.commands.sweep_args import report_size
    from lanenb.sweeps import attach

    size = report_size(args)
    s = attach(args.name)
    table = s.table()
    if size:  # the winner's learning rate at that size, under the table as the notebook shows it
        table.note = "\n".join(x for x in (table.note, s.size_note(**size)) if x)
    print(table.text())
    return 0


def cmd_stop(args: argparse.Namespace) -> int:
    from lanenb.sweeps import attach

    print(f"sweep {args.name}: {attach(args.name).stop()}")
    return 0


def cmd_resume(args: argparse.Namespace) -> int:
    from lanenb.sweeps import attach

    s = attach(args.name).resume()
    print(f"sweep {args.name}: {s.state}")
    return 0


def cmd_list(args: argparse.Namespace) -> int:
    from lanenb.sweeps import attach, list_sweeps

    names = list_sweeps()
    for name in names:
        s = attach(name)
        best = s.best
        print(f"{name}\t{s.state}\t{len(s.trials())} trial(s)\tbest: "
              + (f"{best['value']:.4f} ({best['job']})" if best else "-"))
    if not names:
        print("no sweeps yet (lanenb sweep start ... makes one)")
    return 0
