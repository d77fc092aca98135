"""Ctrl-C in tests that start programs and interrupt them.

A shell starts background jobs with SIGINT ignored, and ignored signals are inherited across
``exec``: under ``cmd &`` (a CI runner, ``nohup``), a child would never see the test's SIGINT.
Pass :func:`default_sigint` as ``preexec_fn`` so the child handles Ctrl-C as a user's would.
"""

from __future__ import annotations

import signal


def default_sigint() -> None:
    """Restore SIGINT's default disposition in a child, before it executes its program."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)
