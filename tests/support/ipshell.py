"""The one IPython shell of a test session, whichever test folder asks first.

``IPython.testing.globalipapp.start_ipython`` starts the shell on its first call and returns
None on every later one, so two folders that each call it break whichever runs second.
"""

from __future__ import annotations

from typing import Any


def session_shell() -> Any:
    """The session's test IPython shell, started on first use, with ``%load_ext lanenb`` done."""
    from IPython.testing import globalipapp

    shell = globalipapp.start_ipython() or globalipapp.get_ipython()
    shell.run_line_magic("load_ext", "lanenb")
    return shell
