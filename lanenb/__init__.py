"""lanenb: notebook-first distributed lane-detection training.

``%load_ext lanenb`` registers the magics (``%lanetrain``, ``%lanejobs``, ...); importing the
package alone has no side effects and imports no Jupyter library.
"""

from __future__ import annotations

from typing import Any

from lanenb.version import __version__

__all__ = ["__version__", "load_ipython_extension", "predict", "fetch_dataset", "fetch_to_pvc", "retrain"]


def load_ipython_extension(ipython: Any) -> None:
    """Called by ``%load_ext lanenb``."""
    from lanenb.notebook.magics import load_ipython_extension as load

    load(ipython)


def _jupyter_labextension_paths() -> list[dict[str, str]]:
    """Where the prebuilt JupyterLab extension (the "Lane training" sidebar) lives."""
    return [{"src": "labextension", "dest": "lanenb"}]


def _jupyter_server_extension_points() -> list[dict[str, str]]:
    """The server extension (``lanenb.server``, loaded lazily by Jupyter server)."""
    return [{"module": "lanenb.server"}]


def predict(weights: Any, images: Any, **kwargs: Any) -> Any:
    """``lanenb.predict(weights, images)``: lanes on images (see ``lanenb.inference.predict.predict``)."""
    from lanenb.inference.predict import predict as _predict

    return _predict(weights, images, **kwargs)


def fetch_to_pvc(name: str = "tusimple", *, pvc: str, image: str, **kwargs: Any) -> Any:
    """``lanenb.fetch_to_pvc("tusimple", pvc="data", image=IMG)``: the fetch as a Kubernetes Job
    that fills the PVC (created unless it exists), recorded as a lanenb job; waits for it and
    returns the ``Job`` (see ``lanenb.datasets.cluster.fetch_to_pvc``; ``submit_fetch_job``
    returns at once)."""
    from lanenb.datasets.cluster import fetch_to_pvc as _fetch

    return _fetch(name, pvc=pvc, image=image, **kwargs)


def fetch_dataset(name: str, to: Any, **kwargs: Any) -> Any:
    """``lanenb.fetch_dataset("tusimple", to=DIR)``: download and prepare a dataset
    (see ``lanenb_trainer.datasets.fetch.fetch_dataset`` for the arguments)."""
    from lanenb_trainer.datasets.fetch import fetch_dataset as _fetch

    return _fetch(name, to, **kwargs)


def retrain(snapshot_id: Any, new_volume: str, **kwargs: Any) -> Any:
    """``lanenb.retrain(snapshot_id, "data/tusimple-v1b", epochs=3)``: restore a snapshot into the
    NEW ``new_volume`` and submit a job with the settings of the run that made it (see
    ``lanenb.workflows.retrain.retrain`` for the arguments and errors). Returns the ``Job``."""
    from lanenb.workflows.retrain import retrain as _retrain

    return _retrain(snapshot_id, new_volume, **kwargs)
