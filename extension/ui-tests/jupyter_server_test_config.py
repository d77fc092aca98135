"""JupyterLab for the browser tests: Galata's test settings (no token, the galata helper
extension), the port and root directory chosen by tests/browser/test_lab_extension.py."""

import os

from jupyterlab.galata import configure_jupyter_server

configure_jupyter_server(c)  # noqa: F821
c.ServerApp.port = int(os.environ.get("LANENB_UI_PORT", "8888"))  # noqa: F821
c.ServerApp.allow_root = True  # noqa: F821  (CI runs as root)
