"""timm, open_clip, albumentations and OpenCV are extras of oml-models (``[vit]``, ``[clip]``, ``[all]``,
``[albu]``, ``[cv2]``): without them the plugin loads and the ResNet extractor builds and embeds, while an
extractor, a transform or the reader that needs one fails in one line naming the extra to install. Run for real
in a subprocess whose interpreter cannot import timm, open_clip, albumentations nor cv2."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import open_clip
import pytest
import tomllib
import torch
from oml_models.clip import CLIP_ARCHS, build_clip_visual
from packaging.requirements import Requirement
from packaging.version import Version

PROJECT = Path(__file__).parents[1] / "pyproject.toml"

#: Run by the subprocess: a finder first on ``sys.meta_path`` makes timm and open_clip unimportable (as when
#: they are not installed), then the plugin is used the way the pipelines use it; the outcome is printed as json.
SCRIPT = textwrap.dedent(
    """
    import json, sys

    BLOCKED = {"timm", "open_clip", "albumentations", "cv2"}

    class NotInstalled:
        def find_spec(self, name, path=None, target=None):
            if name.partition(".")[0] in BLOCKED:
                raise ModuleNotFoundError(f"No module named {name!r}", name=name)
            return None

    sys.meta_path.insert(0, NotInstalled())

    import torch
    import oml_models
    import oml_models.plugin
    from oml_core.cli.errors import error_report
    from oml_core.config.components import build_component
    from oml_core.registry import Registry

    registry = Registry(plugins=[("oml_models", oml_models.plugin)], load_entrypoints=False)
    resnet_args = {"weights": None, "arch": "resnet18", "gem_p": None, "remove_fc": True,
                   "normalise_features": True}
    resnet = build_component(registry, "extractor", {"name": "resnet", "args": resnet_args}, "extractor", "train")
    torch.manual_seed(0)
    with torch.no_grad():
        embeddings = resnet.eval()(torch.rand(2, 3, 64, 64))
    outcome = {
        "resnet": [type(resnet).__name__, list(embeddings.shape), embeddings.norm(dim=1).tolist()],
        "failures": {},
    }
    specs = {
        "vit": {"arch": "vits16", "normalise_features": True},
        "vit_unicom": {"arch": "vitb32_unicom", "normalise_features": True},
        "vit_clip": {"arch": "vitb32_224"},
    }
    for name, args in specs.items():
        try:
            build_component(registry, "extractor", {"name": name, "args": {"weights": None, **args}},
                            "extractor", "train")
        except Exception as e:
            report, status = error_report(e, ["train"])
            outcome["failures"][name] = [type(e).__name__, str(e), report, status]
    for name, args in {"norm_albu": {}, "norm_resize_albu": {"im_size": 8}}.items():
        try:
            build_component(registry, "transforms", {"name": name, "args": args}, "transforms_train", "train")
        except Exception as e:
            report, status = error_report(e, ["train"])
            outcome["failures"][name] = [type(e).__name__, str(e), report, status]
    outcome["norm_resize_pad"] = type(
        build_component(registry, "transforms", {"name": "norm_resize_pad", "args": {"im_size": 8}},
                        "transforms_train", "train")
    ).__name__
    try:
        oml_models.ViTExtractor
    except ModuleNotFoundError as e:
        outcome["import"] = [type(e).__name__, str(e)]
    from oml_core.utils.images import imread_cv2
    try:
        imread_cv2(b"not read")
    except ModuleNotFoundError as e:
        outcome["imread_cv2"] = [type(e).__name__, str(e)]
    outcome["imported"] = sorted(m for m in ("timm", "open_clip", "albumentations", "cv2") if m in sys.modules)
    print(json.dumps(outcome))
    """
)


@pytest.fixture(scope="module")
def outcome(tmp_path_factory: pytest.TempPathFactory) -> dict:
    """What the subprocess without timm and open_clip printed."""
    script = tmp_path_factory.mktemp("no_extras") / "use_the_plugin.py"
    script.write_text(SCRIPT)
    done = subprocess.run(
        [sys.executable, str(script)],
        capture_output=True,
        text=True,
        timeout=300,
        env={"OMP_NUM_THREADS": "1", "PATH": "/usr/bin:/bin", "HF_HUB_OFFLINE": "1"},
    )
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_the_resnet_builds_and_embeds_without_the_extras(outcome: dict) -> None:
    kind, shape, norms = outcome["resnet"]
    assert (kind, shape) == ("ResnetExtractor", [2, 512])
    assert norms == pytest.approx([1.0, 1.0], abs=1e-5)
    assert outcome["imported"] == []


@pytest.mark.parametrize(
    ("name", "library", "extra"),
    [("vit", "timm", "vit"), ("vit_unicom", "timm", "vit"), ("vit_clip", "open_clip_torch", "clip")],
)
def test_an_extractor_of_a_missing_extra_fails_in_one_line_naming_it(
    outcome: dict, name: str, library: str, extra: str
) -> None:
    error_type, message, report, status = outcome["failures"][name]
    expected = f'the extractor {name!r} needs {library}: pip install "oml-models[{extra}]"'
    assert expected in message and "\n" not in message
    assert report.startswith("error: ") and expected in report and "\n" not in report
    assert status == 2  # the CLI's status of a user error, not an internal one
    # vit and vit_unicom fail on importing their module (the registry's PluginLoadError), vit_clip on building
    # (the pipeline's ConfigError, which names the config key)
    if name == "vit_clip":
        assert error_type == "ConfigError" and message.startswith(
            "train: config key 'extractor' ('vit_clip'): "
        )
    else:
        assert error_type == "PluginLoadError"
        assert message.startswith(f"extractor {name!r} of plugin oml_models")


@pytest.mark.parametrize("name", ["norm_albu", "norm_resize_albu"])
def test_an_albumentations_transform_without_albumentations_fails_in_one_line_naming_the_extra(
    outcome: dict, name: str
) -> None:
    error_type, message, report, status = outcome["failures"][name]
    expected = "OML's albumentations transforms (norm_albu, norm_resize_albu, ...) needs albumentations: "
    assert expected + 'pip install "oml-models[albu]"' in message and "\n" not in message
    assert error_type == "PluginLoadError" and message.startswith(f"transforms {name!r} of plugin oml_models")
    assert report.startswith("error: ") and "\n" not in report and status == 2
    assert outcome["norm_resize_pad"] == "Compose"  # its torchvision counterpart needs no albumentations


def test_imread_cv2_without_opencv_names_the_extra(outcome: dict) -> None:
    assert outcome["imread_cv2"] == [
        "ModuleNotFoundError",
        'imread_cv2 needs OpenCV (opencv-python-headless): pip install "oml-models[cv2]"',
    ]


def test_importing_an_extractor_of_a_missing_extra_names_it(outcome: dict) -> None:
    assert outcome["import"] == [
        "MissingExtraError",
        "the extractor 'vit' needs timm: pip install \"oml-models[vit]\"",
    ]


def test_the_extras_are_declared_with_bounds() -> None:
    project = tomllib.loads(PROJECT.read_text())["project"]
    requirements = {Requirement(r).name for r in project["dependencies"]}
    assert not requirements & {"timm", "open-clip-torch", "open_clip_torch"}
    extras = {
        extra: {Requirement(r).name: Requirement(r) for r in reqs}
        for extra, reqs in project["optional-dependencies"].items()
    }
    assert set(extras) == {"vit", "clip", "all", "albu", "cv2"}
    assert set(extras["all"]) == {"oml-models"} and Requirement(
        project["optional-dependencies"]["all"][0]
    ).extras == {
        "vit",
        "clip",
    }
    for extra, name, installed, next_major in [
        ("vit", "timm", "1.0.31", "2"),
        ("clip", "open_clip_torch", "3.3.0", "4"),
        ("albu", "albumentations", "2.0.8", "3"),
        ("cv2", "opencv-python-headless", "5.0.0", "6"),
    ]:
        specifier = extras[extra][name].specifier
        assert Version(installed) in specifier and Version(next_major) not in specifier
        assert any(s.operator == ">=" for s in specifier) and any(s.operator == "<" for s in specifier)


@pytest.mark.parametrize("arch", list(CLIP_ARCHS))
def test_the_clip_tower_is_open_clips_visual_of_the_config(arch: str) -> None:
    """The tower built from open_clip's public API is the ``visual`` of open_clip's own CLIP of the config
    (OpenAI's QuickGELU): the same modules, parameter names, shapes and dtypes."""
    name = CLIP_ARCHS[arch]
    with torch.device("meta"):
        tower = build_clip_visual(name)
        reference = open_clip.create_model(name, pretrained=None, force_quick_gelu=True, device="meta").visual
    assert repr(tower) == repr(reference)
    assert [(k, v.shape, v.dtype) for k, v in tower.state_dict().items()] == [
        (k, v.shape, v.dtype) for k, v in reference.state_dict().items()
    ]


def test_the_clip_tower_computes_what_open_clips_does() -> None:
    torch.manual_seed(0)
    reference = open_clip.create_model("ViT-B-32", pretrained=None, force_quick_gelu=True).visual.eval()
    tower = build_clip_visual("ViT-B-32").eval()
    tower.load_state_dict(reference.state_dict())
    x = torch.randn(2, 3, 224, 224, generator=torch.Generator().manual_seed(1))
    with torch.no_grad():
        torch.testing.assert_close(tower(x), reference(x), rtol=0, atol=0)


def test_a_clip_config_that_is_not_an_openai_vit_is_refused() -> None:
    with pytest.raises(ValueError, match=r"open_clip has no model config 'ViT-Z-99'"):
        build_clip_visual("ViT-Z-99")
    with pytest.raises(
        ValueError,
        match=r"'RN50' is not an image tower of OpenAI's ViT kind \(unsupported vision_cfg: layers \[3, 4, 6, 3\]\)",
    ):
        build_clip_visual("RN50")
