"""The one list of SCNN backbones: name -> model builder, in torchvision's ``register_model`` style.

``--backbone`` choices, ``TrainConfig`` and ``TrainSpec`` validation, the launch form and
``build_model`` all read :func:`list_models`, so a backbone exists everywhere or nowhere.

The built-in builders are registered by ``"module:function"`` string, not by a decorator on
each builder, because the names must be known without importing torch: the notebook kernel
and ``lanenb train`` validate ``--backbone`` in milliseconds, and torch's import takes
seconds. The string is resolved on the first :func:`get_model_builder`. The layer test reads a
``"module:attr"`` string as a name, not an import, so this module stays below ``models/``.
A builder defined elsewhere (a notebook, a test) registers with ``@register_model("name")``.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

__all__ = ["ModelEntry", "register_model", "get_model_builder", "list_models", "imagenet_models"]

Builder = Callable[..., Any]  # (num_lanes=, weights=, input_size=, ...) -> SCNN


@dataclass
class ModelEntry:
    """One backbone: its builder (a callable or ``"module:function"``) and whether its backbone
    has torchvision's ImageNet layout (``--backbone-weights`` accepts it)."""

    name: str
    builder: Builder | str
    imagenet: bool = False


_MODELS: dict[str, ModelEntry] = {}


def register_model(name: str, builder: Builder | str | None = None, *,
                   imagenet: bool = False) -> Any:
    """Register ``builder`` as backbone ``name``; without ``builder``, a decorator.

    ``builder`` is a callable or a ``"module:function"`` string imported on first use.

    Raises:
        ValueError: ``name`` is empty or already registered (two builders under one name
            would make ``--backbone`` mean different models on different imports), or
            ``builder`` is neither callable nor ``"module:function"``.
    """
    if not isinstance(name, str) or not name.strip():
        raise ValueError(f"model name must be a non-empty string, got {name!r}")
    if name in _MODELS:
        raise ValueError(f"model {name!r} is already registered ({_describe(_MODELS[name].builder)})")

    def add(fn: Builder | str) -> Any:
        if not (callable(fn) or (isinstance(fn, str) and ":" in fn)):
            raise ValueError(f"builder for model {name!r} must be callable or 'module:function', got {fn!r}")
        if name in _MODELS:  # decorated after a same-named registration
            raise ValueError(f"model {name!r} is already registered ({_describe(_MODELS[name].builder)})")
        _MODELS[name] = ModelEntry(name, fn, imagenet)
        return fn

    return add if builder is None else add(builder)


def list_models() -> tuple[str, ...]:
    """Every backbone name, in registration order (the built-ins: small, vgg16, resnet18, resnet34)."""
    return tuple(_MODELS)


def imagenet_models() -> tuple[str, ...]:
    """The backbones whose weights have torchvision's ImageNet layout."""
    return tuple(name for name, entry in _MODELS.items() if entry.imagenet)


def get_model_builder(name: str) -> Builder:
    """The builder registered as ``name``, importing it on first use.

    Raises:
        ValueError: no backbone of that name (the message lists the names).
    """
    entry = _MODELS.get(name) if isinstance(name, str) else None
    if entry is None:
        raise ValueError(f"unknown backbone {name!r}; choose one of: {', '.join(list_models())}")
    if isinstance(entry.builder, str):
        module, _, attr = entry.builder.partition(":")
        entry.builder = getattr(importlib.import_module(module), attr)
    return entry.builder  # type: ignore[return-value]


def _describe(builder: Builder | str) -> str:
    if isinstance(builder, str):
        return builder
    return f"{getattr(builder, '__module__', '?')}:{getattr(builder, '__qualname__', builder)}"


# The built-in backbones (builders in lanenb_trainer/models/scnn.py).
register_model("small", "lanenb_trainer.models.scnn:scnn_small")
register_model("vgg16", "lanenb_trainer.models.scnn:scnn_vgg16", imagenet=True)
register_model("resnet18", "lanenb_trainer.models.scnn:scnn_resnet18", imagenet=True)
register_model("resnet34", "lanenb_trainer.models.scnn:scnn_resnet34", imagenet=True)
