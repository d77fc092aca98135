"""The MLflow export defined once, for ``lanenb jobs to-mlflow NAME`` and ``%lanemlflow NAME``.

``add_mlflow_arguments(parser)`` adds the flags to any ``argparse`` parser (IPython's
``MagicArgumentParser`` is one); ``run_mlflow(args, job)`` exports and returns the line to show.
"""

from __future__ import annotations

import argparse
from typing import TypeVar

from lanenb.jobs import Job
from lanenb.trackers import DEFAULT_EXPERIMENT, to_mlflow

__all__ = ["add_mlflow_arguments", "run_mlflow"]

_Parser = TypeVar("_Parser", bound=argparse.ArgumentParser)


def add_mlflow_arguments(parser: _Parser) -> _Parser:
    """The export's flags (the job argument is the face's own: a name, or a variable in a notebook)."""
    parser.add_argument("--tracking-uri", default=None, metavar="URI",
                        help="MLflow tracking URI: http://host:5000, sqlite:///mlflow.db ... "
                             "(default: $MLFLOW_TRACKING_URI, else MLflow's default)")
    parser.add_argument("--experiment", default=DEFAULT_EXPERIMENT, metavar="NAME",
                        help=f"MLflow experiment, created when missing (default {DEFAULT_EXPERIMENT})")
    parser.add_argument("--again", action="store_true",
                        help="log another MLflow run even if the experiment already has this job")
    return parser


def run_mlflow(args: argparse.Namespace, job: Job | str) -> str:
    """Export ``job`` as ``args`` say; returns what to print (run id, counts, notes).

    Raises:
        UserError: the job is not finished, already exported, or MLflow is missing.
        MlflowExportError: MLflow refused the export.
    """
    done = to_mlflow(job, tracking_uri=args.tracking_uri, experiment=args.experiment, again=args.again)
    return str(done)
