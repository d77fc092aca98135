"""``lanenb train``: N local ranks under mpirun, streamed with their rank, pretty progress.

The trainer flags are the trainer's own (shared parser), and the config is resolved and
validated here first, so a typo fails in a second instead of after N ranks imported torch.
"""

from __future__ import annotations

import argparse
import datetime as _dt
import os
import sys
from collections.abc import Callable
from types import FrameType
from typing import TYPE_CHECKING, Any, NoReturn, TextIO

from lanenb.analysis.event_text import event_text
from lanenb.commands.arguments import (
    add_job_arguments,
    add_run_arguments,
    check_run_flags,
    flag_words,
    spec_from_args,
)
from lanenb.commands.launch import dry_run_text, metrics_text
from lanenb.contract.spec import TrainSpec
from lanenb.errors import SpecError, UserError
from lanenb.launch.lines import LogLine
from lanenb.launch.mpirun import LaunchError, launch_env, run_local
from lanenb_trainer.config import TrainConfig
from lanenb_trainer.epochs import epoch_text
from lanenb_trainer.progress import is_terminal

if TYPE_CHECKING:
    from tqdm import tqdm

    from lanenb.jobs.job import Job
    from lanenb_trainer.events import Event


def register(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser(
        "train", help="train SCNN with N MPI ranks, here or on Kubernetes",
        description=("Run N trainer ranks (Horovod or torch.distributed). Locally the ranks run in the "
                     "foreground under mpirun; with --backend kubernetes (or --detach) the job is submitted "
                     "through the Job API and its log followed; with --wait it is submitted and waited for "
                     "quietly; --dry-run only prints what would run. The flags are exactly %lanetrain's, "
                     "plus the console group."),
    )
    add_job_arguments(p)
    add_run_arguments(p)
    add_console_arguments(p)
    p.set_defaults(func=cmd_train, parser=p)


CONSOLE_FLAGS = ("--show-system", "--raw", "--detach")  # lanenb train's only flags %lanetrain has not


def add_console_arguments(p: argparse.ArgumentParser) -> None:
    """The flags of a console follow-up (the notebook shows the live view instead)."""
    g = p.add_argument_group("console")
    g.add_argument("--show-system", action="store_true", help="also print the per-rank system events")
    g.add_argument("--raw", action="store_true", help="print every line as received (events as JSON)")
    g.add_argument("--detach", action="store_true",
                   help="submit as a background job and return (lanenb jobs logs -f NAME follows it)")


def default_run_dir() -> str:
    return "runs/" + _dt.datetime.now().strftime("%Y%m%d-%H%M%S")


def resolve(args: argparse.Namespace) -> TrainSpec:
    """The spec from the flags, with RUN:AI variables of this shell as defaults (as the trainer)."""
    return spec_from_args(args, args.parser, env=os.environ)


class ConsoleRenderer:
    """Events as one-line summaries, step events as a progress line; other lines ``[rank] text``."""

    def __init__(self, out: TextIO | None = None, *, show_system: bool = False, raw: bool = False) -> None:
        self.out: TextIO = out if out is not None else sys.stdout  # the stdout of the call, not of the import
        self.show_system = show_system
        self.raw = raw
        self.bar: tqdm[Any] | None = None  # the progress bar, on a terminal once the run has started
        self.total_steps: int | None = None
        self.epochs: int | None = None  # the run's, from its start event: "epoch 3/10" on the bar
        self.end_status: str | None = None
        self.errors: list[LogLine] = []
        self.tty = is_terminal(self.out)

    def _write(self, text: str) -> None:
        if self.bar is not None:
            self.bar.write(text, file=self.out)
        else:
            print(text, file=self.out, flush=True)

    def __call__(self, line: LogLine) -> None:
        ev = line.event
        if self.raw or ev is None:
            self._write(line.tagged())
            return
        if ev.kind == "start" and ev.rank == 0:
            self._start_bar(ev)
        elif ev.kind == "step" and self.bar is not None:
            self.bar.n = ev.get("step", self.bar.n)
            self.bar.set_postfix_str(f"{epoch_text(ev.get('epoch'), self.epochs)} loss {ev.get('loss') or 0:.4f} "
                                     f"lr {ev.get('lr') or 0:.2e} {ev.get('images_per_s') or 0:.1f} img/s")
            return
        elif ev.kind == "error":
            self.errors.append(line)
        elif ev.kind == "end" and ev.rank == 0:
            self.end_status = ev.get("status")
            self.close()
        text = event_text(ev, system=self.show_system)
        if text:
            self._write(f"[{line.rank if line.rank is not None else ev.rank}] {text}")

    def _start_bar(self, ev: Event) -> None:
        self.total_steps = ev.get("total_steps")
        self.epochs = (ev.get("config") or {}).get("epochs")
        if self.tty and self.total_steps:  # elsewhere the step events print as lines (--log-every)
            from lanenb_trainer.progress import progress_bar

            self.bar = progress_bar(total=self.total_steps, unit="step", file=self.out)
            self.bar.update((ev.get("resumed_from") or {}).get("step", 0))

    def close(self) -> None:
        if self.bar is not None:
            self.bar.close()
            self.bar = None


def launch(cfg: TrainConfig, processes: int, *, renderer: Callable[[LogLine], Any] | None = None,
           env: dict[str, str] | None = None) -> int:
    """Run a validated config on ``processes`` local ranks; returns the exit status."""
    return run_local(processes, cfg.to_argv(), env=launch_env(extra=env), on_line=renderer)


def _stop_on_sigterm() -> None:
    """``kill <lanenb pid>`` stops the ranks like Ctrl-C does, instead of orphaning them."""
    import signal
    import threading

    def handler(signum: int, frame: FrameType | None) -> NoReturn:
        raise KeyboardInterrupt

    if threading.current_thread() is threading.main_thread():
        signal.signal(signal.SIGTERM, handler)



def launch_in_console(cfg: TrainConfig, processes: int, renderer: ConsoleRenderer, *, prog: str,
                      env: dict[str, str] | None = None) -> int:
    """Run the ranks with ``renderer`` printing their lines; SIGTERM stops them like Ctrl-C.

    Returns the run's exit status, or 2 after printing why mpirun could not start.
    """
    _stop_on_sigterm()
    try:
        return launch(cfg, processes, renderer=renderer, env=env)
    except LaunchError as exc:
        print(f"{prog}: error: {exc}", file=sys.stderr)
        return 2
    finally:
        renderer.close()


def follow_job(job: Job, renderer: ConsoleRenderer, *, cancel_on_interrupt: bool = False) -> int:
    """Print a submitted job's log through ``renderer`` until it ends.

    Ctrl-C detaches (the job keeps running), or with ``cancel_on_interrupt`` (a foreground
    ``lanenb train``) cancels the job and waits for its ranks to go.

    Returns:
        0 if the job succeeded, 1 if it ended otherwise, 130 on Ctrl-C.
    """
    try:
        for update in job.updates():
            if update.line is not None:
                renderer(update.line)
    except KeyboardInterrupt:
        if cancel_on_interrupt:
            renderer.close()
            job.cancel()
            print(f"interrupted: all ranks stopped ({job.name} cancelled)", file=sys.stderr)
        else:
            print(f"detached: {job.name} keeps running (lanenb jobs cancel {job.name} stops it)", file=sys.stderr)
        return 130
    finally:
        renderer.close()
    status = job.status()
    print(f"{job.name}: {status}", flush=True)
    return 0 if status.state.value == "succeeded" else 1


def wait_quietly(job: Job, timeout: float | None) -> int:
    """``--wait``: block until ``job`` ends, printing nothing meanwhile, then its final state.

    Returns:
        0 if it succeeded, 1 if it ended otherwise, 124 when ``timeout`` passed first (as
        ``lanenb jobs wait``), 130 on Ctrl-C; the job keeps running in the last two cases.
    """
    try:
        status = job.wait(timeout=timeout)
    except TimeoutError as exc:
        print(f"lanenb train: {exc}; it keeps running (lanenb jobs wait {job.name})", file=sys.stderr)
        return 124
    except KeyboardInterrupt:
        print(f"stopped waiting; {job.name} keeps running (lanenb jobs cancel {job.name} stops it)",
              file=sys.stderr)
        return 130
    print(f"{job.name}: {status}" + metrics_text(job), flush=True)
    return 0 if status.state.value == "succeeded" else 1


def cmd_train(args: argparse.Namespace) -> int:
    try:
        check_run_flags(args)
        if args.detach and (args.wait or args.dry_run):
            raise UserError(f"--detach and {'--wait' if args.wait else '--dry-run'} exclude each other")
        spec = resolve(args)
        if args.dry_run:
            text, problems = dry_run_text(spec, args)
            print(text, flush=True)
            return 1 if problems else 0
        if spec.backend == "local" and not (args.detach or args.wait) and not spec.run_dir:
            spec = spec.replace(run_dir=default_run_dir())
    except UserError as exc:
        print(f"lanenb train: error: {exc}", file=sys.stderr)
        return 2
    renderer = ConsoleRenderer(show_system=args.show_system, raw=args.raw)
    from lanenb.jobs import submit

    try:
        job = submit(spec)
    except SpecError as exc:  # the backend's refusal (-np above the cores): in the flags' words
        print(f"lanenb train: error: {flag_words(exc, args)}", file=sys.stderr)
        return 2
    except UserError as exc:
        print(f"lanenb train: error: {exc}", file=sys.stderr)
        return 2
    if args.detach or args.wait or spec.backend != "local":
        print(f"submitted {job.name} ({spec.backend}); run dir {job.run_dir}", flush=True)
    if args.detach:
        print(f"follow it: lanenb jobs logs -f {job.name}    stop it: lanenb jobs cancel {job.name}")
        return 0
    if args.wait:
        return wait_quietly(job, args.timeout)
    if spec.backend != "local":
        return follow_job(job, renderer)
    # in the foreground, the run is a job like any other (in %lanejobs, the sidebar, jobs list) whose
    # ranks belong to this command: Ctrl-C or SIGTERM cancels it
    print(f"{job.name}: run dir {job.run_dir}", flush=True)
    _stop_on_sigterm()
    code = follow_job(job, renderer, cancel_on_interrupt=True)
    if code == 1:
        print(f"training failed; see the error above and {job.run_dir}/events.jsonl", file=sys.stderr)
    elif code == 0:
        print(f"done: metrics in {job.run_dir}/metrics.json", flush=True)
    return code
