"""The backbone registry: one list, torch-free names, a duplicate-name guard, lazy builders."""

from __future__ import annotations

import subprocess
import sys

import pytest

from lanenb_trainer import model_registry
from lanenb_trainer.model_registry import get_model_builder, imagenet_models, list_models, register_model


@pytest.fixture()
def scratch_registry(monkeypatch):
    """Registrations made by a test vanish after it (the built-ins stay as they were)."""
    monkeypatch.setattr(model_registry, "_MODELS", dict(model_registry._MODELS))


def test_the_names_need_no_torch():
    probe = ("import sys, lanenb_trainer.config, lanenb_trainer.model_registry as r\n"
             "print(r.list_models(), 'torch' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "('small', 'vgg16', 'resnet18', 'resnet34') False"


def test_imagenet_backbones_are_flagged_in_the_registry():
    assert imagenet_models() == ("vgg16", "resnet18", "resnet34")


def test_a_duplicate_name_is_refused(scratch_registry):
    already = r"model 'small' is already registered \(lanenb_trainer.models.scnn:scnn_small\)"
    with pytest.raises(ValueError, match=already):
        register_model("small", lambda **kw: None)
    with pytest.raises(ValueError, match="model 'small' is already registered"):
        @register_model("small")
        def other(**kw):
            return None
    assert list_models() == ("small", "vgg16", "resnet18", "resnet34")


def test_decorator_registers_a_new_builder_last(scratch_registry):
    @register_model("tiny", imagenet=False)
    def tiny(**kw):
        return ("tiny", kw)

    assert list_models()[-1] == "tiny"
    assert get_model_builder("tiny") is tiny
    assert "tiny" not in imagenet_models()


@pytest.mark.parametrize("name,builder,expected", [
    ("", "m:f", "model name must be a non-empty string"),
    ("x", "no-colon", "builder for model 'x' must be callable or 'module:function'"),
    ("x", 3, "builder for model 'x' must be callable or 'module:function'"),
])
def test_bad_registrations(scratch_registry, name, builder, expected):
    with pytest.raises(ValueError, match=expected):
        register_model(name, builder)


def test_unknown_backbone_lists_the_registry():
    with pytest.raises(ValueError, match=r"unknown backbone 'vgg19'; choose one of: small, vgg16, resnet18, resnet34"):
        get_model_builder("vgg19")
