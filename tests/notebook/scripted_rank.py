"""A rank program that replays a script of ``@lanenb`` events and plain lines (one JSON object
per line: ``{"rank": R, "sleep": S, "line": "..."}`` or ``{"rank": R, "sleep": S, "event": {...}}``;
an optional ``"world": N`` keeps a line only in runs of N ranks).

It runs under the real mpirun through the real supervisor (``LocalBackend(program=...)``), so
views, magics and the update stream are tested end to end in a second instead of waiting for
torch; tests edit the script and check that what is shown follows the events.
"""

import json
import os
import sys
import time

from lanenb_trainer.events import format_event

rank = int(os.environ.get("OMPI_COMM_WORLD_RANK", "0"))
world = int(os.environ.get("OMPI_COMM_WORLD_SIZE", "1"))
script = sys.argv[1]
code = 0
with open(script) as lines:
    for raw in lines:
        step = json.loads(raw)
        if step.get("rank", 0) != rank or step.get("world", world) != world:
            continue
        time.sleep(step.get("sleep", 0))
        if "event" in step:
            ev = dict(step["event"])
            kind = ev.pop("kind")
            print(format_event(kind, rank, **ev), flush=True)
        elif "line" in step:
            print(step["line"], flush=True)
        elif "exit" in step:
            code = int(step["exit"])
sys.exit(code)
