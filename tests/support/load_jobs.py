"""Jobs recorded straight through the registry for the load tests (tests/load): a running one's
"supervisor" is this test process (alive, so the job reads as running)."""

from __future__ import annotations

import os
import socket
from pathlib import Path
from typing import Any

import psutil

from lanenb.contract.spec import TrainSpec
from lanenb.registry.jobs import JobRegistry


def record_job(home: Path, name: str, *, state: str = "running", created: float = 1000.0,
               finished: float | None = None, running_here: bool = True) -> dict[str, Any]:
    """A local job row with a run dir; ``running_here``: its supervisor is this process."""
    run_dir = home / "runs" / name
    run_dir.mkdir(parents=True, exist_ok=True)
    handle = {"pid": os.getpid() if running_here else 1, "pgid": None,
              "create_time": psutil.Process().create_time() if running_here else 0.0,
              "host": socket.gethostname(), "run_dir": str(run_dir), "log": str(run_dir / "job.log")}
    spec = TrainSpec(dataset="/data/tusimple", processes=1, name=name).to_dict()
    spec["run_dir"] = str(run_dir)
    row = {"name": name, "backend": "local", "spec": spec, "handle": handle, "state": state,
           "status": {"state": state} if state != "running" else {}, "run_dir": str(run_dir),
           "created": created, "updated": created, "finished": finished}
    JobRegistry().import_records([row])
    return row
