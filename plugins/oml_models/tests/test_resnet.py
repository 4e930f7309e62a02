"""Tests of ResnetExtractor, GeM pooling, checkpoint loading and the plugin's registration."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from oml_models import GEM, CheckpointError, ResnetExtractor
from oml_models import plugin as models_plugin
from oml_models.pooling import gem_or_avg_pool
from torch import nn

from oml_core.interfaces.models import IExtractor
from oml_core.registry import Registry, UnknownNameError
from oml_core.utils.checkpoints import strip_prefixes
from oml_core.zoo.extractor import ZooExtractor

FEAT_DIMS = {"resnet18": 512, "resnet34": 512, "resnet50": 2048, "resnet101": 2048, "resnet152": 2048}
ARCHS = ["resnet18", "resnet34", "resnet50", "resnet50_projector", "resnet101", "resnet152"]


def _images(batch: int = 2, seed: int = 0) -> torch.Tensor:
    return torch.randn(batch, 3, 32, 32, generator=torch.Generator().manual_seed(seed))


@pytest.mark.parametrize("arch", ["resnet18", "resnet50"])
@pytest.mark.parametrize("remove_fc", [True, False])
def test_forward_shapes(arch: str, remove_fc: bool) -> None:
    torch.manual_seed(0)
    model = ResnetExtractor(None, arch=arch, gem_p=None, remove_fc=remove_fc, normalise_features=False).eval()
    expected = FEAT_DIMS[arch] if remove_fc else 1000
    assert model.feat_dim == expected
    with torch.no_grad():
        out = model(_images(3))
    assert out.shape == (3, expected)
    assert torch.isfinite(out).all()


@pytest.mark.parametrize("arch", ["resnet34", "resnet101", "resnet152"])
def test_feat_dim_of_other_archs(arch: str) -> None:
    model = ResnetExtractor(None, arch=arch, gem_p=3.0, remove_fc=True, normalise_features=True)
    assert model.feat_dim == FEAT_DIMS[arch]
    assert isinstance(model.model.avgpool, GEM)
    assert isinstance(model.model.fc, nn.Identity)
    if arch == "resnet34":  # building the deeper ones twice is slow; fc's size does not depend on depth
        assert (
            ResnetExtractor(None, arch, gem_p=None, remove_fc=False, normalise_features=True).feat_dim == 1000
        )


def test_is_an_extractor_and_constructors_listed() -> None:
    model = ResnetExtractor(None, arch="resnet18", gem_p=None, remove_fc=True, normalise_features=True)
    assert isinstance(model, IExtractor)
    assert list(ResnetExtractor.constructors) == ARCHS


@pytest.mark.parametrize(("remove_fc", "feat_dim"), [(True, 2048), (False, 128)])
def test_resnet50_projector_has_mocos_head(remove_fc: bool, feat_dim: int) -> None:
    torch.manual_seed(0)
    model = ResnetExtractor(
        None, "resnet50_projector", gem_p=None, remove_fc=remove_fc, normalise_features=False
    )
    assert model.feat_dim == feat_dim
    with torch.no_grad():
        assert model.eval()(_images(2)).shape == (2, feat_dim)
    if not remove_fc:  # Linear(2048, 2048), ReLU, Linear(2048, 128) as fc.0 and fc.2
        assert [k for k in model.model.state_dict() if k.startswith("fc.")] == [
            "fc.0.weight",
            "fc.0.bias",
            "fc.2.weight",
            "fc.2.bias",
        ]
        assert model.model.fc[0].weight.shape == (2048, 2048) and isinstance(model.model.fc[1], nn.ReLU)


def test_normalise_features_gives_unit_norms() -> None:
    torch.manual_seed(0)
    model = ResnetExtractor(None, arch="resnet18", gem_p=3.0, remove_fc=True, normalise_features=True).eval()
    with torch.no_grad():
        out = model(_images(4))
    assert out.shape == (4, 512)
    torch.testing.assert_close(out.norm(dim=1), torch.ones(4))


def test_extract_equals_forward() -> None:
    torch.manual_seed(0)
    model = ResnetExtractor(
        None, arch="resnet18", gem_p=None, remove_fc=False, normalise_features=False
    ).eval()
    x = _images(2)
    with torch.no_grad():
        torch.testing.assert_close(model.extract(x), model(x), rtol=0, atol=0)


def test_gem_p1_is_average_pooling_and_large_p_tends_to_max() -> None:
    x = torch.tensor([[[[1.0, 2.0], [3.0, 6.0]], [[0.5, 0.5], [0.5, 0.5]]]])  # [1, 2, 2, 2]
    torch.testing.assert_close(GEM(p=1.0)(x), torch.tensor([[[[3.0]], [[0.5]]]]))
    torch.testing.assert_close(GEM(p=1.0)(x), nn.AdaptiveAvgPool2d((1, 1))(x))
    # p = 2: sqrt((1 + 4 + 9 + 36) / 4) = sqrt(12.5)
    torch.testing.assert_close(GEM(p=2.0)(x)[0, 0, 0, 0], torch.tensor(12.5).sqrt())
    big = GEM(p=500.0)(x)
    assert big.shape == (1, 2, 1, 1)
    # (1/4 * 6^500 * (1 + tiny))^(1/500) = 6 * 4^(-1/500) ~ 5.9834
    torch.testing.assert_close(big[0, 0, 0, 0], torch.tensor(6.0 * 4 ** (-1 / 500)))
    torch.testing.assert_close(big[0, 1, 0, 0], torch.tensor(0.5))
    assert abs(GEM(p=5000.0)(x)[0, 0, 0, 0].item() - 6.0) < 2e-3


def test_gem_gradient_is_finite_for_large_p() -> None:
    x = torch.tensor([[[[1.0, 2.0], [3.0, 6.0]]]], requires_grad=True)
    GEM(p=200.0)(x).sum().backward()
    assert torch.isfinite(x.grad).all()
    assert x.grad[0, 0, 1, 1] > 0.99  # d max / d x_max ~ 1


def test_gem_p_none_or_one_keeps_average_pooling() -> None:
    assert isinstance(gem_or_avg_pool(None), nn.AdaptiveAvgPool2d)
    assert isinstance(gem_or_avg_pool(1), nn.AdaptiveAvgPool2d)
    assert isinstance(gem_or_avg_pool(3.0), GEM)
    with pytest.raises(ValueError, match="positive"):
        GEM(p=0.0)


def test_strip_prefixes_repeatedly() -> None:
    sd = {"model.model.conv1.weight": 1, "module.extractor.fc.bias": 2, "layer1.0.bn1.weight": 3}
    assert strip_prefixes(sd) == {"conv1.weight": 1, "fc.bias": 2, "layer1.0.bn1.weight": 3}


@pytest.mark.parametrize("remove_fc", [True, False])
def test_save_and_load_state_dict_with_model_prefix(tmp_path: Path, remove_fc: bool) -> None:
    torch.manual_seed(0)
    src = ResnetExtractor(
        None, arch="resnet18", gem_p=3.0, remove_fc=remove_fc, normalise_features=True
    ).eval()
    # ResnetExtractor.state_dict() keys start with "model." (its torchvision ResNet attribute)
    assert all(k.startswith("model.") for k in src.state_dict())
    path = tmp_path / "extractor.pth"
    torch.save(src.state_dict(), path)

    torch.manual_seed(1)
    dst = ResnetExtractor(str(path), arch="resnet18", gem_p=3.0, remove_fc=remove_fc, normalise_features=True)
    dst.eval()
    x = _images(2)
    with torch.no_grad():
        torch.testing.assert_close(dst(x), src(x), rtol=0, atol=0)
    # a Path works too
    dst2 = ResnetExtractor(
        path, arch="resnet18", gem_p=3.0, remove_fc=remove_fc, normalise_features=True
    ).eval()
    with torch.no_grad():
        torch.testing.assert_close(dst2(x), src(x), rtol=0, atol=0)


def test_load_lightning_checkpoint_with_criterion(tmp_path: Path) -> None:
    torch.manual_seed(0)
    src = ResnetExtractor(None, arch="resnet18", gem_p=None, remove_fc=True, normalise_features=False).eval()
    state_dict = {f"model.{k}": v for k, v in src.state_dict().items()}  # the LightningModule's "model."
    state_dict["criterion.weight"] = torch.zeros(3, 512)
    path = tmp_path / "last.ckpt"
    torch.save({"state_dict": state_dict, "epoch": 3, "global_step": 10}, path)
    dst = ResnetExtractor(
        str(path), arch="resnet18", gem_p=None, remove_fc=True, normalise_features=False
    ).eval()
    x = _images(2)
    with torch.no_grad():
        torch.testing.assert_close(dst(x), src(x), rtol=0, atol=0)


def test_full_checkpoint_loads_with_remove_fc(tmp_path: Path) -> None:
    torch.manual_seed(0)
    src = ResnetExtractor(None, arch="resnet18", gem_p=None, remove_fc=False, normalise_features=False)
    path = tmp_path / "full.pth"
    torch.save(src.model.state_dict(), path)  # torchvision keys, fc included
    dst = ResnetExtractor(str(path), arch="resnet18", gem_p=None, remove_fc=True, normalise_features=False)
    torch.testing.assert_close(dst.model.conv1.weight, src.model.conv1.weight, rtol=0, atol=0)
    assert dst.feat_dim == 512


def test_bad_checkpoint_names_file_and_missing_keys(tmp_path: Path) -> None:
    src = ResnetExtractor(None, arch="resnet18", gem_p=None, remove_fc=True, normalise_features=False)
    state_dict = src.state_dict()
    del state_dict["model.conv1.weight"]
    state_dict["model.extra_head.weight"] = torch.zeros(2)
    path = tmp_path / "broken.pth"
    torch.save(state_dict, path)
    with pytest.raises(CheckpointError) as info:
        ResnetExtractor(str(path), arch="resnet18", gem_p=None, remove_fc=True, normalise_features=False)
    message = str(info.value)
    assert str(path) in message
    assert "missing keys (1): conv1.weight" in message
    assert "unexpected keys (1): extra_head.weight" in message


def test_checkpoint_of_other_arch_fails_with_clear_error(tmp_path: Path) -> None:
    path = tmp_path / "r18.pth"
    torch.save(ResnetExtractor(None, "resnet18", None, True, False).state_dict(), path)
    with pytest.raises(CheckpointError, match=r"r18\.pth.*missing keys \(\d+\): .*layer"):
        ResnetExtractor(str(path), arch="resnet34", gem_p=None, remove_fc=True, normalise_features=False)


def test_non_state_dict_file_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "numbers.pth"
    torch.save([1, 2, 3], path)
    with pytest.raises(CheckpointError, match="numbers.pth.*not a state dict"):
        ResnetExtractor(str(path), arch="resnet18", gem_p=None, remove_fc=True, normalise_features=False)


def test_unknown_weights_key_and_missing_path() -> None:
    with pytest.raises(
        UnknownNameError, match="Unknown pretrained 'resnet50_moco_v3'.*Did you mean: resnet50_moco_v2"
    ):
        ResnetExtractor(
            "resnet50_moco_v3", arch="resnet50", gem_p=None, remove_fc=True, normalise_features=False
        )
    with pytest.raises(FileNotFoundError, match="no_such.pth"):
        ResnetExtractor(
            Path("no_such.pth"), arch="resnet18", gem_p=None, remove_fc=True, normalise_features=False
        )
    with pytest.raises(
        UnknownNameError, match="Unknown pretrained 'resnet18_imagenet'.*resnet18_imagenet1k_v1"
    ):
        ResnetExtractor.from_pretrained("resnet18_imagenet")


def test_unknown_arch_lists_the_known_ones() -> None:
    with pytest.raises(
        ValueError, match="'resnet19'.*resnet18, resnet34, resnet50, resnet50_projector, resnet101"
    ):
        ResnetExtractor(None, arch="resnet19", gem_p=None, remove_fc=True, normalise_features=False)


def test_registry_builds_resnet_from_config() -> None:
    registry = Registry(plugins=[("oml_models", models_plugin)], load_entrypoints=False)
    assert "resnet" in registry.names("extractor")
    cfg = {
        "name": "resnet",
        "args": {
            "weights": None,
            "arch": "resnet18",
            "gem_p": None,
            "remove_fc": True,
            "normalise_features": True,
        },
    }
    model = registry.build("extractor", cfg)
    assert isinstance(model, ResnetExtractor)
    assert model.feat_dim == 512
    with torch.no_grad():
        out = model.eval()(_images(2))
    torch.testing.assert_close(out.norm(dim=1), torch.ones(2))
    described = registry.describe("extractor", "resnet")
    assert described["factory"] == "oml_models.resnet:ResnetExtractor"
    assert "gem_p" in described["signature"]


def test_installed_entry_point_provides_resnet() -> None:
    registry = Registry()
    assert registry.get("extractor", "resnet").plugin.distribution == "oml-models"


# ------------------------------------------------------------------------------------------- the zoo rows
def test_zoo_rows_of_oml() -> None:
    from torchvision.models import (
        ResNet18_Weights,
        ResNet34_Weights,
        ResNet50_Weights,
        ResNet101_Weights,
        ResNet152_Weights,
    )

    from oml_core.zoo import get_pretrained, pretrained_keys

    torchvision_urls = {
        "resnet18": ResNet18_Weights.IMAGENET1K_V1.url,
        "resnet34": ResNet34_Weights.IMAGENET1K_V1.url,
        "resnet50": ResNet50_Weights.IMAGENET1K_V1.url,
        "resnet101": ResNet101_Weights.IMAGENET1K_V1.url,
        "resnet152": ResNet152_Weights.IMAGENET1K_V1.url,
    }
    imagenet = [f"{arch}_imagenet1k_v1" for arch in torchvision_urls]
    assert pretrained_keys(extractor="resnet") == sorted([*imagenet, "resnet50_moco_v2"])
    transforms = {"name": "norm_resize_hypvit_torch", "args": {"im_size": 256, "crop_size": 224}}
    for arch, url in torchvision_urls.items():
        row = get_pretrained(f"{arch}_imagenet1k_v1")
        assert (row.url, row.filename, row.md5, row.converter) == (url, url.rsplit("/", 1)[1], None, None)
        assert url.endswith(f"-{row.sha256}.pth") and len(row.sha256) == 8  # torchvision's own check
        assert row.init_args == {"arch": arch, "gem_p": None, "remove_fc": True, "normalise_features": False}
        assert row.transforms == transforms
    moco = get_pretrained("resnet50_moco_v2")
    assert moco.url == (
        "https://dl.fbaipublicfiles.com/moco/moco_checkpoints/moco_v2_800ep/moco_v2_800ep_pretrain.pth.tar"
    )
    assert moco.filename == "moco_v2_800ep_pretrain.pth.tar" and moco.md5 == "a04e12f8"
    assert moco.init_args == {
        "arch": "resnet50_projector",
        "gem_p": 5.0,
        "remove_fc": True,
        "normalise_features": False,
    }
    assert moco.converter == "oml_models.converters.resnet:moco_to_torchvision"
    assert moco.transforms == transforms


@pytest.fixture()
def offline_weights_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, no_network: None) -> Path:
    """An empty ``OML_WEIGHTS_DIR``; no network (``no_network`` of conftest.py)."""
    monkeypatch.setenv("OML_WEIGHTS_DIR", str(tmp_path))
    monkeypatch.setenv("OML_SKIP_WEIGHTS_CHECK", "1")  # fake weights under real zoo names
    return tmp_path


def _trunk(model: nn.Module, x: torch.Tensor) -> torch.Tensor:
    """The feature map of a torchvision ResNet (everything before its pooling)."""
    for name in ("conv1", "bn1", "relu", "maxpool", "layer1", "layer2", "layer3", "layer4"):
        x = getattr(model, name)(x)
    return x


def test_imagenet_row_loads_a_torchvision_file_without_network(offline_weights_dir: Path) -> None:
    from torchvision.models import resnet18

    torch.manual_seed(3)
    reference = resnet18(weights=None).eval()
    torch.save(reference.state_dict(), offline_weights_dir / "resnet18-f37072fd.pth")
    x = _images(2)
    with torch.no_grad():
        expected = _trunk(reference, x).mean(dim=(2, 3))  # average pooling, fc removed
        for model in (
            ResnetExtractor.from_pretrained("resnet18_imagenet1k_v1"),
            ZooExtractor.from_pretrained("resnet18_imagenet1k_v1"),
            ResnetExtractor(
                "resnet18_imagenet1k_v1", "resnet18", None, remove_fc=True, normalise_features=False
            ),
        ):
            assert isinstance(model, ResnetExtractor) and model.feat_dim == 512
            torch.testing.assert_close(model.eval()(x), expected)
        # the fc of the file is kept when asked for
        with_fc = ResnetExtractor.from_pretrained("resnet18_imagenet1k_v1", remove_fc=False).eval()
        torch.testing.assert_close(with_fc(x), reference(x))


def test_imagenet_resnet50_row(offline_weights_dir: Path) -> None:
    from torchvision.models import resnet50

    torch.manual_seed(4)
    reference = resnet50(weights=None).eval()
    torch.save(reference.state_dict(), offline_weights_dir / "resnet50-0676ba61.pth")
    x = _images(2)
    with torch.no_grad():
        out = ResnetExtractor.from_pretrained("resnet50_imagenet1k_v1").eval()(x)
        torch.testing.assert_close(out, _trunk(reference, x).mean(dim=(2, 3)))


def _write_moco_release(path: Path, seed: int) -> nn.Module:
    """A random query encoder, saved as MoCo's release does (the key encoder, queue and optimizer too)."""
    from torchvision.models import resnet50

    torch.manual_seed(seed)
    encoder_q = resnet50(num_classes=128)  # MoCo v2's head: the mlp replaces fc, its last layer kept
    encoder_q.fc = nn.Sequential(nn.Linear(2048, 2048), nn.ReLU(), encoder_q.fc)
    encoder_q.eval()
    state_dict = {f"module.encoder_q.{k}": v for k, v in encoder_q.state_dict().items()}
    state_dict.update({f"module.encoder_k.{k}": v for k, v in encoder_q.state_dict().items()})
    state_dict["module.queue"] = torch.randn(128, 16)
    state_dict["module.queue_ptr"] = torch.zeros(1, dtype=torch.long)
    optimizer = {"state": {}, "param_groups": [{"lr": 0.03, "momentum": 0.9, "params": [0, 1]}]}
    torch.save({"epoch": 800, "arch": "resnet50", "state_dict": state_dict, "optimizer": optimizer}, path)
    return encoder_q


def test_moco_row_loads_the_release_format_without_network(offline_weights_dir: Path) -> None:
    encoder_q = _write_moco_release(offline_weights_dir / "moco_v2_800ep_pretrain.pth.tar", seed=5)
    x = torch.randn(2, 3, 64, 64, generator=torch.Generator().manual_seed(6))
    with torch.no_grad():
        feats = _trunk(encoder_q, x)  # [2, 2048, 2, 2]
        gem = feats.clamp(min=1e-6).pow(5).mean(dim=(2, 3)).pow(1 / 5)  # GeM with p = 5
        model = ResnetExtractor.from_pretrained("resnet50_moco_v2").eval()
        assert model.feat_dim == 2048 and isinstance(model.model.avgpool, GEM)
        torch.testing.assert_close(model(x), gem)
        by_key = ResnetExtractor(
            "resnet50_moco_v2", "resnet50_projector", gem_p=5.0, remove_fc=True, normalise_features=False
        )
        torch.testing.assert_close(by_key.eval()(x), gem)
        # remove_fc=False keeps MoCo's projection head: the 128-d output of the query encoder
        head = ResnetExtractor.from_pretrained("resnet50_moco_v2", remove_fc=False).eval()
        torch.testing.assert_close(head(x), encoder_q.fc(gem), atol=1e-5, rtol=1e-4)


def test_moco_converter_rejects_other_files() -> None:
    from oml_models.converters.resnet import moco_to_torchvision

    weight = torch.zeros(1)
    converted = moco_to_torchvision(
        {
            "module.encoder_q.conv1.weight": weight,
            "module.encoder_k.conv1.weight": weight,
            "module.queue": weight,
        }
    )
    assert converted == {"conv1.weight": weight}
    with pytest.raises(CheckpointError, match="not a MoCo checkpoint.*keys: conv1.weight"):
        moco_to_torchvision({"conv1.weight": weight})


def test_missing_zoo_file_offline_says_where_to_put_it(offline_weights_dir: Path) -> None:
    from oml_core.zoo import PretrainedDownloadError

    with pytest.raises(PretrainedDownloadError) as info:
        ResnetExtractor.from_pretrained("resnet18_imagenet1k_v1")
    message = str(info.value)
    assert "https://download.pytorch.org/models/resnet18-f37072fd.pth" in message
    assert str(offline_weights_dir / "resnet18-f37072fd.pth") in message
