"""The ranks' output of an AzureML job as ``LogLine`` objects, with a resumable cursor.

AzureML keeps each MPI process's stdout and stderr in the run's log files,
``user_logs/std_log_process_<rank>.txt`` (one rank's output, in order), and lists them with a
read URL each in the run history's details (what ``ml_client.jobs.stream`` reads). The cursor
is the byte offset after the last delivered line of each rank (``{"0": 10240, "1": 9988}``), so
a poll asks only for what follows (an HTTP ``Range`` request; a server that ignores it sends the
whole file and the known part is cut here). A last line without its newline is held back until
the job has ended, so a line is never cut in two across polls.

Lines go through ``lanenb_trainer.ranktag.read_tag`` like every other backend's, so a line that
still carries Open MPI's ``[job,rank]<stdout>:`` tag keeps its own rank; ``@lanenb`` events are
parsed from the ``LogLine``, on their way to ``RunState``, exactly as for local and MPIJob runs.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from typing import Any

from lanenb.contract.backend import LogLine
from lanenb.errors import SpecError
from lanenb_trainer.ranktag import read_tag

__all__ = ["SOURCE", "rank_files", "decode_cursor", "encode_cursor", "new_lines"]

SOURCE = "azureml"
_RANK_FILE = re.compile(r"^user_logs/std_log_process_(\d+)\.txt$")
_SINGLE = "user_logs/std_log.txt"  # a job without a distribution: one process, rank 0


def rank_files(log_files: Mapping[str, Any] | None) -> dict[int, str]:
    """``{rank: url}`` of the ranks' own log files among a run's ``logFiles`` (system logs
    and the runtime's ``azureml-logs`` are left out)."""
    files = dict(log_files or {})
    ranks = {int(m.group(1)): str(url) for name, url in files.items() if (m := _RANK_FILE.match(name))}
    if not ranks and _SINGLE in files:
        ranks[0] = str(files[_SINGLE])
    return dict(sorted(ranks.items()))


def decode_cursor(cursor: str | None) -> dict[int, int]:
    """Bytes already delivered per rank; None is the start.

    Raises:
        SpecError: a cursor that is not one of these (e.g. another backend's).
    """
    if not cursor:
        return {}
    try:
        data = json.loads(cursor)
        if not isinstance(data, dict):
            raise ValueError(cursor)
        return {int(k): int(v) for k, v in data.items() if int(v) >= 0}
    except (TypeError, ValueError):
        raise SpecError("cursor", cursor, "is not an AzureML log cursor ({\"rank\": bytes, ...})") from None


def encode_cursor(done: Mapping[int, int]) -> str:
    return json.dumps({str(k): v for k, v in sorted(done.items())}, separators=(",", ":"))


def new_lines(rank: int, data: bytes, *, final: bool) -> tuple[list[tuple[LogLine, int]], int]:
    """The whole lines of ``data`` (one rank's file from the cursor on), each with the bytes it
    takes, and the bytes consumed; a trailing partial line only when ``final`` (the job has
    ended: nothing more will be appended)."""
    out: list[tuple[LogLine, int]] = []
    used = 0
    while used < len(data):
        end = data.find(b"\n", used)
        if end < 0:  # a line still being written
            if not final:
                break
            raw, size = data[used:], len(data) - used
        else:
            raw, size = data[used:end], end + 1 - used
        tagged_rank, stream, text = read_tag(raw.decode("utf-8", "replace").rstrip("\r"))
        out.append((LogLine(rank if tagged_rank is None else tagged_rank, text, SOURCE,
                            "stdout" if tagged_rank is None else stream), size))
        used += size
    return out, used
