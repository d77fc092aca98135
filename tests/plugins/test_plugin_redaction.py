"""Issue 43, findings 1-2: redaction is the job layer's, not each backend's. A plug-in backend that
redacts nothing still shows ``<redacted>`` to every reader (logs, status reasons, describe), and an
entry point cannot silently take a built-in backend's name."""

from __future__ import annotations

import logging
from typing import Any

from lanenb.contract import backends
from lanenb.contract.backend import Backend, LogLine
from lanenb.contract.backends import get_descriptor, load_entry_points, register_backend
from lanenb.contract.descriptor import BackendDescriptor
from lanenb.contract.redact import REDACTED
from lanenb.contract.status import JobState, JobStatus
from lanenb.jobs import TrainSpec, get_job, submit

SECRET = "tok-4f1e2d3c4b5a6978"


class Leaky(Backend):
    """Says everything raw: a log line, a failure reason and a describe() with the value."""

    name = "leaky"

    def submit(self, spec: TrainSpec, run_dir: Any) -> dict[str, Any]:
        return {"where": "nowhere"}

    def status(self, spec: TrainSpec, handle: dict[str, Any]) -> JobStatus:
        return JobStatus(JobState.FAILED, reason=f"rank 0: auth failed for token {SECRET}", finished=1.0)

    def logs(self, spec: TrainSpec, handle: dict[str, Any], *, follow: bool = False, worker: Any = None):
        yield LogLine(0, f"using {SECRET}")
        yield LogLine(0, '@lanenb {"v":1,"t":1,"rank":0,"kind":"error","message":"bad \\"' + SECRET + '\\""}')

    def describe(self, spec: TrainSpec, handle: dict[str, Any]) -> dict[str, Any]:
        return {"log_tail": [f"token={SECRET}"], "pod": {"args": ["--token", SECRET]}}

    def cancel(self, spec: TrainSpec, handle: dict[str, Any]) -> None:
        pass


def test_a_backend_that_redacts_nothing_still_shows_redacted_to_every_reader(lanenb_home):
    register_backend("leaky", Leaky)
    job = submit(TrainSpec(dataset="/data", backend="leaky", name="lane-leak", env={"API_TOKEN": SECRET}))
    again = get_job("lane-leak")  # another kernel: only the registry's redacted spec and the fingerprints
    texts = [line.text for line in again.logs()]
    assert texts[0] == f"using {REDACTED}" and SECRET not in "".join(texts)
    assert SECRET not in again.read_log().lines[1][0].text  # the event line, its value JSON-escaped
    status = again.status()
    assert status.reason == f"rank 0: auth failed for token {REDACTED}"
    assert SECRET not in str(get_job("lane-leak")._record.status)  # stored redacted
    detail = again.describe()["backend_detail"]
    assert detail == {"log_tail": [f"token={REDACTED}"], "pod": {"args": ["--token", REDACTED]}}
    assert job.name == "lane-leak"


def test_an_entry_point_cannot_take_a_builtin_name_without_saying_so(monkeypatch, caplog):
    class EP:
        name, value = "local", "evil:DESCRIPTOR"

        def __init__(self, descriptor):
            self.descriptor = descriptor

        def load(self):
            return self.descriptor

    plain = BackendDescriptor("local", "evil.backend:Evil", summary="not the local backend")
    meant = BackendDescriptor("kubernetes", "corp.k8s:Patched", replaces_builtin=True)
    monkeypatch.setattr(backends.importlib.metadata, "entry_points", lambda group: [EP(plain), EP(meant)])
    with caplog.at_level(logging.WARNING):
        assert load_entry_points(force=True) == ["kubernetes"]
    assert get_descriptor("local").factory == "lanenb.backends.local.backend:LocalBackend"  # kept
    assert get_descriptor("kubernetes").factory == "corp.k8s:Patched"  # the explicit override
    assert "names the built-in backend 'local': ignored" in caplog.text
