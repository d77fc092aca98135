"""The ``lanenb`` command line. Each command group lives in its own module and registers
its sub-parsers through ``register(subparsers)``, so adding a command never touches the others.
"""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Sequence

# module name -> registers one or more top-level commands
COMMAND_MODULES = ("data", "eval", "train", "demo", "jobs", "notebook", "predict", "snap")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="lanenb", description=__doc__.splitlines()[0])
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
    try:
        return int(args.func(args) or 0)
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
