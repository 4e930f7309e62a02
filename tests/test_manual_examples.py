"""The manual's Python examples with only the ``oml`` -> ``oml_core`` import change.

The imports are kept here as the manual prints them (``from oml.losses.triplet import ...``) and rewritten by
:func:`with_oml_core`, the one change a user makes. Every import statement of the manual's examples resolves to
the class or function it names, wherever it lives here (the core, or a plugin through the forwarding modules
of :mod:`oml_core.compat.modules`, files of the tree ``oml_core/compat/oml_paths/``).

Examples run whole: the dataframe check, the custom extractor and augmentations put into OML's registries and
trained by ``extractor_training_pipeline`` from a ``train.py`` (a subprocess, as the manual runs it), and
"How to use models from Zoo?" (on a locally saved random ``vits16_dino`` checkpoint; nothing is downloaded).
What differs from the printed text, besides the import change, is said at each example: paths of OML's own
mock dataset and weights file, and PDF line breaks. The examples that train or evaluate a ViT on every image of
the mock dataset are checked for their imports only (a ViT-S pass over 4 images takes ~2 s on this CPU).
"""

from __future__ import annotations

import os
import re
import textwrap
from pathlib import Path
from types import ModuleType

import pandas as pd
import pytest
import torch
from omegaconf import OmegaConf

import oml_core.compat.registries as oml_registries
from oml_core import const
from oml_core.compat.modules import OML_MODULES
from oml_core.compat.registries import KindRegistryView
from oml_core.datasets import get_mock_dataset_root
from oml_core.registry import PluginLoadError, Registry
from oml_core.utils.oml_path_folders import OML_PATHS_ROOT
from oml_core.zoo.store import get_pretrained
from tests.scripts.oml_forkserver import OmlForkServer

REPO = Path(__file__).resolve().parents[1]


def with_oml_core(code: str) -> str:
    """The change a user of OML makes: ``from oml.x import y`` -> ``from oml_core.x import y`` (and ``import``)."""
    return re.sub(r"^(\s*)(from|import) oml\.", r"\1\2 oml_core.", code, flags=re.MULTILINE)


#: Every import statement of the manual's Python examples (../shared/seeds/002_*.txt), as printed, except the
#: two misspelt names tested below.
MANUAL_IMPORTS = """\
from oml.utils.dataframe_format import check_retrieval_dataframe_format
from oml.interfaces.models import IExtractor
from oml.lightning.pipelines.train import extractor_training_pipeline
from oml.registry.models import EXTRACTORS_REGISTRY
from oml.registry.transforms import TRANSFORMS_REGISTRY
from oml.datasets.base import DatasetWithLabels
from oml.losses.triplet import TripletLossWithMiner
from oml.miners.inbatch_all_tri import AllTripletsMiner
from oml.samplers.balance import BalanceSampler
from oml.utils.download_mock_dataset import download_mock_dataset
from oml.datasets.base import DatasetQueryGallery
from oml.metrics.embeddings import EmbeddingMetrics
from oml.const import MOCK_DATASET_PATH
from oml.inference.flat import inference_on_images
from oml.models import ViTExtractor
from oml.registry.transforms import get_transforms_for_pretrained
from oml.utils.misc_torch import pairwise_dist
from oml.lightning.modules.extractor import ExtractorModule
from oml.lightning.callbacks.metric import MetricValCallback
from oml.lightning.pipelines.logging import (
    ClearMLPipelineLogger,
    MLFlowPipelineLogger,
    NeptunePipelineLogger,
    TensorBoardPipelineLogger,
    WandBPipelineLogger,
)
from oml.lightning.modules.extractor import ExtractorModuleDDP
from oml.lightning.callbacks.metric import MetricValCallbackDDP
from oml.metrics.embeddings import EmbeddingMetricsDDP
from oml.transforms.images.torchvision import get_normalisation_resize_torch
from oml.const import CKPT_SAVE_ROOT as CKPT_DIR, MOCK_DATASET_PATH as DATA_DIR
from oml.inference.flat import inference_on_dataframe
from oml.miners.pairs import PairsMiner
from oml.models import ConcatSiamese
from oml.retrieval.postprocessors.pairwise import PairwiseImagesPostprocessor
from oml.const import PATHS_COLUMN
"""


def _plugin_objects() -> dict[str, object]:
    """What the manual's plugin-provided names must be: the plugins' own top-level exports."""
    import oml_loggers
    import oml_losses
    import oml_models
    import oml_postprocessors
    import oml_samplers

    return {
        "TripletLossWithMiner": oml_losses.TripletLossWithMiner,
        "AllTripletsMiner": oml_losses.AllTripletsMiner,
        "PairsMiner": oml_losses.PairsMiner,
        "BalanceSampler": oml_samplers.BalanceSampler,
        "ViTExtractor": oml_models.ViTExtractor,
        "ConcatSiamese": oml_models.ConcatSiamese,
        "get_normalisation_resize_torch": oml_models.get_normalisation_resize_torch,
        "PairwiseImagesPostprocessor": oml_postprocessors.PairwiseImagesPostprocessor,
        **{
            name: getattr(oml_loggers, name)
            for name in (
                "ClearMLPipelineLogger",
                "MLFlowPipelineLogger",
                "NeptunePipelineLogger",
                "TensorBoardPipelineLogger",
                "WandBPipelineLogger",
            )
        },
    }


def test_every_import_of_the_manual_resolves_with_oml_core() -> None:
    namespace: dict[str, object] = {}
    exec(with_oml_core(MANUAL_IMPORTS), namespace)
    plugin_objects = _plugin_objects()
    from oml_core.datasets.mock import download_mock_dataset
    from oml_core.zoo.store import get_transforms_for_pretrained

    for name, expected in plugin_objects.items():
        assert namespace[name] is expected, name
    assert namespace["download_mock_dataset"] is download_mock_dataset
    assert namespace["get_transforms_for_pretrained"] is get_transforms_for_pretrained
    assert namespace["EXTRACTORS_REGISTRY"].kind == "extractor"
    assert namespace["TRANSFORMS_REGISTRY"].kind == "transforms"
    assert namespace["CKPT_DIR"] == const.CKPT_SAVE_ROOT
    assert namespace["PATHS_COLUMN"] == "path"
    core_names = (
        set(namespace) - set(plugin_objects) - {"__builtins__", "CKPT_DIR", "DATA_DIR", "PATHS_COLUMN"}
    )
    core_names -= {"MOCK_DATASET_PATH", "EXTRACTORS_REGISTRY", "TRANSFORMS_REGISTRY"}
    for name in core_names:  # everything else is the core's own
        assert namespace[name].__module__.startswith("oml_core."), name


def test_the_manuals_misspelt_names_fail_naming_where_was_looked() -> None:
    """The manual prints ``ViTEExtractor`` and ``ViTEncoder``, names OML never had; the error says so clearly."""
    for misspelt in ("ViTEExtractor", "ViTEncoder"):
        with pytest.raises(
            ImportError, match=rf"oml_core.models \(OML's oml.models\) has no '{misspelt}'.*oml_models"
        ):
            exec(with_oml_core(f"from oml.models import {misspelt}"), {})


def is_forwarding(module: ModuleType) -> bool:
    """Whether ``module`` is a forwarding module: a file of compat's tree of OML's paths."""
    return Path(module.__file__ or "").is_relative_to(OML_PATHS_ROOT)


def test_forwarding_modules_are_files_of_the_tree_and_cache_what_they_find() -> None:
    import oml_core.miners.inbatch_hard_tri as hard_tri
    import oml_losses

    assert is_forwarding(hard_tri) and not hasattr(hard_tri, "__path__")  # a module, not a package
    assert hard_tri.HardTripletsMiner is oml_losses.HardTripletsMiner
    assert vars(hard_tri)["HardTripletsMiner"] is oml_losses.HardTripletsMiner  # cached: found once
    with pytest.raises(AttributeError):
        hard_tri._private  # noqa: B018
    with pytest.raises(ModuleNotFoundError, match="oml_core.losses.no_such_module"):
        import oml_core.losses.no_such_module  # noqa: F401


def test_a_real_core_module_wins_over_a_forwarding_one() -> None:
    import oml_core.datasets.base as real

    assert not is_forwarding(real)
    assert not set(OML_MODULES) & {"datasets.base", "metrics.embeddings"}
    import oml_core.utils.dataframe_format as forwarded  # OML's path of a core module of another name

    assert is_forwarding(forwarded)


def test_a_core_module_source_is_searched_first() -> None:
    from oml_core.retrieval.postprocessors.algo import AdaptiveThresholding, ConstantThresholding

    from oml_core.retrieval.postprocessors.thresholding import AdaptiveThresholding as adaptive
    from oml_core.retrieval.postprocessors.thresholding import ConstantThresholding as constant

    assert (AdaptiveThresholding, ConstantThresholding) == (adaptive, constant)
    with pytest.raises(ImportError, match=r"oml_core.utils.dataframe_format has no 'get_mock_texts_dataset'"):
        from oml_core.utils.dataframe_format import get_mock_texts_dataset  # noqa: F401


def test_pca_from_misc_torch_as_in_oml() -> None:
    from oml_core.utils.misc_torch import PCA
    from oml_core.utils.pca import PCA as pca

    assert PCA is pca


# ------------------------------------------------------------------------------------------ the registries
@pytest.fixture()
def registry() -> Registry:
    return Registry(load_entrypoints=False)


def test_a_registry_view_reads_the_registry(registry: Registry) -> None:
    view = KindRegistryView("transforms", registry)
    assert list(view) == registry.names("transforms") and len(view) == len(registry.names("transforms"))
    assert "norm_resize" in view and "no_such_transforms" not in view and 3 not in view
    assert view["norm_resize"] is registry.get("transforms", "norm_resize").load()
    with pytest.raises(KeyError, match="Unknown transforms 'norm_resise'. Did you mean: norm_resize"):
        view["norm_resise"]
    assert view.get("norm_resise") is None
    with pytest.raises(TypeError, match="cannot be removed"):
        del view["norm_resize"]


def test_assigning_registers_and_assigning_again_replaces(registry: Registry) -> None:
    view = KindRegistryView("transforms", registry)

    def double() -> object:
        return lambda x: 2 * x

    def triple() -> object:
        return lambda x: 3 * x

    view["custom_augmentations"] = double
    assert registry.build("transforms", {"name": "custom_augmentations", "args": {}})(5) == 10
    view["custom_augmentations"] = triple  # a notebook cell run again: the new factory, no ambiguity
    assert registry.build("transforms", {"name": "custom_augmentations", "args": {}})(5) == 15
    assert [e.plugin.name for e in registry.entries("transforms") if e.name == "custom_augmentations"] == [
        "user-transforms-custom_augmentations"
    ]


def test_removing_a_plugin_forgets_its_components(registry: Registry) -> None:
    KindRegistryView("transforms", registry)["mine"] = lambda: abs
    registry.remove_plugin("user-transforms-mine")
    assert "mine" not in registry.names("transforms")
    with pytest.raises(KeyError, match="no plugin named 'user-transforms-mine'"):
        registry.remove_plugin("user-transforms-mine")


def test_assigning_a_class_of_the_wrong_interface_fails_at_once(registry: Registry) -> None:
    view = KindRegistryView("extractor", registry)
    with pytest.raises(PluginLoadError, match=r"'not_an_extractor'.*does not implement .*IExtractor"):
        view["not_an_extractor"] = torch.nn.Linear
    assert "not_an_extractor" not in view
    assert not [r for r in registry.plugins() if r.error]


def test_omls_get_by_cfg_functions_build_from_the_default_registry() -> None:
    loss = oml_registries.get_criterion_by_cfg(OmegaConf.create({"name": "triplet", "args": {"margin": 0.3}}))
    assert type(loss).__name__ == "TripletLoss" and loss.margin == 0.3
    params = [torch.nn.Parameter(torch.zeros(2))]
    optimizer = oml_registries.get_optimizer("sgd", params=params, lr=0.5)
    assert isinstance(optimizer, torch.optim.SGD) and optimizer.param_groups[0]["lr"] == 0.5


# ------------------------------------------------------------------------------------------ examples run
def test_dataframe_format_example(oml_cache_dir: Path) -> None:
    """The manual's check; its placeholder paths point at the mock dataset."""
    root = get_mock_dataset_root(cache_dir=oml_cache_dir)
    code = with_oml_core(
        textwrap.dedent(
            f"""
            import pandas as pd
            from oml.utils.dataframe_format import check_retrieval_dataframe_format

            check_retrieval_dataframe_format(df=pd.read_csv("{root}/df.csv"), dataset_root="{root}/")
            """
        )
    )
    exec(code, {})  # a good dataframe: no error
    bad = pd.read_csv(root / "df.csv").drop(columns=["label"])
    bad.to_csv(oml_cache_dir / "bad.csv", index=False)
    with pytest.raises(ValueError, match="label"):
        exec(code.replace(f"{root}/df.csv", str(oml_cache_dir / "bad.csv")), {})


#: The manual's train.py ("an example of using custom augmentations & extractor"), as printed.
CUSTOM_TRAIN_PY = """\
import hydra
import torchvision.transforms as t
from omegaconf import DictConfig
from torchvision.models import resnet18

from oml.interfaces.models import IExtractor
from oml.lightning.pipelines.train import extractor_training_pipeline
from oml.registry.models import EXTRACTORS_REGISTRY
from oml.registry.transforms import TRANSFORMS_REGISTRY

class CustomExtractor(IExtractor):

    def __init__(self, pretrained):
        super().__init__()
        self.resnet = resnet18(pretrained=pretrained)

    def forward(self, x):
        return self.resnet(x)

    # this property is obligatory for IExtractor
    @property
    def feat_dim(self):
        return self.resnet.fc.out_features


def get_custom_augs() -> t.Compose:
    return t.Compose([
        t.RandomHorizontalFlip(),
        t.RandomGrayscale(),
        t.ToTensor(),
        t.Normalize(mean=[0.485, 0.456, 0.406], std=[0.229, 0.224, 0.225]),
    ])

# Put extractor & transforms constructors to the registries
TRANSFORMS_REGISTRY["custom_augmentations"] = get_custom_augs
EXTRACTORS_REGISTRY["custom_extractor"] = CustomExtractor

@hydra.main(config_path="configs", config_name="train.yaml")
def main_hydra(cfg: DictConfig) -> None:
    extractor_training_pipeline(cfg)

if __name__ == "__main__":
    main_hydra()
"""


@pytest.mark.slow
def test_custom_extractor_and_augmentations_through_omls_registries(
    tmp_path: Path, oml_cache_dir: Path, oml_fork_server: OmlForkServer
) -> None:
    """The manual's ``train.py`` and its ``config.yaml``: the default training config with the manual's two keys
    (``transforms_train: {name: custom_augmentations, args: {}}``, ``extractor: {name: custom_extractor}``,
    with ``args: {pretrained: false}`` for the ``...`` the manual leaves out), one epoch."""
    (tmp_path / "train.py").write_text(with_oml_core(CUSTOM_TRAIN_PY))
    config = OmegaConf.load(REPO / "oml_core" / "configs" / "extractor_training_pipeline.yaml")
    config.transforms_train = {"name": "custom_augmentations", "args": {}}
    config.extractor = {"name": "custom_extractor", "args": {"pretrained": False}}
    config.max_epochs, config.logs_folder, config.validate_before_training = 1, "manual_run", False
    (tmp_path / "configs").mkdir()
    OmegaConf.save(config, tmp_path / "configs" / "train.yaml")
    env = {
        **os.environ,
        "OML_CACHE_DIR": str(oml_cache_dir),
        "OMP_NUM_THREADS": "1",
        "PYTHONWARNINGS": "ignore",
    }
    done = oml_fork_server.run([], env, cwd=tmp_path, script=tmp_path / "train.py", timeout=600)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    # hydra.main without version_base runs in hydra's output folder, outputs/<date>/<time>
    (best,) = tmp_path.glob("outputs/*/*/logs/manual_run/checkpoints/best.ckpt")
    checkpoint = torch.load(best, weights_only=True)
    weights = checkpoint["state_dict"]
    assert weights["extractor.resnet.fc.weight"].shape == (
        1000,
        512,
    )  # the manual's CustomExtractor was trained
    assert "OVERALL/cmc/1" in done.stdout


def _save_random_vits16_dino() -> Path:
    """A random checkpoint in DINO's release format (timm's names) under the zoo's file name for ``vits16_dino``."""
    import timm

    torch.manual_seed(0)
    state = timm.create_model("vit_small_patch16_224", pretrained=False, num_classes=0).state_dict()
    path = const.CKPT_SAVE_ROOT / get_pretrained("vits16_dino").filename
    path.parent.mkdir(parents=True, exist_ok=True)
    torch.save(state, path)
    return path


def test_how_to_use_models_from_the_zoo(
    tmp_path: Path, oml_cache_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """ "How to use models from Zoo?" as printed, on a random checkpoint saved in the weights cache. The mock
    dataset's ``images/circle_1.jpg`` is OML's name; OML named the file ``vits16_dino.ckpt``, the cache here
    keeps DINO's own file name."""
    monkeypatch.setenv("OML_CACHE_DIR", str(oml_cache_dir))
    monkeypatch.setenv("OML_WEIGHTS_DIR", str(tmp_path / "weights"))
    monkeypatch.setenv("OML_SKIP_WEIGHTS_CHECK", "1")  # random weights under the real zoo name
    monkeypatch.setenv("OML_OFFLINE", "1")  # a missing file would fail at once instead of being downloaded
    checkpoint = _save_random_vits16_dino()
    get_mock_dataset_root(cache_dir=oml_cache_dir)
    example = f"""
from oml.const import CKPT_SAVE_ROOT as CKPT_DIR, MOCK_DATASET_PATH as DATA_DIR
from oml.models import ViTExtractor
from oml.registry.transforms import get_transforms_for_pretrained

model = ViTExtractor.from_pretrained("vits16_dino")
transforms, im_reader = get_transforms_for_pretrained("vits16_dino")

img = im_reader(DATA_DIR / "images" / "circle_1.jpg") # put path to your image here
img_tensor = transforms(img)
# img_tensor = transforms(image=img)["image"] # for transforms from Albumentations

features = model(img_tensor.unsqueeze(0))

# Check other available models:
print(list(ViTExtractor.pretrained_models.keys()))

# Load checkpoint saved on a disk:
model_ = ViTExtractor(weights=CKPT_DIR / "{checkpoint.name}", arch="vits16", normalise_features=False)
"""
    namespace: dict[str, object] = {}
    with torch.no_grad():
        exec(with_oml_core(example), namespace)
        again = namespace["model_"].eval()(namespace["img_tensor"].unsqueeze(0))
    features = namespace["features"]
    assert features.shape == (1, 384)
    assert torch.allclose(features, again, atol=1e-5)  # the file loaded by path is the zoo's checkpoint
    assert namespace["img_tensor"].shape == (3, 224, 224)
