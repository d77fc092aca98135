"""SCNN lane-detection models, torchvision style: ``build_model("vgg16")`` or ``scnn_vgg16()``;
``list_models()`` names the backbones (the registry, ``lanenb_trainer.model_registry``).

``postprocess`` (probability maps -> TuSimple lanes) is re-exported lazily so importing the
models does not pull it in.
"""

from __future__ import annotations

import importlib
from typing import Any

from lanenb_trainer.model_registry import get_model_builder, list_models, register_model

from .message_passing import MessagePassing, message_pass, plain_message_passing, spatial_message_passing
from .scnn import (
    SCNN,
    build_from_checkpoint,
    build_model,
    load_weights,
    scnn_resnet18,
    scnn_resnet34,
    scnn_small,
    scnn_vgg16,
)

__all__ = [
    "MessagePassing",
    "SCNN",
    "build_from_checkpoint",
    "build_model",
    "get_model_builder",
    "list_models",
    "load_weights",
    "message_pass",
    "plain_message_passing",
    "postprocess",
    "register_model",
    "scnn_resnet18",
    "scnn_resnet34",
    "scnn_small",
    "scnn_vgg16",
    "spatial_message_passing",
]


def __getattr__(name: str) -> Any:
    if name == "postprocess":
        return importlib.import_module(f"{__name__}.postprocess")
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
