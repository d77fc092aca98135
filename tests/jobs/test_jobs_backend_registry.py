"""The backend registry and the status/log value types."""

from __future__ import annotations

import subprocess
import sys

import pytest

from lanenb.jobs import (
    Backend,
    BackendError,
    JobState,
    JobStatus,
    LogLine,
    TrainSpec,
    available_backends,
    get_backend,
    get_job,
    register_backend,
    submit,
    unregister_backend,
)


def test_unknown_backend_lists_the_known_ones():
    with pytest.raises(BackendError, match="unknown backend 'slurm'; available backends: azureml, kubernetes, "
                                           "kubernetes-fetch, local"):
        get_backend("slurm")
    with pytest.raises(BackendError, match="backend factory for 'x' must be callable or 'module:attribute'"):
        register_backend("x", "not-a-path")
    with pytest.raises(BackendError, match="backend 'broken' could not be loaded from no_such_mod:Thing"):
        register_backend("broken", "no_such_mod:Thing")
        try:
            get_backend("broken")
        finally:
            unregister_backend("broken")


def test_local_jobs_never_import_the_kubernetes_client():
    code = ("import sys; from lanenb.jobs import TrainSpec, get_backend; get_backend('local'); "
            "TrainSpec(dataset='/d'); print('kubernetes' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


class _InstantBackend(Backend):
    """A registered third-party backend: everything is answered from the handle."""

    def submit(self, spec, run_dir):
        return {"said": f"hello {spec.name}"}

    def status(self, spec, handle):
        return JobStatus(JobState.SUCCEEDED, reason=handle["said"], finished=1.0)

    def logs(self, spec, handle, *, follow=False, worker=None):
        yield LogLine(0, '@lanenb {"v":1,"t":1,"rank":0,"kind":"end","status":"ok"}')

    def cancel(self, spec, handle):
        raise AssertionError("a finished job is never cancelled")

    def describe(self, spec, handle):
        return {"handle": handle}


def test_a_registered_backend_works_through_the_job_api(tmp_path):
    register_backend("instant", _InstantBackend)
    try:
        assert "instant" in available_backends()
        job = submit(TrainSpec(dataset="/d", backend="instant", name="inst-1"))
        again = get_job("inst-1")
        assert again.wait(timeout=1).reason == "hello inst-1"
        assert [(e.kind, e["status"]) for e in again.events()] == [("end", "ok")]
        assert again.cancel().state is JobState.SUCCEEDED  # finished jobs keep their outcome
        assert job.describe()["backend_detail"] == {"handle": {"said": "hello inst-1"}}
        with pytest.raises(NotImplementedError, match="cannot suspend"):
            job.suspend()
    finally:
        unregister_backend("instant")


def test_status_and_logline_values():
    status = JobStatus("running", reason="2/2 ranks up", ranks={0: "running"})
    assert status.state is JobState.RUNNING and not status.done and str(status) == "running: 2/2 ranks up"
    assert JobStatus.from_dict(status.to_dict()).ranks == {"0": "running"}
    assert [s.value for s in JobState if s.finished] == ["succeeded", "failed", "cancelled", "preempted", "lost"]
    assert str(LogLine(1, "hi")) == "[1] hi" and str(LogLine(None, "mpirun says")) == "mpirun says"
    with pytest.raises(ValueError):
        JobStatus("exploded")


def test_a_name_is_taken_once_unless_the_override_is_explicit():
    """Issue 44: re-registering replaced silently (the model registry raises); now it takes
    ``override=True``, and the registry is one dict, so no stale descriptor stays behind."""
    from lanenb.contract.backends import get_descriptor, register_descriptor

    with pytest.raises(BackendError, match="backend 'local' is already registered; pass override=True"):
        register_backend("local", _InstantBackend)
    assert get_backend("local").name == "local"  # still the built-in one
    register_backend("instant2", _InstantBackend)
    try:
        with pytest.raises(BackendError, match="backend 'instant2' is already registered"):
            register_backend("instant2", "lanenb.backends.local.backend:LocalBackend")
        register_backend("instant2", "lanenb.backends.local.backend:LocalBackend", override=True)
        assert type(get_backend("instant2")).__name__ == "LocalBackend"
        assert get_descriptor("instant2").factory == "lanenb.backends.local.backend:LocalBackend"
    finally:
        unregister_backend("instant2")
    assert "instant2" not in available_backends()
    with pytest.raises(BackendError, match="unknown backend 'instant2'"):
        get_descriptor("instant2")  # gone from the one dict: no descriptor left behind
    local = get_descriptor("local")
    register_descriptor(local, override=True)  # an explicit replacement (here by itself) is allowed
    assert get_descriptor("local") is local
