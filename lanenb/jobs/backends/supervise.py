"""The detached process that owns one local job.

The notebook kernel starts ``python -m lanenb.jobs.backends.supervise`` in its own session
(``start_new_session=True``), so restarting the kernel does not kill training. The supervisor
runs the launcher (mpirun) as its child, appends every output line to ``job.log`` in the run
dir (mpirun's ``[job,rank]<stdout>:`` tags kept, so any process can re-attach and tell the
ranks apart) and finally writes ``exit.json`` atomically; that file, not the supervisor's
liveness, is what says the job is over and how it ended.

It never imports torch: it must start in milliseconds.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any, Sequence

from lanenb.launch.mpirun import iter_output
from lanenb_trainer.atomic import write_json

LOG_NAME = "job.log"
EXIT_NAME = "exit.json"
CANCEL_NAME = "cancel.json"
SUPERVISOR_PREFIX = "[lanenb-supervisor] "


def format_log_line(rank: int | None, stream: str, text: str) -> str:
    """Rank lines keep mpirun's tag shape so ``split_rank_tag`` reads them back."""
    return f"{text}\n" if rank is None else f"[1,{rank}]<{stream}>:{text}\n"


def _say(log, text: str) -> None:
    log.write(SUPERVISOR_PREFIX + text + "\n")
    log.flush()


def supervise(argv: Sequence[str], run_dir: Path, log_path: Path) -> int:
    run_dir.mkdir(parents=True, exist_ok=True)
    started = time.time()
    child: subprocess.Popen[bytes] | None = None
    signals_seen: list[int] = []

    def forward(signum: int, _frame: Any) -> None:
        # cancel() signals the whole process group; pass it on to the launcher explicitly in
        # case it lives elsewhere, and keep draining its output so the log stays complete.
        signals_seen.append(signum)
        if child is not None and child.poll() is None:
            try:
                child.send_signal(signum)
            except ProcessLookupError:
                pass

    signal.signal(signal.SIGTERM, forward)
    signal.signal(signal.SIGINT, forward)
    signal.signal(signal.SIGHUP, signal.SIG_IGN)  # the kernel's terminal going away is not a reason to stop

    with open(log_path, "a", encoding="utf-8", errors="replace", buffering=1) as log:
        _say(log, f"started pid={os.getpid()} argv={json.dumps(list(argv))}")
        if signals_seen:  # cancelled while starting up: never start the ranks
            _say(log, f"cancelled (signal {signals_seen[0]}) before the launcher started")
            write_json(run_dir / EXIT_NAME, {"returncode": -signals_seen[0], "started": started,
                                                    "finished": time.time(), "signals": signals_seen}, indent=None)
            return 1
        try:
            child = subprocess.Popen(list(argv), stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                     stdin=subprocess.DEVNULL)
        except OSError as exc:
            _say(log, f"could not start {argv[0]!r}: {exc}")
            write_json(run_dir / EXIT_NAME, {"returncode": 127, "error": str(exc),
                                                    "started": started, "finished": time.time()}, indent=None)
            return 127
        assert child.stdout is not None
        raw_lines = (raw.decode("utf-8", errors="replace") for raw in iter(child.stdout.readline, b""))
        for line in iter_output(raw_lines):  # whole lines per rank, even when mpirun splits them
            log.write(format_log_line(line.rank, line.stream, line.text))
        child.stdout.close()
        rc = child.wait()
        _say(log, f"launcher exited with code {rc}")
    write_json(run_dir / EXIT_NAME, {
        "returncode": rc, "started": started, "finished": time.time(),
        "signals": signals_seen,
    }, indent=None)
    return 0 if rc == 0 else 1


def main(args: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m lanenb.jobs.backends.supervise", description=__doc__.splitlines()[0])
    parser.add_argument("--run-dir", required=True, type=Path)
    parser.add_argument("--log", type=Path, default=None, help=f"default: RUN_DIR/{LOG_NAME}")
    parser.add_argument("argv", nargs=argparse.REMAINDER, help="-- then the launcher command")
    ns = parser.parse_args(args)
    argv = ns.argv[1:] if ns.argv[:1] == ["--"] else ns.argv
    if not argv:
        parser.error("no command given after --")
    return supervise(argv, ns.run_dir, ns.log or ns.run_dir / LOG_NAME)


if __name__ == "__main__":
    sys.exit(main())
