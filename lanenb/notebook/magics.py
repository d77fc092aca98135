"""IPython magics: ``%lanetrain``, ``%%lanetrain``, ``%lanejobs``, ``%lanelogs``, ``%lanestop``,
``%laneshow``, ``%lanemlflow``. Registered by ``%load_ext lanenb`` only (``import lanenb`` has no side effects).

``%lanetrain`` parses exactly the flags ``lanenb train`` parses (``lanenb.commands.arguments``),
submits through the Job API, returns the ``Job`` at once and shows the live view below the
cell. User mistakes (``UserError``) become IPython's ``UsageError``: one line naming the bad
value, no traceback.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable
from typing import Any

import yaml
from IPython.core.error import UsageError
from IPython.core.magic import Magics, line_cell_magic, line_magic, magics_class, no_var_expand
from IPython.core.magic_arguments import MagicArgumentParser, argument, magic_arguments, parse_argstring
from IPython.utils.process import arg_split
from IPython.utils.text import DollarFormatter

from lanenb.analysis.runstate import format_duration
from lanenb.analysis.summary import job_summaries
from lanenb.commands.arguments import (
    add_job_arguments,
    add_run_arguments,
    check_run_flags,
    flag_words,
    spec_from_args,
)
from lanenb.commands.launch import dry_run_text, metrics_text
from lanenb.commands.trackers import add_mlflow_arguments, run_mlflow
from lanenb.errors import SpecError, UserError
from lanenb.jobs import Job, get_job, list_jobs, submit
from lanenb.tables import Table

__all__ = ["LaneMagics", "load_ipython_extension", "train_parser", "resolve_job"]


def train_parser() -> MagicArgumentParser:
    """``%lanetrain``'s parser: the shared job, trainer and run flags (``--wait``, ``--dry-run``,
    ``--timeout``), exactly ``lanenb train``'s without its console-only flags."""
    parser = MagicArgumentParser(
        prog="%lanetrain",
        description=("Launch MPI data-parallel SCNN training (locally or on Kubernetes) and show it live. "
                     "Returns the Job at once: job = %lanetrain --data DATA --processes 3 --gpus 1 "
                     "--batch-size 33. As %%lanetrain, the cell body is a YAML TrainSpec and flags on "
                     "the line override it."),
    )
    add_job_arguments(parser)
    add_run_arguments(parser)
    return parser


_PARSER = train_parser()


def mlflow_parser() -> MagicArgumentParser:
    """``%lanemlflow``'s parser: a job, then the flags of ``lanenb jobs to-mlflow``."""
    parser = MagicArgumentParser(prog="%lanemlflow", description="Log a finished job to MLflow.")
    parser.add_argument("job", help="job name or a variable holding a Job")
    return add_mlflow_arguments(parser)


_MLFLOW_PARSER = mlflow_parser()


def _rank_list(text: str) -> list[int]:
    import argparse

    try:
        counts = [int(x) for x in text.split(",") if x.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"{text!r} is not a comma-separated list of rank counts, e.g. 1,2,4") from None
    if not counts:
        raise argparse.ArgumentTypeError(f"{text!r} lists no rank count")
    return counts


def scale_parser() -> MagicArgumentParser:
    """``%lanescale``'s parser: %lanetrain's flags, ``--processes`` as a list, plus the run lengths."""
    parser = MagicArgumentParser(
        prog="%lanescale", conflict_handler="resolve",
        description=("Measure how training scales: short runs of the same job at each rank count, read back "
                     "from their events: images/s, speed-up, efficiency, exchange share, utilisation and the "
                     "projected time of a full run. %lanescale --data DATA --processes 1,2,4 --steps 50"),
    )
    add_job_arguments(parser)
    parser.add_argument("--processes", "-np", type=_rank_list, default=[1, 2], metavar="N,N,...",
                        help="rank counts to measure (default 1,2)")
    parser.add_argument("--steps", type=int, default=50, help="steps per run (default 50)")
    parser.add_argument("--warmup", type=int, default=10, help="first steps dropped (default 10)")
    parser.add_argument("--mode", choices=("weak", "strong"), default="weak",
                        help="weak: same per-rank batch; strong: --batch-size is the global batch")
    parser.add_argument("--frames", type=int, default=None,
                        help="training frames of the full run to project (default: this dataset's)")
    parser.add_argument("--name", default=None, help="report name; runs are NAME-n<ranks>")
    return parser


_SCALE_PARSER = scale_parser()


def sweep_parser() -> MagicArgumentParser:
    """``%lanesweep``'s parser: %lanetrain's flags (a range or a list is searched), the sweep's,
    and ``--attach``/``--stop`` for a sweep that already runs."""
    from lanenb.commands.sweep_args import LR_RULE_FLAG, add_sweep_arguments

    parser = MagicArgumentParser(
        prog="%lanesweep",
        description=("Search flags over many runs, stopping the losers early (Optuna): %lanetrain's flags, where "
                     "a range a..b[:int][:log] or a list a,b,c is searched. s = %lanesweep --data DATA --epochs 6 "
                     "--lr 1e-3..1e-1:log --batch-size 4,8 --trials 12 --parallel 2. Returns the Sweep; the "
                     "driver runs detached (s.trials(), s.best, s.stop(); %lanesweep --attach NAME later; "
                     "%lanesweep --attach NAME -np 4 adds the learning rate the winner needs on 4 ranks)."),
    )
    add_sweep_arguments(parser)
    parser.add_argument("--wait", action="store_true", help="keep the trials table updating until the sweep ends")
    parser.add_argument("--attach", metavar="SWEEP", help="show (and with --wait follow) a sweep that exists")
    parser.add_argument("--stop", metavar="SWEEP", help="stop a sweep and cancel its running trials")
    parser.add_argument(*LR_RULE_FLAG[0], **LR_RULE_FLAG[1])
    return parser


_SWEEP_PARSER = sweep_parser()


def _user_errors(func: Callable[..., Any]) -> Callable[..., Any]:
    """``UserError`` (and YAML errors) -> one-line ``UsageError``; bugs keep their traceback."""

    @functools.wraps(func)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return func(*args, **kwargs)
        except UserError as exc:
            msg = exc.args[0] if isinstance(exc, KeyError) and exc.args else str(exc)
            raise UsageError(msg) from None

    return wrapper


def _yaml_spec(cell: str) -> dict[str, Any]:
    try:
        data = yaml.safe_load(cell)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark else ""
        raise UsageError(f"%%lanetrain: the cell is not valid YAML{where}: "
                         f"{getattr(exc, 'problem', None) or exc}") from None
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise UsageError(f"%%lanetrain: the cell must be a YAML mapping of TrainSpec fields "
                         f"(dataset: ..., processes: ...), got a {type(data).__name__}: {data!r}")
    return data


def resolve_job(token: str, user_ns: dict[str, Any]) -> Job:
    """A job from a name, a variable holding a ``Job``, or a ``Job``'s repr (``$job`` expansion).

    Raises:
        UsageError: no job argument, or no such job.
    """
    token = token.strip()
    if not token:
        raise UsageError("name a job: a job name or a variable holding a Job (%lanejobs lists them)")
    value = user_ns.get(token)
    if isinstance(value, Job):
        return value
    m = re.match(r"^<Job (\S+)", token)
    name = m.group(1) if m else token
    try:
        return get_job(name)
    except UserError as exc:
        raise UsageError(f"no job named {name!r}; %lanejobs lists the jobs") from exc


@magics_class
class LaneMagics(Magics):
    """The lanenb magics; see each magic's ``?`` help."""

    @property
    def _user_ns(self) -> dict[str, Any]:
        """The notebook's variables, where a job argument may name a variable holding a ``Job``."""
        if self.shell is None:  # IPython always sets it when it registers the magics
            raise RuntimeError("the lanenb magics run inside IPython: %load_ext lanenb")
        return self.shell.user_ns

    @line_cell_magic
    @_user_errors
    def lanetrain(self, line: str, cell: str | None = None) -> Job | None:
        # posix splitting, as a shell: -e USE_VAL="false" gives false, not '"false"' (runai commands quote)
        parser = train_parser()  # built per call: a backend installed since the import brings its flags
        ns = parser.parse_args(arg_split(line, posix=True))
        check_run_flags(ns)
        base = _yaml_spec(cell) if cell is not None else None
        spec = spec_from_args(ns, parser, base)
        if ns.dry_run:
            print(dry_run_text(spec, ns)[0])
            return None
        from lanenb.notebook.view import JobView

        try:
            job = submit(spec)
        except SpecError as exc:  # the backend's refusal (-np above the cores): in the flags' words
            raise flag_words(exc, ns) from None
        scope = next((f" ({key} {job.handle[key]})" for key in ("namespace", "workspace") if job.handle.get(key)), "")
        where = "this machine" if job.backend.runs_here else f"{spec.backend}{scope}"
        print(f"launched {job.name} on {where}: {spec.processes} process(es) x {max(spec.gpus, 0)} GPU(s), "
              f"batch {spec.batch_size} per rank = global batch {spec.global_batch}; "
              f"run dir {job.run_dir}")
        view = JobView(job, start=False)
        view.show()
        view.start()
        if ns.wait:
            try:
                job.wait(timeout=ns.timeout)
            except TimeoutError as exc:
                print(f"{exc}; the view keeps updating")
                return job
            except KeyboardInterrupt:
                print(f"stopped waiting; {job.name} keeps running (%lanestop {job.name} cancels it)")
                return job
            view.finish()
            status = job.status()
            print(f"{job.name}: {status}" + metrics_text(job))
        return job

    @line_magic
    @_user_errors
    def lanescale(self, line: str) -> Any:
        """See ``%lanescale?`` (the flags); returns the ``ScalingReport``."""
        ns = _SCALE_PARSER.parse_args(arg_split(line, posix=True))
        from lanenb.analysis.scaling import measure

        counts = ns.processes
        ns.processes = None  # set per run by measure()
        spec = spec_from_args(ns, _SCALE_PARSER, {"processes": min(counts)})
        # returned, not displayed here: `report = %lanescale ...` keeps it, a bare magic shows it once
        return measure(spec, counts, steps=ns.steps, warmup=ns.warmup, mode=ns.mode, frames=ns.frames,
                       name=ns.name)

    @line_magic
    @_user_errors
    def lanesweep(self, line: str) -> Any:
        """See ``%lanesweep?`` (the flags); returns the ``Sweep``."""
        from IPython.display import display

        from lanenb.commands.sweep_args import report_size, sweep_from_args
        from lanenb.sweeps import attach

        ns = _SWEEP_PARSER.parse_args(arg_split(line, posix=True))
        if ns.stop:
            s = attach(ns.stop)
            print(f"sweep {s.name}: {s.stop()}")
            return s
        size = report_size(ns) if ns.attach else {}  # a new sweep's -np is its base job's
        if ns.lr_rule and not ns.attach:
            raise UserError(f"--lr-rule {ns.lr_rule} goes with --attach NAME (the winner of a sweep at another size)")
        s = attach(ns.attach) if ns.attach else sweep_from_args(ns, _SWEEP_PARSER)
        if not ns.wait:
            display(s.report(**size))
            return s
        handle = display(s.table(), display_id=True)  # the table updates; the chart comes at the end
        try:
            while s.state in ("running", "stopping"):
                s.wait(timeout=2.0, poll=0.5)
                handle.update(s.table())
        except KeyboardInterrupt:
            print(f"stopped following; sweep {s.name} keeps running (%lanesweep --stop {s.name} stops it)")
            return s
        # the final report takes the live table's place (its table in place, its chart below):
        # no placeholder output is left above the report, nor the trials table twice
        table, *rest = s.report(**size).outputs()
        handle.update(table, raw=True)
        for bundle in rest:
            display(bundle, raw=True)
        return s

    @line_magic
    @magic_arguments()
    @argument("runs", nargs="+", help="two or more job names (or variables holding Jobs)")
    @_user_errors
    def lanecompare(self, line: str) -> Any:
        """Compare runs: settings that differ, final and best metrics, duration, images/s, curves."""
        args = parse_argstring(self.lanecompare, line)
        from lanenb.analysis.compare import compare

        return compare([resolve_job(token, self._user_ns) for token in args.runs])

    @line_magic
    @magic_arguments()
    @argument("--limit", type=int, default=20, help="newest N jobs (default 20)")
    @argument("--team", action="store_true", help="every lanenb MPIJob you may read in the cluster (all users), "
                                                  "GPU capacity, quotas, and what RBAC kept from you")
    @argument("--namespace", action="append", default=None, help="with --team: only this namespace (repeatable)")
    @argument("--context", default=None, help="with --team: the kubeconfig context")
    @_user_errors
    def lanejobs(self, line: str) -> None:
        """A table of lanenb jobs, newest first: name, backend, status, progress, accuracy, age and
        the doctor's verdict (why a run is slow: input-bound, straggler, exchange-bound, ...).
        ``--team``: the team's MPIJobs (user, namespace, size, why a job waits, run time, progress,
        GPU use), GPUs by node and quota; kept current by watches, so asking again is cheap."""
        args = parse_argstring(self.lanejobs, line)
        if args.limit < 1:
            raise UsageError(f"--limit must be >= 1, got {args.limit}")
        from IPython.display import display

        if args.team:
            from lanenb.team import team_view

            display(team_view(context=args.context, namespaces=args.namespace))
            return
        if args.namespace or args.context:
            raise UsageError("--namespace and --context go with --team")

        display(JobTable(list_jobs(newest_first=True, limit=args.limit)))

    @line_magic
    @magic_arguments()
    @argument("job", help="job name or a variable holding a Job")
    @argument("-f", "--follow", action="store_true", help="keep printing until the job ends")
    @argument("--rank", default=None, help="only this rank's lines (an integer, or 'launcher')")
    @argument("--tail", type=int, default=200, help="lines of history to print first (default 200)")
    @_user_errors
    def lanelogs(self, line: str) -> None:
        """Print a job's log (``[rank] line``); ``-f`` follows it live."""
        args = parse_argstring(self.lanelogs, line)
        job = resolve_job(args.job, self._user_ns)
        rank: Any = "all"
        if args.rank is not None:
            if args.rank == "launcher":
                rank = None
            elif re.fullmatch(r"\d+", args.rank):
                rank = int(args.rank)
            else:
                raise UsageError(f"--rank {args.rank!r}: must be a rank number (0, 1, ...) or 'launcher'")
        if args.tail < 0:
            raise UsageError(f"--tail must be >= 0, got {args.tail}")
        chunk = job.read_log(None, tail_lines=max(args.tail, 1))
        lines = [ln for ln, _ in chunk.lines if rank == "all" or ln.rank == rank]
        for ln in lines[-args.tail:] if args.tail else []:
            print(ln, flush=False)
        if not args.follow:
            return
        cursor = f"|{chunk.cursor or ''}"
        try:
            for update in job.updates(cursor):
                if update.line is not None and (rank == "all" or update.line.rank == rank):
                    print(update.line, flush=True)
        except KeyboardInterrupt:
            print("(stopped following; the job keeps running)")
        print(f"{job.name}: {job.status()}")

    @line_magic
    @magic_arguments()
    @argument("job", help="job name or a variable holding a Job")
    @_user_errors
    def lanestop(self, line: str) -> None:
        """Cancel a job: every rank stops (locally SIGTERM then SIGKILL; on Kubernetes the MPIJob is deleted)."""
        args = parse_argstring(self.lanestop, line)
        job = resolve_job(args.job, self._user_ns)
        before = job.status()
        if before.state.finished:
            print(f"{job.name} had already ended: {before}")
            return
        status = job.cancel()
        print(f"{job.name}: {status}")

    @line_magic
    @_user_errors
    def lanemlflow(self, line: str) -> None:
        """Log a finished job to MLflow: %lanemlflow JOB [--tracking-uri URI] [--experiment NAME] [--again]
        (params, metric series, the headline with its model, the checkpoint; lanenb.trackers.to_mlflow)."""
        args = _MLFLOW_PARSER.parse_args(arg_split(line, posix=True))
        job = resolve_job(args.job, self._user_ns)
        print(run_mlflow(args, job))

    @line_magic
    @magic_arguments()
    @argument("job", help="job name or a variable holding a Job")
    @_user_errors
    def laneshow(self, line: str) -> Any:
        """Show (or re-attach) the live view of a job, e.g. after a kernel restart."""
        args = parse_argstring(self.laneshow, line)
        job = resolve_job(args.job, self._user_ns)
        from lanenb.notebook.view import JobView

        view = JobView(job, start=False)
        if job.status().state.finished:
            view.finish()  # draw the final state before displaying: a saved notebook keeps it
            view.show()
        else:
            view.show()
            view.start()

    @line_magic
    @no_var_expand  # expanded below, so that ``$snap`` is the Snapshot's id, not its description
    @_user_errors
    def lanesnap(self, line: str) -> None:
        """Snapshots: %lanesnap list|show|diff|restore|delete|verify|create ... (see lanenb.snapshots)."""
        from IPython.display import display

        from lanenb.commands.snapshots import run_snap

        line = expand_snapshot_ids(line, self.shell.user_ns if self.shell is not None else {})
        result = run_snap(_SNAP_PARSER.parse_args(arg_split(line, posix=True)))
        if isinstance(result, Table):
            display(result.mimebundle(), raw=True)
        else:
            print(result)


class _SnapshotIdFormatter(DollarFormatter):
    """IPython's ``$name`` / ``{expr}`` expansion, except that a ``Snapshot`` becomes its id:
    ``str(snapshot)`` is a description ("3f2a... quickstart of /data (1.2 MB, ...)"), which
    would split into many arguments."""

    def format_field(self, value: Any, format_spec: str) -> Any:
        from lanenb.snapshots.base import Snapshot

        if isinstance(value, Snapshot):
            value = value.id
        return super().format_field(value, format_spec)


def expand_snapshot_ids(line: str, namespace: dict[str, Any]) -> str:
    """``line`` with ``$var`` and ``{expr}`` expanded from ``namespace`` as IPython would, a
    ``Snapshot`` (what ``lanenb.snapshots.create`` returns) standing for its id, so
    ``%lanesnap diff $a $b`` takes the objects. Like IPython, a line that does not expand
    (an unknown name, a bad expression) is used as written."""
    try:
        return str(_SnapshotIdFormatter().vformat(line, args=[], kwargs=dict(namespace)))
    except Exception:  # IPython's var_expand keeps the line as written too
        return line


def snap_parser() -> MagicArgumentParser:
    """``%lanesnap``'s parser: the actions of ``lanenb snap`` (one definition for both)."""
    from lanenb.commands.snapshots import add_snap_arguments

    return add_snap_arguments(MagicArgumentParser(prog="%lanesnap", description=(
        "Versions of datasets and runs: %lanesnap list, %lanesnap diff A B, %lanesnap restore ID NEW_DIR")))


_SNAP_PARSER = snap_parser()
LaneMagics.lanesnap.__doc__ = _SNAP_PARSER.format_help()
LaneMagics.lanetrain.__doc__ = _PARSER.format_help()
LaneMagics.lanescale.__doc__ = _SCALE_PARSER.format_help()
LaneMagics.lanesweep.__doc__ = _SWEEP_PARSER.format_help()
LaneMagics.lanemlflow.__doc__ = _MLFLOW_PARSER.format_help()


class JobTable:
    """``%lanejobs``' output: an HTML table in JupyterLab, aligned text elsewhere."""

    COLUMNS = ("name", "backend", "status", "progress", "accuracy", "age", "verdict")

    def __init__(self, jobs: list[Job]) -> None:
        self.rows = [self._row(summary) for summary in job_summaries(jobs)]

    @staticmethod
    def _row(summary: dict[str, Any]) -> dict[str, str]:
        """The text columns of one ``job_summary`` row (the fields every face shares)."""
        progress = "-"
        if summary["progress"] is not None:
            progress = f"{summary['progress']:.0%}"
            if summary["eta_s"] is not None:
                progress += f" (ETA {format_duration(summary['eta_s'])})"
        headline = summary.get("headline")
        accuracy = "-" if not headline else headline["cell"]
        age = "-" if summary["age_s"] is None else format_duration(summary["age_s"])
        verdict = summary.get("verdict")  # None where shown_verdict shows none (no timing yet, timing off)
        return {"name": summary["name"], "backend": summary["backend"], "status": summary["status"],
                "progress": progress, "accuracy": accuracy, "age": age, "verdict": verdict["line"] if verdict else "-"}

    def _repr_mimebundle_(self, **kwargs: Any) -> dict[str, Any]:
        return self.table().mimebundle()

    def table(self) -> Table:
        return Table(list(self.COLUMNS), [[r[c] for c in self.COLUMNS] for r in self.rows],
                     empty="no lanenb jobs yet: %lanetrain starts one")

    def __repr__(self) -> str:
        return self.table().text()


def _show_outputs(report: Any) -> bool:
    """Display a report as its outputs (``ChartedReport.outputs``); True: it was displayed."""
    from IPython.display import publish_display_data

    for bundle in report.outputs():
        publish_display_data(bundle)
    return True


def load_ipython_extension(ipython: Any) -> None:
    """``%load_ext lanenb``: register the magics; import the widget and chart libraries now so
    the first ``%lanetrain`` returns at once."""
    import ipywidgets  # noqa: F401
    import matplotlib.backends.backend_agg
    import matplotlib.figure  # noqa: F401

    import lanenb.notebook.view  # noqa: F401
    from lanenb.analysis.charted import ChartedReport

    ipython.register_magics(LaneMagics)
    # %lanescale / %lanecompare reports: the table, then their chart as an output of its own
    ipython.display_formatter.ipython_display_formatter.for_type(ChartedReport, _show_outputs)
