"""Fixtures of the load tests: an isolated ``LANENB_HOME`` (jobs are recorded by
``load_jobs.record_job``, in tests/support)."""

from __future__ import annotations

from homes import lanenb_home  # noqa: F401  (autouse: every test gets its own LANENB_HOME)
