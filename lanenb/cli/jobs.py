"""``lanenb jobs ...``: look after jobs from a terminal (the same registry the notebook uses)."""

from __future__ import annotations

import argparse
import json
import sys
import time
from typing import TYPE_CHECKING, Any

from lanenb.cli import describe
from lanenb.commands.arguments import flag_words
from lanenb.commands.trackers import add_mlflow_arguments
from lanenb.errors import SpecError, UserError

if TYPE_CHECKING:
    from lanenb.analysis.runstate import RunState
    from lanenb.jobs.job import Job


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = subparsers.add_parser("jobs", help="list, inspect, follow and cancel training jobs",
                                   description=describe(__doc__))
    sub = parser.add_subparsers(dest="jobs_command", required=True, metavar="ACTION")

    p = sub.add_parser("list", help=f"the newest {LIST_LIMIT} jobs, newest first (--all: every job)")
    p.add_argument("--limit", type=int, default=LIST_LIMIT, metavar="N",
                   help=f"the newest N jobs (default {LIST_LIMIT}, as %%lanejobs)")
    p.add_argument("--all", action="store_true", help="every recorded job, newest first")
    p.add_argument("--json", action="store_true", help="machine-readable output (the same jobs, same order)")
    p.add_argument("--refresh", action="store_true", help="ask each unfinished job's backend for its state")
    p.add_argument("--team", action="store_true",
                   help="every lanenb MPIJob you may read in the cluster (all users): who, state and why it waits, "
                        "GPUs by node, quotas, and what RBAC kept from you")
    p.add_argument("--namespace", action="append", default=None, metavar="NS",
                   help="with --team: only this namespace (repeat for more; default: every namespace you may list, "
                        "else your context's namespace and $LANENB_TEAM_NAMESPACES)")
    p.add_argument("--context", default=None, help="with --team: the kubeconfig context (default: the current one)")
    p.set_defaults(func=_list)

    p = sub.add_parser("show", help="the doctor's verdict (why the run is slow), then status, spec, metrics and "
                                    "backend detail of one job")
    p.add_argument("name")
    p.add_argument("--json", action="store_true", help="only the JSON (the verdict in its 'verdict' field)")
    p.add_argument("--lines", type=int, default=SHOW_LINES, metavar="N",
                   help=f"log lines read for the verdict (default {SHOW_LINES}: the latest timing windows "
                        f"of every rank)")
    p.set_defaults(func=_show)

    p = sub.add_parser("logs", help="print a job's output (rank-tagged)")
    p.add_argument("name")
    p.add_argument("-f", "--follow", action="store_true", help="keep printing until the job ends")
    p.add_argument("--worker", type=int, default=None, help="only this rank / worker")
    p.add_argument("--events", action="store_true", help="only the parsed @lanenb events, as JSON lines")
    p.set_defaults(func=_logs)

    p = sub.add_parser("cancel", help="stop every rank of a job (--team: a teammate's MPIJob, where RBAC allows)")
    p.add_argument("name", help="a job of yours; with --team NAMESPACE/NAME of the team view")
    p.add_argument("--team", action="store_true",
                   help="delete the MPIJob NAMESPACE/NAME of the team view (anyone's), if RBAC allows it")
    p.add_argument("--confirm", default=None, metavar="NAME",
                   help="with --team: the job's name again (nothing is deleted without it)")
    p.add_argument("--uid", default=None, help="with --team: only the job with this uid (the team view's JSON)")
    p.add_argument("--context", default=None, help="with --team: the kubeconfig context (default: the current one)")
    p.set_defaults(func=_cancel)

    p = sub.add_parser("suspend", help="stop a job at a step boundary with a checkpoint, keeping it (resume goes on)")
    p.add_argument("name")
    p.set_defaults(func=_suspend)

    p = sub.add_parser("resume", help="run a suspended or preempted job again from its checkpoint, optionally "
                                      "on another number of ranks or loader workers")
    p.add_argument("name")
    p.add_argument("--processes", "-np", type=int, default=None, help="ranks from now on (the checkpoint's global "
                                                                      "batch is kept by accumulation)")
    p.add_argument("--num-workers", type=int, default=None, help="loader workers per rank from now on")
    p.set_defaults(func=_resume)

    p = sub.add_parser("wait", help="block until a job ends; exit 0 only if it succeeded")
    p.add_argument("name")
    p.add_argument("--timeout", type=float, default=None, help="seconds (default: no limit)")
    p.set_defaults(func=_wait)

    p = sub.add_parser("to-mlflow", help="log a finished job to MLflow: params, metric series, headline, "
                                         "checkpoint (as %%lanemlflow)")
    p.add_argument("name")
    add_mlflow_arguments(p)
    p.set_defaults(func=_to_mlflow)

    p = sub.add_parser("tensorboard", help="print a job's TensorBoard log dir (tensorboard --logdir $(...))")
    p.add_argument("name")
    p.set_defaults(func=_tensorboard)

    p = sub.add_parser("prune", help="forget finished jobs older than a given age (rows archived first; "
                                     "run dirs are kept)")
    p.add_argument("--older-than", required=True, type=_duration, metavar="AGE",
                   help="finished more than AGE ago: 30d, 12h, 90m, 2w or seconds")
    p.add_argument("--dry-run", action="store_true", help="list what would be pruned; change nothing")
    p.set_defaults(func=_prune)

    p = sub.add_parser("repair", help="check the job registry; if damaged, set it aside and rebuild it "
                                      "(rows still readable + local jobs from their run dirs)")
    p.set_defaults(func=_repair)


_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 7 * 86400}


def _duration(text: str) -> float:
    """``30d`` / ``12h`` / ``90m`` / ``45s`` / ``2w`` / plain seconds -> seconds."""
    value = text.strip().lower()
    scale = _UNITS.get(value[-1:])
    number = value[:-1] if scale else value
    try:
        seconds = float(number) * (scale or 1)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r}: give an age such as 30d, 12h, 90m, 2w or seconds") from None
    if not seconds >= 0:
        raise argparse.ArgumentTypeError(f"{text!r}: an age must be >= 0")
    return seconds


LIST_LIMIT = 20  # %lanejobs' default: a list view shows the newest jobs, not a team's whole history
SHOW_LINES = 5000  # enough for the last timing windows of every rank, even after a long test evaluation


def _fmt_time(ts: float | None) -> str:
    return time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(ts)) if ts else "-"


def _get(name: str) -> Job | None:
    from lanenb.jobs import JobNotFoundError, get_job

    try:
        return get_job(name)
    except JobNotFoundError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return None


def _runs_here(job: Any) -> bool:
    """Whether the job's backend runs on this machine (its status is a process check and a few
    files: cheap), told by its descriptor without building the backend (no cluster client)."""
    from lanenb.contract.backends import BackendError, get_descriptor

    try:
        return get_descriptor(job._record.backend).capabilities.runs_here
    except BackendError:
        return False


def _recorded_state(job: Any, refresh: bool) -> RunState:
    """An unfinished local job's live state (a dead rank's job must not read ``running``; asking
    costs a process check), a remote one's as the registry recorded it (no cluster call: the
    listing stays instant; ``--refresh`` asks), a finished job's as recorded."""
    from lanenb.analysis.runstate import RunState, fill_tests
    from lanenb.jobs import JobState

    state = RunState(state=job._record.state)
    fill_tests(state, job._record.metrics)  # the headline of a finished job, from its recorded metrics
    if not JobState(state.state).finished and (refresh or _runs_here(job)):
        state.fold_status(job.status())
    return state


def _stale(job: Any, refresh: bool) -> float | None:
    """When a listed state was last recorded, for an unfinished remote job shown without asking."""
    from lanenb.jobs import JobState

    if refresh or JobState(job._record.state).finished or _runs_here(job):
        return None
    return job._record.updated


def _team(args: argparse.Namespace) -> int:
    """``--team``: one list of each resource, one progress pass, nothing left running."""
    from lanenb.team import team_view

    view = team_view(context=args.context, namespaces=args.namespace, watch=False)
    print(json.dumps(view.to_dict(), indent=2) if args.json else view.text())
    return 0


def _list(args: argparse.Namespace) -> int:
    from lanenb.analysis.summary import job_summaries
    from lanenb.jobs import JobRegistry, list_jobs

    if args.team:
        return _team(args)
    if args.namespace or args.context:
        print("error: --namespace and --context go with --team (your own jobs are listed from the registry)",
              file=sys.stderr)
        return 2

    if not args.all and args.limit < 1:
        print(f"error: --limit must be >= 1, got {args.limit}", file=sys.stderr)
        return 2
    jobs = list_jobs(newest_first=True, limit=None if args.all else args.limit)
    summaries = job_summaries(jobs, lambda job: _recorded_state(job, args.refresh))
    rows: list[dict[str, Any]] = []
    for job, s in zip(jobs, summaries):
        state = s["status"] if s["error"] else s["state"]  # "unknown (why)" when unreadable
        rows.append({"name": s["name"], "backend": s["backend"], "state": state, "created": s["created"],
                     "run_dir": s["run_dir"], "metrics": job._record.metrics, "headline": s["headline"],
                     "as_of": _stale(job, args.refresh)})
    if args.json:
        print(json.dumps(rows, indent=2))
        return 0
    if not rows:
        print("no jobs yet")
        return 0
    width = max(len(r["name"]) for r in rows)
    heads = [_headline_text(r["headline"]) for r in rows]
    acc_width = max(len("TEST ACCURACY"), *(len(h) for h in heads))
    print(f"{'NAME':<{width}}  {'BACKEND':<10}  {'STATE':<10}  {'CREATED':<19}  "
          f"{'TEST ACCURACY':<{acc_width}}  RUN DIR")
    for r, head in zip(rows, heads):
        shown = r["state"] + ("*" if r["as_of"] else "")
        print(f"{r['name']:<{width}}  {r['backend']:<10}  {shown:<10}  {_fmt_time(r['created']):<19}  "
              f"{head:<{acc_width}}  {r['run_dir'] or '-'}")
    stale = [r["as_of"] for r in rows if r["as_of"]]
    if stale:
        print(f"* as recorded, the oldest at {_fmt_time(min(stale))}: --refresh asks the cluster")
    if not args.all and len(rows) == args.limit:
        total = JobRegistry().count()
        if total > len(rows):
            print(f"({len(rows)} newest of {total} jobs; --all lists every job)")
    return 0


def _prune(args: argparse.Namespace) -> int:
    from lanenb.jobs import JobRegistry

    registry = JobRegistry()
    records = registry.prune(args.older_than, dry_run=args.dry_run)
    if not records:
        print("no finished job is that old: nothing to prune")
        return 0
    for rec in records:
        print(f"{'would prune' if args.dry_run else 'pruned'} {rec.name}  {rec.state}  "
              f"ended {_fmt_time(rec.finished or rec.created)}  run dir {rec.run_dir or '-'} (kept)")
    if args.dry_run:
        print(f"{len(records)} job(s) would be pruned; run again without --dry-run to prune them")
    else:
        print(f"{len(records)} job(s) pruned; their rows are in {registry.last_archive} "
              f"(run dirs untouched: delete them yourself if you need the space)")
    return 0


def _repair(args: argparse.Namespace) -> int:
    from lanenb.registry.repair import repair_registry

    print(repair_registry().text())
    return 0


def _headline_text(headline: dict[str, Any] | None) -> str:
    """``Headline.to_dict()``'s table words, as ``%lanejobs`` shows them: "0.9380 test (best.pt,
    epoch 6); 0.9480 (last, epoch 9)"; "-" before a test result (a listing reads no log)."""
    return "-" if not headline else str(headline["cell"])


def _show(args: argparse.Namespace) -> int:
    job = _get(args.name)
    if job is None:
        return 2
    from lanenb.analysis.doctor import diagnose
    from lanenb.analysis.runstate import tail_state

    if args.lines < 1:
        print(f"error: --lines must be >= 1, got {args.lines}", file=sys.stderr)
        return 2
    job.status()
    # running or finished alike: the log holds every rank's timing events (a run dir's
    # events.jsonl only rank 0's), so the verdict is read from the log's tail
    state = tail_state(job, args.lines)
    verdict = diagnose(state)
    headline = state.headline()
    info = job.describe()
    info["verdict"] = verdict.to_dict()
    info["headline"] = None if headline is None else headline.to_dict()
    if not args.json:
        print(verdict)
        if headline is not None:
            print(headline.long())
    print(json.dumps(info, indent=2, default=str))
    return 0


def _logs(args: argparse.Namespace) -> int:
    job = _get(args.name)
    if job is None:
        return 2
    if args.events:
        for event in job.events(follow=args.follow):
            if args.worker is None or event.rank == args.worker:
                print(json.dumps(event.to_dict()), flush=True)
        return 0
    for line in job.logs(follow=args.follow, worker=args.worker):
        print(str(line), flush=True)
    return 0


def _cancel_team(args: argparse.Namespace) -> int:
    """``cancel --team NAMESPACE/NAME --confirm NAME``: ``lanenb.team.stop_team_job``."""
    from lanenb.team import stop_team_job

    namespace, _, name = args.name.partition("/")
    if not name:
        raise UserError(f"cancel --team {args.name!r}: give the team view's NAMESPACE/NAME (e.g. team-b/lane-run)")
    if args.confirm is None:
        raise UserError(f"cancel --team {args.name}: add --confirm {name} (a teammate's job is deleted only when "
                         "its name is repeated)")
    done = stop_team_job(namespace, name, args.confirm, uid=args.uid, context=args.context)
    if not done["stopped"]:
        print(f"{namespace}/{name}: nothing stopped: {done['reason']}", file=sys.stderr)
        return 1
    print(f"{namespace}/{name}: deleted (its pods stop first)")
    return 0


def _cancel(args: argparse.Namespace) -> int:
    if args.team:
        return _cancel_team(args)
    if args.confirm is not None or args.uid is not None:
        raise UserError("--confirm and --uid go with --team (a teammate's job); your own jobs need neither")
    job = _get(args.name)
    if job is None:
        return 2
    status = job.cancel()
    print(f"{job.name}: {status}")
    return 0


def _suspend(args: argparse.Namespace) -> int:
    job = _get(args.name)
    if job is None:
        return 2
    print(f"{job.name}: {job.suspend()}")
    return 0


def _resume(args: argparse.Namespace) -> int:
    job = _get(args.name)
    if job is None:
        return 2
    changes = {k: v for k, v in (("processes", args.processes), ("num_workers", args.num_workers)) if v is not None}
    try:
        status = job.resume(**changes)
    except SpecError as exc:  # in the words the user typed: --processes 999, not processes=999
        print(f"lanenb jobs resume: error: {flag_words(exc, args)}", file=sys.stderr)
        return 2
    print(f"{job.name}: {status}")
    return 0


def _wait(args: argparse.Namespace) -> int:
    job = _get(args.name)
    if job is None:
        return 2
    try:
        status = job.wait(timeout=args.timeout)
    except TimeoutError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 124
    print(f"{job.name}: {status}")
    return 0 if status.state.value == "succeeded" else 1


def _to_mlflow(args: argparse.Namespace) -> int:
    from lanenb.commands.trackers import run_mlflow
    from lanenb.trackers import MlflowExportError

    try:  # a bad value (UserError) is main()'s: "error: ..." and exit 2
        print(run_mlflow(args, args.name))
    except MlflowExportError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    return 0


def _tensorboard(args: argparse.Namespace) -> int:
    from lanenb.trackers import tensorboard_dir

    print(tensorboard_dir(args.name))  # an unknown job (UserError) is main()'s: "error: ..." and exit 2
    return 0
