"""The ``azureml`` backend: an AzureML command job with an MPI distribution per run
(``command_job.py`` builds it, ``workspace.py`` finds the workspace and signs in,
``status.py`` and ``rank_logs.py`` read it back, ``backend.py`` submits, follows and cancels).
The SDK (``azure-ai-ml``) is imported on first use only."""

from __future__ import annotations

from typing import TYPE_CHECKING

from lanenb.plugins import lazy_attributes

if TYPE_CHECKING:
    from lanenb.backends.azureml.backend import AzureMLBackend, AzureMLError
    from lanenb.backends.azureml.command_job import build_command, render
    from lanenb.backends.azureml.options import AzureMLOptions

__all__ = ["AzureMLBackend", "AzureMLError", "build_command", "render", "AzureMLOptions"]

# imported on first use: the descriptor (descriptor.py) is read by --help and the panel without
# importing the backend
_LAZY = {
    "AzureMLBackend": "lanenb.backends.azureml.backend",
    "AzureMLError": "lanenb.backends.azureml.backend",
    "build_command": "lanenb.backends.azureml.command_job",
    "render": "lanenb.backends.azureml.command_job",
    "AzureMLOptions": "lanenb.backends.azureml.options",
}

__getattr__ = lazy_attributes(__name__, _LAZY)
