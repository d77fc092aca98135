"""The ``azureml`` backend: an AzureML command job with an MPI distribution per run
(``command_job.py`` builds it, ``workspace.py`` finds the workspace and signs in,
``status.py`` and ``rank_logs.py`` read it back, ``backend.py`` submits, follows and cancels).
The SDK (``azure-ai-ml``) is imported on first use only."""

from lanenb.backends.azureml.backend import AzureMLBackend, AzureMLError
from lanenb.backends.azureml.command_job import build_command, render

__all__ = ["AzureMLBackend", "AzureMLError", "build_command", "render"]
