"""``lanenb snap ...``: snapshots from a terminal (the same actions as ``%lanesnap``)."""

from __future__ import annotations

import argparse
import sys

from lanenb.cli import describe
from lanenb_trainer.errors import UserError


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    from lanenb.commands.snapshots import add_snap_arguments

    parser = subparsers.add_parser("snap", help="list, show, diff, restore, delete, verify and create snapshots",
                                   description=describe(__doc__))
    add_snap_arguments(parser)
    parser.set_defaults(func=_run)


def _run(args: argparse.Namespace) -> int:
    from lanenb.commands.snapshots import run_snap
    from lanenb.snapshots import SnapshotError
    from lanenb.tables import Table

    try:
        result = run_snap(args)
    except UserError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    except SnapshotError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    print(result.text() if isinstance(result, Table) else str(result))
    if args.action == "verify" and "FAILED" in str(result):
        return 1
    return 0
