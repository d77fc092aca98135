"""ImageNet weights in torchvision's key layout load into SCNN's backbones (issue 8, item 5).
torchvision itself does not import here, so the state dicts are built with its key names."""

from __future__ import annotations

import re

import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F

from lanenb_trainer.models import build_model
from lanenb_trainer.models.pretrained import TORCHVISION_VGG16_BN_CONVS, load_backbone_weights


def torchvision_vgg16_bn_state(seed: int = 0) -> dict[str, torch.Tensor]:
    """Keys and shapes of torchvision's vgg16_bn (features with pool4/pool5, classifier)."""
    g = torch.Generator().manual_seed(seed)
    cfg = [64, 64, 128, 128, 256, 256, 256, 512, 512, 512, 512, 512, 512]
    state, cin = {}, 3
    for idx, cout in zip(TORCHVISION_VGG16_BN_CONVS, cfg):
        state[f"features.{idx}.weight"] = torch.randn(cout, cin, 3, 3, generator=g) * 0.05
        state[f"features.{idx}.bias"] = torch.randn(cout, generator=g)
        state[f"features.{idx + 1}.weight"] = torch.rand(cout, generator=g) + 0.5
        state[f"features.{idx + 1}.bias"] = torch.randn(cout, generator=g)
        state[f"features.{idx + 1}.running_mean"] = torch.randn(cout, generator=g)
        state[f"features.{idx + 1}.running_var"] = torch.rand(cout, generator=g) + 0.5
        state[f"features.{idx + 1}.num_batches_tracked"] = torch.tensor(100)
        cin = cout
    state["classifier.0.weight"] = torch.randn(4096, 25088 // 64, generator=g)  # shape irrelevant: skipped
    state["classifier.6.bias"] = torch.randn(1000, generator=g)
    return state


def test_vgg16_bn_convs_map_in_order_with_the_bias_folded(tmp_path):
    state = torchvision_vgg16_bn_state()
    path = tmp_path / "vgg16_bn.pth"
    torch.save(state, path)
    model = build_model("vgg16", input_size=(64, 128))
    report = load_backbone_weights(model, "vgg16", path)
    assert len(report["loaded"]) == 13 * 6 and report["skipped"] == ["classifier.0.weight", "classifier.6.bias"]
    assert all(k.startswith("head.") for k in report["missing"])  # the SCNN-only layers
    feats = model.backbone.features
    convs = [i for i, m in enumerate(feats) if isinstance(m, nn.Conv2d)]
    assert len(convs) == 13 and convs[10] == 33  # pool4 removed: torchvision's conv 34 is our 33
    # one block, torchvision style (conv + bias, BN) vs ours (bias-free conv, folded BN): equal
    tv = TORCHVISION_VGG16_BN_CONVS[10]
    x = torch.randn(2, 512, 9, 11)
    ref = F.batch_norm(F.conv2d(x, state[f"features.{tv}.weight"], state[f"features.{tv}.bias"], padding=1),
                       state[f"features.{tv + 1}.running_mean"], state[f"features.{tv + 1}.running_var"],
                       state[f"features.{tv + 1}.weight"], state[f"features.{tv + 1}.bias"], training=False)
    model.eval()
    with torch.no_grad():
        ours = feats[convs[10] + 1](F.conv2d(x, feats[convs[10]].weight, padding=1))
    assert torch.allclose(ours, ref, atol=1e-4, rtol=1e-5)


def test_resnet18_keys_map_one_to_one_and_fc_is_skipped(tmp_path):
    donor = build_model("resnet18", input_size=(64, 128)).backbone.state_dict()
    state = {k: torch.randn_like(v, dtype=torch.float32) if v.is_floating_point() else v
             for k, v in donor.items() if not k.startswith("reduce.")}
    state["fc.weight"], state["fc.bias"] = torch.randn(1000, 512), torch.randn(1000)
    torch.save({"state_dict": {"module." + k: v for k, v in state.items()}}, tmp_path / "r18.pth")
    model = build_model("resnet18", input_size=(64, 128))
    report = load_backbone_weights(model, "resnet18", tmp_path / "r18.pth")
    assert report["skipped"] == ["fc.bias", "fc.weight"]
    assert all(k.startswith("reduce.") for k in report["missing"])
    assert torch.equal(model.backbone.layer3[0].conv1.weight, state["layer3.0.conv1.weight"])


@pytest.mark.parametrize("case,message", [
    ("small", "backbone 'small' has no ImageNet layout"),
    ("missing", "backbone weights not found"),
    ("wrong_arch", "no key matches the resnet18 backbone"),
    ("not_state", "are not a state dict"),
])
def test_bad_backbone_weights_are_named(tmp_path, case, message):
    backbone, path = "resnet18", tmp_path / "w.pth"
    if case == "small":
        backbone = "small"
        torch.save({}, path)
    elif case == "missing":
        path = tmp_path / "nope.pth"
    elif case == "wrong_arch":
        torch.save(torchvision_vgg16_bn_state(), path)
    elif case == "not_state":
        torch.save({"epoch": 3}, path)
    with pytest.raises((ValueError, FileNotFoundError), match=message):
        load_backbone_weights(build_model(backbone, input_size=(64, 128)), backbone, path)


def test_trainer_flag_is_validated(tmp_path):
    from lanenb_trainer.config import ConfigError, parse_config

    (tmp_path / "d").mkdir()
    base = ["--data", str(tmp_path / "d"), "--run-dir", str(tmp_path / "r")]
    with pytest.raises(ConfigError, match=re.escape("--backbone-weights '/no/file.pth': no such file")):
        parse_config(base + ["--backbone", "vgg16", "--backbone-weights", "/no/file.pth"], env={})
    (tmp_path / "w.pth").write_bytes(b"x")
    with pytest.raises(ConfigError, match=r"needs an ImageNet backbone .* not --backbone 'small'"):
        parse_config(base + ["--backbone-weights", str(tmp_path / "w.pth")], env={})
