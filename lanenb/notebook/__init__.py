"""The notebook face of lanenb: magics, the live job view and the panels.

    %load_ext lanenb
    job = %lanetrain --data data/synth --processes 2 --batch-size 4
    from lanenb.notebook import TrainPanel, DatasetPreview, PredictionViewer

Imports ipywidgets and matplotlib; ``lanenb.jobs`` and the trainer never import this package.
"""

from __future__ import annotations

from typing import Any

__all__ = ["JobView", "TrainPanel", "DatasetPreview", "PredictionViewer", "SnapshotBrowser"]


def __getattr__(name: str) -> Any:  # lazy: %load_ext lanenb does not pay for every panel
    modules = {"JobView": "view", "TrainPanel": "panel", "DatasetPreview": "dataset",
               "PredictionViewer": "predictions", "SnapshotBrowser": "snapshots"}
    if name in modules:
        import importlib

        return getattr(importlib.import_module(f"{__name__}.{modules[name]}"), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
