"""The ``lanenb`` command line. Each command group lives in its own module and registers
its sub-parsers through ``register(subparsers)``, so adding a command never touches the others.
"""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Sequence

# what `lanenb --help` says first: a sentence for users (the docstring above is for developers)
DESCRIPTION = ("Train SCNN lane detection on N MPI ranks, here or on Kubernetes, and look after the jobs, "
               "data, predictions and snapshots from a terminal: the same jobs and flags as the notebook's "
               "%lanetrain, %lanejobs and %lanesnap magics.")


def describe(doc: str | None) -> str:
    """A command's description from its module docstring's first sentence, without reST markup
    (argparse shows text as is: ````lanenb jobs ...```` would print its backquotes)."""
    first = " ".join((doc or "").split("\n\n")[0].split())
    first = first.replace("``", "")
    end = first.find(". ")
    return first if end < 0 else first[: end + 1]


# module name -> registers one or more top-level commands
COMMAND_MODULES = ("data", "eval", "train", "sweep", "demo", "jobs", "notebook", "predict", "snap")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="lanenb", description=DESCRIPTION)
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for name in COMMAND_MODULES:
        try:
            module = importlib.import_module(f"lanenb.cli.{name}")
        except ModuleNotFoundError as exc:
            if exc.name == f"lanenb.cli.{name}":
                continue  # command group not present in this build
            raise
        module.register(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    from lanenb.errors import UserError

    try:
        return int(args.func(args) or 0)
    except UserError as exc:  # a damaged registry, a bad value: one line, no traceback
        print(f"error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
