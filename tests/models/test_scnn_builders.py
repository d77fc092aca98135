"""SCNN builders: shapes, gradients, parameter counts, input validation, a tiny overfit."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from lanenb_trainer import models
from lanenb_trainer.models import SCNN, build_model, get_model_builder, list_models, scnn_resnet18, scnn_small

SMALL = (64, 160)


@pytest.mark.parametrize("name", sorted(list_models()))
def test_output_shapes_and_stride(name: str) -> None:
    model = build_model(name, num_lanes=4, input_size=SMALL)
    x = torch.randn(2, 3, *SMALL)
    seg, exist = model(x)
    assert seg.shape == (2, 5, *SMALL)
    assert exist.shape == (2, 4)
    feats = model.backbone(x)
    assert feats.shape == (2, 128, SMALL[0] // 8, SMALL[1] // 8)


def test_builders_are_the_registry_entries() -> None:
    assert list_models() == ("small", "vgg16", "resnet18", "resnet34")
    assert get_model_builder("small") is models.scnn_small and get_model_builder("vgg16") is models.scnn_vgg16
    assert get_model_builder("resnet34") is models.scnn_resnet34
    assert isinstance(models.scnn_resnet34(input_size=SMALL), SCNN)


def test_builders_show_their_arguments_on_shift_tab() -> None:
    for builder in (models.scnn_small, models.scnn_vgg16, models.scnn_resnet18, models.scnn_resnet34):
        assert "num_lanes:" in builder.__doc__ and "weights:" in builder.__doc__ and "Raises:" in builder.__doc__


def test_num_lanes_sets_both_heads() -> None:
    seg, exist = scnn_small(num_lanes=6, input_size=SMALL)(torch.randn(1, 3, *SMALL))
    assert seg.shape[1] == 7 and exist.shape == (1, 6)


def test_outputs_are_logits_not_probabilities() -> None:
    model = scnn_small(input_size=SMALL).eval()
    seg, _ = model(torch.randn(2, 3, *SMALL))
    assert not torch.allclose(seg.sum(1), torch.ones_like(seg[:, 0]))
    assert (seg < 0).any() or (seg > 1).any()


def test_any_input_size_with_same_weights() -> None:
    model = scnn_small(input_size=(128, 320)).eval()
    for size in [(128, 320), (64, 160), (96, 200)]:
        seg, exist = model(torch.randn(1, 3, *size))
        assert seg.shape == (1, 5, *size) and exist.shape == (1, 4)


def test_backward_reaches_every_parameter() -> None:
    model = scnn_small(input_size=SMALL)
    x = torch.randn(2, 3, *SMALL)
    mask = torch.randint(0, 5, (2, *SMALL))
    seg, exist = model(x)
    loss = F.cross_entropy(seg, mask) + 0.1 * F.binary_cross_entropy_with_logits(exist, torch.ones(2, 4))
    loss.backward()
    missing = [n for n, p in model.named_parameters() if p.grad is None or not torch.isfinite(p.grad).all()]
    assert missing == []
    assert model.message_passing.down.weight.grad.abs().sum() > 0


@pytest.mark.parametrize(
    "name,low,high",
    [("vgg16", 19e6, 22e6), ("resnet18", 11e6, 13e6), ("resnet34", 21e6, 23e6), ("small", 0.3e6, 1.5e6)],
)
def test_parameter_counts(name: str, low: float, high: float) -> None:
    n = sum(p.numel() for p in build_model(name).parameters())  # default 288x800 heads
    assert low <= n <= high, f"{name}: {n}"


def test_random_init_differs_per_seed_and_message_passing_is_small() -> None:
    torch.manual_seed(1)
    a = scnn_small()
    torch.manual_seed(2)
    b = scnn_small()
    assert not torch.equal(a.seg_head.weight, b.seg_head.weight)
    assert float(a.message_passing.down.weight.detach().std()) < 0.02


def test_unknown_backbone_names_it_and_lists_choices() -> None:
    with pytest.raises(ValueError, match=r"unknown backbone 'vgg19'; choose one of: small, vgg16, resnet18, resnet34"):
        build_model("vgg19")


@pytest.mark.parametrize(
    "kwargs,message",
    [
        ({"num_lanes": 0}, "num_lanes must be a positive int, got 0"),
        ({"input_size": (100, 800)},
         r"input_size must be \(height, width\), positive multiples of 8, got \(100, 800\)"),
        ({"dropout": 1.5}, r"dropout must be in \[0, 1\), got 1.5"),
    ],
)
def test_bad_constructor_arguments(kwargs, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        build_model("small", **kwargs)


def test_bad_input_tensors() -> None:
    model = scnn_small(input_size=SMALL)
    with pytest.raises(ValueError, match=r"multiples of 8, got 60x160"):
        model(torch.randn(1, 3, 60, 160))
    with pytest.raises(ValueError, match=r"images shaped \[N, 3, H, W\], got \(1, 1, 64, 160\)"):
        model(torch.randn(1, 1, 64, 160))


@pytest.mark.parametrize("wrap", ["state_dict", "model_key", "ddp_prefix"])
def test_weights_round_trip(tmp_path, wrap: str) -> None:
    src = scnn_resnet18(input_size=SMALL).eval()
    sd = src.state_dict()
    obj = {
        "state_dict": sd,
        "model_key": {"model": sd, "epoch": 3},  # the trainer's checkpoint layout
        "ddp_prefix": {f"module.{k}": v for k, v in sd.items()},
    }[wrap]
    path = tmp_path / "w.pt"
    torch.save(obj, path)
    dst = build_model("resnet18", weights=str(path), input_size=SMALL).eval()
    x = torch.randn(1, 3, *SMALL)
    with torch.no_grad():
        for a, b in zip(src(x), dst(x)):
            torch.testing.assert_close(a, b, rtol=0, atol=0)


def test_missing_weights_file(tmp_path) -> None:
    missing = tmp_path / "nope.pt"
    with pytest.raises(FileNotFoundError, match=r"weights file not found: .*nope\.pt.*nothing is downloaded"):
        build_model("small", weights=missing)


def test_weights_for_another_backbone(tmp_path) -> None:
    path = tmp_path / "small.pt"
    torch.save(scnn_small(input_size=SMALL).state_dict(), path)
    does_not_fit = (r"small\.pt' does not fit this model \(missing: backbone\.bn1\.bias.*\(\+\d+ more\); "
                    r"unexpected: backbone\.features")
    with pytest.raises(ValueError, match=does_not_fit):
        build_model("resnet18", weights=path, input_size=SMALL)
    with pytest.raises(ValueError, match=r"shape mismatch: exist_fc1\.weight \(128, 200\) != \(128, 4500\)"):
        build_model("small", weights=path)  # heads sized for 288x800


def test_weights_file_not_a_state_dict(tmp_path) -> None:
    junk = tmp_path / "junk.pt"
    junk.write_bytes(b"not a torch file")
    with pytest.raises(ValueError, match=r"cannot read weights file .*junk\.pt"):
        build_model("small", weights=junk)
    lst = tmp_path / "list.pt"
    torch.save([1, 2, 3], lst)
    with pytest.raises(ValueError, match=r"list\.pt' holds list, expected a state_dict"):
        build_model("small", weights=lst)


def test_small_model_overfits_a_batch_quickly() -> None:
    """The CPU demo backbone must learn: a few SGD steps cut the SCNN loss on a fixed batch."""
    torch.manual_seed(0)
    model = scnn_small(input_size=SMALL)
    x = torch.randn(4, 3, *SMALL)
    mask = torch.zeros(4, *SMALL, dtype=torch.long)
    for lane, col in enumerate((30, 60, 100, 130), start=1):
        mask[:, :, col : col + 6] = lane
        x[:, lane % 3, :, col : col + 6] += 2.0  # visible lane paint
    exist = torch.ones(4, 4)
    weight = torch.tensor([0.4, 1.0, 1.0, 1.0, 1.0])
    opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)  # the paper's LR
    losses = []
    for _ in range(25):
        seg, ex = model(x)
        loss = F.cross_entropy(seg, mask, weight=weight) + 0.1 * F.binary_cross_entropy_with_logits(ex, exist)
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss.item())
    assert losses[-1] < 0.5 * losses[0], losses


def test_postprocess_is_lazily_reexported() -> None:
    assert "postprocess" in models.__all__
    with pytest.raises(AttributeError, match="has no attribute 'nope'"):
        models.nope  # noqa: B018


def test_message_passing_checkpoint_keys_are_plain_convs() -> None:
    sd = scnn_small().state_dict()
    assert tuple(sd["message_passing.down.weight"].shape) == (128, 128, 1, 9)
    assert tuple(sd["message_passing.left.weight"].shape) == (128, 128, 9, 1)
    assert not any(k.startswith("message_passing.") and k.endswith("bias") for k in sd)


def test_config_and_spec_offer_exactly_the_model_registry():
    """The CLI/spec lists are plain tuples (no torch import); they must name every builder."""
    from lanenb.contract import spec
    from lanenb_trainer import config

    assert config.BACKBONES == spec.BACKBONES == list_models()
    assert config.IMAGENET_BACKBONES == ("vgg16", "resnet18", "resnet34")


def test_message_passing_init_is_pytorch_auto_drives() -> None:
    """uniform +-sqrt(2 / (C * k * 5)) (std bound / sqrt 3), the reference the trainer follows;
    the old normal(0, sqrt(2 / (k * C * 5))) was sqrt(3) times wider and fails this test."""
    import math

    from lanenb_trainer.models.message_passing import MessagePassing

    torch.manual_seed(0)
    mp = MessagePassing(128, 9)
    bound = math.sqrt(2.0 / (128 * 9 * 5))
    for conv in (mp.down, mp.up, mp.right, mp.left):
        w = conv.weight.detach()
        assert float(w.abs().max()) <= bound
        assert abs(float(w.std()) - bound / math.sqrt(3)) < 0.03 * bound
    # output/input RMS of the four sweeps at init, as PAD's would be: close to 1
    x = torch.randn(2, 128, 36, 100)
    with torch.no_grad():
        ratio = float(mp(x).pow(2).mean().sqrt() / x.pow(2).mean().sqrt())
    assert 1.0 <= ratio < 1.6, ratio


@pytest.mark.parametrize("size", [(64, 160), (288, 800), (72, 200)])  # even grids; 9x25 -> 4x12 is not
def test_existence_pool_is_the_adaptive_pool(size: tuple[int, int]) -> None:
    # a plain average pool where the map divides evenly (its CUDA backward is deterministic,
    # AdaptiveAvgPool2d's is not), the adaptive pool elsewhere: the same values either way
    model = scnn_small(num_lanes=4, input_size=size)
    fmap = torch.rand(2, 5, size[0] // 8, size[1] // 8, dtype=torch.float64, requires_grad=True)
    ours = model._pool_exist(fmap)
    ref = model.exist_pool(fmap)
    assert ours.shape == ref.shape == (2, 5, *model.exist_grid)
    assert torch.allclose(ours, ref, rtol=0, atol=1e-12)
    (g_ours,) = torch.autograd.grad(ours.sum(), fmap)
    (g_ref,) = torch.autograd.grad(ref.sum(), fmap)
    assert torch.allclose(g_ours, g_ref, atol=1e-12)
