"""The one error root of lanenb (papermill's ``PapermillException`` pattern).

``LanenbError`` is the base of every error lanenb raises on purpose. ``UserError`` marks the
ones caused by what a person typed or chose (a bad flag, a missing dataset, an unknown job):
front ends show their message as one line, never a traceback. Magics turn a ``UserError``
into IPython's ``UsageError``, the CLI into ``error: message`` and exit status 2, widgets into
a banner. Concrete errors keep their standard second base (``ValueError``, ``KeyError``,
``RuntimeError``) so ``except ValueError`` in user code keeps working.

It lives in the trainer package because both packages raise these errors and the trainer
must not import ``lanenb`` (one-way import rule); ``lanenb.errors`` re-exports it.
"""

from __future__ import annotations

__all__ = ["LanenbError", "UserError"]


class LanenbError(Exception):
    """Base of every error lanenb raises deliberately."""


class UserError(LanenbError):
    """Caused by user input: show the message, not a traceback."""
