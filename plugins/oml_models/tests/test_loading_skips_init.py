"""An extractor built with ``weights`` skips its random initialisation (``build_for_weights``): every one of the
plugin's extractors, built from a real checkpoint file, ends with every parameter and buffer (persistent or
not) equal to those of today's path, a random initialisation and then the same checkpoint loaded over it."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from oml_core.registry import Registry

RESNET18 = {"arch": "resnet18", "gem_p": 3.0, "normalise_features": False}
#: Each extractor of the plugin (the smallest arch of each), with and without the parts a checkpoint may skip.
CASES = {
    "resnet": ("resnet", {**RESNET18, "remove_fc": False}),
    "resnet_remove_fc": ("resnet", {**RESNET18, "remove_fc": True}),
    "vit": ("vit", {"arch": "vits14_reg", "normalise_features": False}),
    "vit_clip": ("vit_clip", {"arch": "vitb32_224"}),
    "vit_unicom": ("vit_unicom", {"arch": "vitb32_unicom", "normalise_features": True}),
    "extractor_with_mlp": (
        "extractor_with_mlp",
        {
            "extractor": {"name": "resnet", "args": {**RESNET18, "remove_fc": True, "weights": None}},
            "mlp_features": [8],
        },
    ),
}


@pytest.fixture(scope="module")
def registry() -> Registry:
    return Registry(allow=["oml_models"], strict=True)


def _perturbed(state_dict: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """The state dict with every tensor changed, values no init gives: seeded noise added (its absolute value
    to the batch norms' variances, which stay positive), counters + 1."""
    generator = torch.Generator().manual_seed(1)
    perturbed = {}
    for key, value in state_dict.items():
        if not value.is_floating_point():
            perturbed[key] = value + 1
            continue
        noise = torch.randn(value.shape, generator=generator).to(value.dtype)
        perturbed[key] = value + (noise.abs() if key.endswith("running_var") else noise)
    return perturbed


@pytest.mark.parametrize("case", list(CASES))
def test_a_checkpoint_gives_the_state_of_a_random_init_then_the_load(
    registry: Registry, case: str, tmp_path: Path
) -> None:
    name, args = CASES[case]
    torch.manual_seed(0)
    today = registry.build("extractor", {"name": name, "args": {**args, "weights": None}})
    checkpoint = _perturbed(today.state_dict())
    path = tmp_path / "extractor.pth"
    torch.save(checkpoint, path)
    today.load_state_dict(checkpoint)  # today's path: the random init, then the checkpoint over it
    loaded = registry.build("extractor", {"name": name, "args": {**args, "weights": str(path)}})
    for kind in ("named_parameters", "named_buffers"):  # named_buffers: the non-persistent ones too
        expected = dict(getattr(today, kind)())
        got = dict(getattr(loaded, kind)())
        assert list(got) == list(expected)
        for key, value in expected.items():
            assert (got[key].dtype, got[key].device) == (value.dtype, value.device), key
            assert got[key].requires_grad == value.requires_grad, key
            torch.testing.assert_close(got[key], value, rtol=0, atol=0, msg=key)
    x = torch.randn(2, 3, 224, 224, generator=torch.Generator().manual_seed(2))
    with torch.no_grad():
        torch.testing.assert_close(loaded.eval()(x), today.eval()(x), rtol=0, atol=0)
