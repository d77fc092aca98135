"""The lanenb Jupyter server extension: the REST API the JupyterLab "Lane training" sidebar
reads (``/lanenb/jobs``, ``/lanenb/snapshots``, ... under the server's ``base_url``).

Enabled by ``jupyter-config/server-config/lanenb.json`` (installed into
``etc/jupyter/jupyter_server_config.d``). Importing this package imports no tornado: the
handlers load only when Jupyter server loads the extension.
"""

from __future__ import annotations

from typing import Any

__all__ = ["_jupyter_server_extension_points", "_load_jupyter_server_extension"]


def _jupyter_server_extension_points() -> list[dict[str, str]]:
    return [{"module": "lanenb.server"}]


def _load_jupyter_server_extension(server_app: Any) -> None:
    """Called by Jupyter server once at start: register the handlers."""
    from lanenb.server.handlers import setup_handlers

    routes = setup_handlers(server_app.web_app)
    server_app.log.info("lanenb server extension: %d routes under %s", len(routes),
                        server_app.web_app.settings["base_url"] + "lanenb/")
